"""The one-time network boot override, as DGX (AMI) firmware in the field takes it.

Ends with the override read back from the BMC, or one BmcError naming the
node and what the BMC said. What firmware does (facts: reference/redfish.md,
the AMI fake in tests/redfish_support.py and the sources it names):

- the ETag is in the `ETag` header, or only in the body as `@odata.etag`
  (DSP0266 1.8.1 section 9.5.3), or nowhere: If-Match carries whichever there is;
- a PATCH without If-Match is answered 428: DMTF Base `PreconditionRequired`,
  AMI `Ami.1.0.PreconditionHeaderMissing`; a stale one 412 `PreconditionFailed`.
  Both are retried once with the ETag of a fresh GET (`*`, RFC 7232 3.1,
  when the BMC gives none);
- a Boot PATCH on the system is answered 400 `Ami.1.0.OperationSupportedInFutureStateURI`
  (the AMI registry of ocp-hm-openbmc-opf-ami/bmcweb): it belongs in the
  settings object the system advertises (`@Redfish.Settings.SettingsObject`),
  applied at the next reset;
- a PATCH to the wrong place is answered 204 and dropped: only the read-back tells;
- the settings object lists every Boot key, or only the pending ones.

The settings object is PATCHed first when it lists the override keys (as
sushy's `set_system_boot_options` decides), else the system first; the other
place is tried when the first refuses with the future-state id or drops it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from upi.bmc.redfish import ONCE, PXE, UEFI, BmcError, BootOverride, translated

if TYPE_CHECKING:
    from upi.bmc.redfish import Redfish

KEYS = ("BootSourceOverrideEnabled", "BootSourceOverrideTarget", "BootSourceOverrideMode")
MOVED = "OperationSupportedInFutureStateURI"  # the last part of the MessageId, any registry version
PRECONDITION = (412, 428)


def message_id(exc: Any) -> str | None:
    """The first MessageId of a sushy HTTPError's Redfish error body (or its `code`)."""
    for info in getattr(exc, "extended_info", None) or []:
        if isinstance(info, dict) and isinstance(info.get("MessageId"), str):
            return str(info["MessageId"])
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code != "Base.1.0.GeneralError" else None


def _etag(bmc: Redfish, path: str) -> str | None:
    """The resource's ETag: the header, else the body's `@odata.etag`."""
    resp = bmc._root._conn.get(path)
    tag = resp.headers.get("ETag")
    if not tag:
        doc = resp.json()
        tag = doc.get("@odata.etag") if isinstance(doc, dict) else None
    return tag if isinstance(tag, str) and tag else None


def _patch(bmc: Redfish, path: str, body: dict[str, Any]) -> str | None:
    """PATCH `body` to `path` with If-Match; None when accepted, the BMC's words when it says go elsewhere."""
    from sushy import exceptions as sx

    tag = _etag(bmc, path)
    for attempt in (1, 2):
        try:
            # etag=None: sushy's own fallback (retry without If-Match) is what AMI drops silently.
            bmc._root._conn.patch(path, data=body, headers={"If-Match": tag} if tag else None)
            return None
        except sx.HTTPError as exc:
            mid = message_id(exc) or ""
            if exc.status_code == 400 and mid.rsplit(".", 1)[-1] == MOVED:
                return f"PATCH {path}: HTTP 400 {exc.detail or 'no detail'} ({mid})"
            if exc.status_code not in PRECONDITION or attempt == 2:
                raise
            tag = _etag(bmc, path) or ("*" if exc.status_code == 428 else tag)
    return None  # not reached: the second attempt returns or raises


def _places(bmc: Redfish, system: str, settings: str | None) -> list[str]:
    if settings is None:
        return [system]
    pending = bmc._get(settings).get("Boot")
    lists = isinstance(pending, dict) and any(k in pending for k in KEYS)
    return [settings, system] if lists else [system, settings]


def set_one_time_pxe(bmc: Redfish) -> BootOverride:
    """PATCH a one-time UEFI network boot where the firmware keeps it, and read it back."""
    t = bmc.target
    with translated(t, "setting a one-time network boot"):
        doc = bmc._fresh()
        found = doc.get("Boot")
        boot: dict[str, Any] = found if isinstance(found, dict) else {}
        allowed = boot.get("BootSourceOverrideTarget@Redfish.AllowableValues")
        if isinstance(allowed, list) and allowed and PXE not in allowed:
            raise BmcError(f"{t.where}: the BMC offers no network boot (BootSourceOverrideTarget: "
                           f"{', '.join(map(str, allowed))[:200]})")
        has_mode = "BootSourceOverrideMode" in boot
        want = {"BootSourceOverrideEnabled": ONCE, "BootSourceOverrideTarget": PXE,
                **({"BootSourceOverrideMode": UEFI} if has_mode else {})}
        tried: list[str] = []
        got = BootOverride(None, None, None)
        for place in _places(bmc, bmc._system.path, bmc.settings_object(doc)):
            refused = _patch(bmc, place, {"Boot": want})
            if refused:
                tried.append(refused)
                continue
            with translated(t, "reading back the boot override"):
                got = bmc.state().override
            if got.target == PXE and (not has_mode or got.mode in (None, UEFI)):
                return got
            tried.append(f"PATCH {place}: accepted, not kept")
    said = "; ".join(tried)
    if all(not s.endswith("not kept") for s in tried):
        raise BmcError(f"{t.where}: refused the one-time network boot everywhere it was sent ({said})")
    raise BmcError(f"{t.where}: asked for a one-time UEFI network boot, but the BMC kept "
                   f"target={got.target} mode={got.mode}: the change was dropped ({said})")
