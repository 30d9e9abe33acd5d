"""`upi power ... secure-boot status|on|off`: the system's Redfish SecureBoot resource.

The DMTF SecureBoot schema (SecureBoot.v1_1_0, redfish.dmtf.org/schemas/v1/)
has `SecureBootEnable` (writable: whether UEFI Secure Boot is enabled; a
change does not alter `SecureBootCurrentBoot` until the system resets),
`SecureBootCurrentBoot` (read-only: Enabled/Disabled during this boot) and
`SecureBootMode`. So a switch is PATCHed, read back from `SecureBootEnable`,
and takes effect at the next boot. The PATCH goes the way the boot override
does (upi.bmc.override): If-Match with the resource's ETag where the BMC
gives one, one retry on 412/428; a SecureBoot resource that advertises a
settings object (`@Redfish.Settings`) is PATCHed and read back there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from upi.bmc.flow import Warn, _ignore, chosen_nodes, in_parallel, open_bmc, target_of
from upi.bmc.override import _patch
from upi.bmc.redfish import BmcError, Redfish, translated
from upi.inventory.model import Inventory, Node

SecureBootAction = Literal["on", "off"]
NEXT_BOOT = "takes effect at the next boot"


@dataclass(frozen=True)
class SecureBootState:
    """A system's SecureBoot resource as the BMC reports it (None: not reported)."""

    node: str
    resource: str
    enable: bool | None  # SecureBootEnable: what the firmware enforces from the next boot on
    current: str | None  # SecureBootCurrentBoot: Enabled/Disabled during this boot
    mode: str | None  # SecureBootMode

    @property
    def enable_text(self) -> str:
        """on, off, or unknown."""
        return {True: "on", False: "off", None: "unknown"}[self.enable]

    def as_json(self) -> dict[str, Any]:
        """One object for --json."""
        return {"node": self.node, "resource": self.resource, "secure_boot_enable": self.enable,
                "current_boot": self.current, "mode": self.mode}


def _text(value: Any) -> str | None:
    return str(value)[:40] if isinstance(value, str) and value else None


def _resource(bmc: Redfish) -> str:
    """The SecureBoot link of the system, or BmcError naming the node."""
    with translated(bmc.target, "reading the system"):
        link = bmc._fresh().get("SecureBoot")
    path = link.get("@odata.id") if isinstance(link, dict) else None
    if not isinstance(path, str) or not path:
        raise BmcError(f"{bmc.target.where}: the system has no SecureBoot resource (no SecureBoot "
                       "link): switch Secure Boot in the firmware's setup instead")
    return path


def _read(bmc: Redfish, path: str) -> tuple[SecureBootState, str | None]:
    """The resource's state (pending value from its settings object, if any) and that object's path."""
    with translated(bmc.target, "reading Secure Boot"):
        doc = bmc._get(path)
        settings = bmc.settings_object(doc)
        enable = doc.get("SecureBootEnable")
        if settings is not None:
            pending = bmc._get(settings).get("SecureBootEnable")
            enable = pending if isinstance(pending, bool) else enable
    state = SecureBootState(bmc.target.node, path, enable if isinstance(enable, bool) else None,
                            _text(doc.get("SecureBootCurrentBoot")), _text(doc.get("SecureBootMode")))
    return state, settings


def read_secure_boot(bmc: Redfish) -> SecureBootState:
    """The system's Secure Boot, as its SecureBoot resource says."""
    return _read(bmc, _resource(bmc))[0]


def set_secure_boot(bmc: Redfish, enable: bool) -> SecureBootState:
    """PATCH `SecureBootEnable` (with If-Match where there is an ETag) and read it back."""
    t = bmc.target
    path = _resource(bmc)
    _, settings = _read(bmc, path)
    place = settings or path
    with translated(t, f"turning Secure Boot {'on' if enable else 'off'}"):
        refused = _patch(bmc, place, {"SecureBootEnable": enable})
    if refused:
        raise BmcError(f"{t.where}: refused to turn Secure Boot {'on' if enable else 'off'} ({refused})")
    got, _ = _read(bmc, path)
    if got.enable is not enable:
        raise BmcError(f"{t.where}: asked for SecureBootEnable {str(enable).lower()} at {place}, but "
                       f"the BMC reads back {got.enable_text}: the change was not kept")
    return got


@dataclass
class SecureBootResult:
    """What `upi power ... secure-boot` saw and did, per node."""

    states: dict[str, SecureBootState] = field(default_factory=dict)
    sent: dict[str, str] = field(default_factory=dict)  # node -> what was (or would be) PATCHed
    errors: dict[str, str] = field(default_factory=dict)

    def as_json(self, order: Sequence[str]) -> list[dict[str, Any]]:
        """One object per node, in inventory order."""
        out = []
        for name in order:
            item: dict[str, Any] = {"node": name}
            if name in self.states:
                item.update(self.states[name].as_json())
            if name in self.sent:
                item["sent"] = self.sent[name]
            if name in self.errors:
                item["error"] = self.errors[name]
            out.append(item)
        return out


def secure_boot(inv: Inventory, names: Sequence[str], action: SecureBootAction | None, *,
                dry_run: bool = False, warn: Warn = _ignore) -> SecureBootResult:
    """Read every chosen node's Secure Boot; with `action`, switch it (not with dry_run) and read back."""
    nodes = chosen_nodes(inv, names)

    def job(node: Node) -> tuple[SecureBootState, str | None]:
        bmc = open_bmc(target_of(inv, node), warn)
        try:
            state = read_secure_boot(bmc)
            if action is None:
                return state, None
            want = action == "on"
            if state.enable is want:
                return state, "none"
            if dry_run:
                return state, f"would send SecureBootEnable {str(want).lower()}"
            return set_secure_boot(bmc, want), f"SecureBootEnable {str(want).lower()} ({NEXT_BOOT})"
        finally:
            bmc.close()

    done, errors = in_parallel(nodes, job)
    result = SecureBootResult(errors=errors)
    for name, (state, sent) in done.items():
        result.states[name] = state
        if sent is not None:
            result.sent[name] = sent
    return result
