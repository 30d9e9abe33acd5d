"""One BMC over Redfish, through sushy: find the system, read its state, power, one-time network boot.

sushy does the protocol work that real BMCs need (basic auth, the settings
object and its ETag on AMI-based DGX BMCs, reset actions); this module
turns its results and errors into upi's: every message names the node and
its BMC, never a password. Facts: reference/redfish.md.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from upi.bmc.credentials import Credentials
from upi.errors import UpiError

# sushy logs each retry and each refused ETag as a warning; upi reports errors itself, once.
logging.getLogger("sushy").addHandler(logging.NullHandler())
logging.getLogger("sushy").propagate = False

PowerAction = Literal["on", "off", "restart"]
PXE, ONCE, UEFI = "Pxe", "Once", "UEFI"


class BmcError(UpiError):
    """A BMC could not be reached, refused upi, or did not do what it was asked."""


@dataclass(frozen=True)
class Target:
    """Where and how to reach one node's BMC (from its inventory `bmc` section)."""

    node: str
    address: str
    credentials_file: Path
    system_id: str | None
    verify: bool | str  # True, False, or a CA file path
    timeout: float

    @property
    def where(self) -> str:
        """`worker-0 (BMC https://...)`: how messages name this BMC."""
        return f"{self.node} (BMC {self.address})"


@dataclass(frozen=True)
class BootOverride:
    """A system's boot source override as the BMC reports it (None: not reported)."""

    enabled: str | None
    target: str | None
    mode: str | None

    def __str__(self) -> str:
        if self.enabled in (None, "Disabled") or self.target in (None, "None"):
            return "none"
        mode = f" ({self.mode})" if self.mode else ""
        return f"{self.target} {str(self.enabled).lower()}{mode}"

    def as_json(self) -> dict[str, str | None]:
        """The three Redfish fields."""
        return {"enabled": self.enabled, "target": self.target, "mode": self.mode}


@dataclass(frozen=True)
class SystemState:
    """What `upi power status` shows for one node."""

    node: str
    system: str
    power: str
    override: BootOverride
    secure_boot: bool | None
    settings_object: str | None

    @property
    def secure_boot_text(self) -> str:
        """on, off, or unknown (the BMC has no SecureBoot resource)."""
        return {True: "on", False: "off", None: "unknown"}[self.secure_boot]

    def as_json(self) -> dict[str, Any]:
        """One object for --json."""
        return {"node": self.node, "system": self.system, "power": self.power,
                "boot_override": self.override.as_json(), "secure_boot": self.secure_boot,
                "settings_object": self.settings_object}


def _override(boot: dict[str, Any]) -> BootOverride:
    return BootOverride(boot.get("BootSourceOverrideEnabled"), boot.get("BootSourceOverrideTarget"),
                        boot.get("BootSourceOverrideMode"))


@contextlib.contextmanager
def translated(target: Target, doing: str) -> Iterator[None]:
    """The exceptions of sushy as one-line BmcErrors naming the node, its BMC and what was being done."""
    from requests import exceptions as rq
    from sushy import exceptions as sx

    from upi.bmc.bounded import AnswerRefused
    from upi.bmc.origin import OffOrigin

    try:
        yield
    except (AnswerRefused, OffOrigin) as exc:
        raise BmcError(f"{target.where}: {exc} while {doing}") from None
    except sx.AccessError as exc:
        raise BmcError(f"{target.where}: refused the credentials in {target.credentials_file} "
                       f"(HTTP {exc.status_code}) while {doing}") from None
    except sx.ConnectionError as exc:
        cause = exc.__context__
        if isinstance(cause, rq.Timeout):
            raise BmcError(f"{target.where}: no answer within {target.timeout:g} s while {doing} "
                           "(is the BMC network reachable from here?)") from None
        raise BmcError(f"{target.where}: {_connect_failure(cause or exc)} while {doing}{_hint(cause)}") \
            from None
    except sx.HTTPError as exc:
        from upi.bmc.override import message_id

        detail = str(getattr(exc, "detail", None) or "no detail")[:300]
        m = re.search(r"HTTP (\w+) (\S+) returned", str(exc))
        request = f" to {m.group(1)} {_path(m.group(2))}" if m else ""
        mid = message_id(exc)
        said = f"{detail} ({str(mid)[:80]})" if mid else detail
        raise BmcError(f"{target.where}: HTTP {exc.status_code}{request} while {doing}: {said}") from None
    except sx.SushyError as exc:
        raise BmcError(f"{target.where}: {doing} failed: {exc}") from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        # Not Redfish: HTML, truncated or absurdly nested JSON, or JSON of the wrong shape
        # (requests' JSONDecodeError is a ValueError; sushy indexes what it gets).
        why = str(exc)[:120] or type(exc).__name__
        raise BmcError(f"{target.where}: answered something that is not Redfish JSON while {doing} "
                       f"({why})") from None


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first: requests wraps urllib3, which wraps the OSError."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(out) < 32:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        reason = getattr(e, "reason", None)
        todo += [e.__cause__, e.__context__, reason if isinstance(reason, BaseException) else None,
                 *(a for a in e.args if isinstance(a, BaseException))]
    return out


def _connect_failure(exc: BaseException) -> str:
    """What went wrong, in the system's words (the errno text, the TLS alert), never a library's repr.

    requests' own text ("HTTPSConnectionPool(host=..., port=...): Max retries
    exceeded with url ... (Caused by NewConnectionError(...") names nothing the
    admin did not already know and hides the cause in the middle.
    """
    import socket
    import ssl

    chain = _chain(exc)
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"TLS verification failed ({e.verify_message or e.reason or 'certificate refused'})"
    for e in chain:
        if isinstance(e, ssl.SSLError):
            why = str(e.reason or "").replace("_", " ").lower() or (e.strerror or "").strip()
            return f"TLS handshake failed ({why or 'no detail'})"
    for e in chain:
        if isinstance(e, socket.gaierror):
            return f"cannot connect ({e.strerror or 'the host name does not resolve'})"
    for e in chain:
        if isinstance(e, OSError) and e.strerror:
            return f"cannot connect ({e.strerror})"
    return f"cannot connect ({type(chain[-1]).__name__})"


def _hint(cause: BaseException | None) -> str:
    import ssl

    chain = _chain(cause) if cause is not None else []
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        return "; give its CA file as bmc.verify_tls, or set verify_tls: false to skip the check"
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return " (is it an https:// Redfish service on that port?)"
    return ""


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path or url


class Redfish:
    """A session with one BMC and the one system it manages for this node."""

    def __init__(self, target: Target, credentials: Credentials) -> None:
        import sushy
        from sushy import auth

        from upi.bmc.bounded import DEADLINE_FACTOR, BoundedAdapter
        from upi.bmc.origin import OriginConnector

        self.target = target
        conn = OriginConnector(target.address, verify=target.verify, default_request_timeout=target.timeout,
                         connect_timeout=target.timeout,
                         # One try per request: a BMC that does not answer is reported, not retried.
                         server_side_retries=1, server_side_retries_delay=1)
        # sushy has no hook for its requests session; the adapter bounds each request as a whole
        # and sends none away from the BMC (its password goes with each).
        bounded = BoundedAdapter(target.timeout * DEADLINE_FACTOR, link=conn.link)
        for scheme in ("https://", "http://"):
            conn._session.mount(scheme, bounded)
        with translated(target, "reading the service root"):
            self._root = sushy.Sushy(
                target.address, auth=auth.BasicAuth(credentials.username, credentials.password),
                connector=conn)
            self._system = self._root.get_system(self._system_path())

    def _system_path(self) -> str:
        t = self.target
        with translated(t, "listing /redfish/v1/Systems"):
            members = sorted(self._root.get_system_collection().members_identities)
        ids = [m.rstrip("/").rsplit("/", 1)[-1] for m in members]
        if t.system_id is not None:
            if t.system_id in ids:
                return str(members[ids.index(t.system_id)])
            raise BmcError(f"{t.where}: no system {t.system_id!r}; the BMC has {', '.join(ids) or 'none'}")
        if len(members) == 1:
            return str(members[0])
        if not members:
            raise BmcError(f"{t.where}: /redfish/v1/Systems lists no system")
        raise BmcError(f"{t.where}: the BMC manages {len(members)} systems ({', '.join(ids)}): "
                       "name this node's in bmc.system_id")

    def _get(self, path: str) -> dict[str, Any]:
        # sushy keeps no public "GET this path"; its connector carries the auth, TLS and timeouts.
        doc = self._root._conn.get(path).json()
        return doc if isinstance(doc, dict) else {}

    def _fresh(self) -> dict[str, Any]:
        self._system.refresh(force=True)
        doc = self._system.json
        return doc if isinstance(doc, dict) else {}

    def settings_object(self, doc: dict[str, Any]) -> str | None:
        """The settings object the system advertises (AMI: `<system>/SD`), if any."""
        settings = doc.get("@Redfish.Settings") or {}
        obj = settings.get("SettingsObject") if isinstance(settings, dict) else None
        path = obj.get("@odata.id") if isinstance(obj, dict) else None
        return path if isinstance(path, str) and path else None

    def state(self) -> SystemState:
        """Power state, boot override (pending, where a settings object holds it) and Secure Boot."""
        with translated(self.target, "reading the system"):
            doc = self._fresh()
            settings = self.settings_object(doc)
            boot = doc.get("Boot") or {}
            if settings:
                pending = self._get(settings).get("Boot") or {}
                boot = {**boot, **{k: v for k, v in pending.items() if k.startswith("BootSourceOverride")}}
            return SystemState(self.target.node, self._system.path, str(doc.get("PowerState", "unknown")),
                               _override(boot), self._secure_boot(doc), settings)

    def _secure_boot(self, doc: dict[str, Any]) -> bool | None:
        link = doc.get("SecureBoot")
        path = link.get("@odata.id") if isinstance(link, dict) else None
        if not path:
            return None
        from upi.bmc.bounded import AnswerRefused
        from upi.bmc.origin import OffOrigin

        try:
            value = self._get(path).get("SecureBootEnable")
        except (AnswerRefused, OffOrigin):
            raise  # a link away from the BMC, or a hostile answer, is an error, not "unknown"
        except Exception:  # noqa: BLE001 - a BMC without a readable SecureBoot resource: unknown
            return None
        return value if isinstance(value, bool) else None

    def power(self, action: PowerAction) -> str:
        """Carry out `action`; the Redfish reset sent (or `none` when the system is already there)."""
        with translated(self.target, f"powering {action}"):
            power = str(self._fresh().get("PowerState", ""))
            allowed = {str(getattr(v, "value", v)) for v in self._system.get_allowed_reset_system_values()}
            on = power in ("On", "PoweringOn")
            if action == "on":
                return self._reset("On", allowed) if not on else "none"
            if action == "off":
                return self._reset("ForceOff", allowed) if power not in ("Off", "PoweringOff") else "none"
            if not on:
                return self._reset("On", allowed)
            if "ForceRestart" in allowed or not allowed:
                return self._reset("ForceRestart", allowed)
            self._reset("ForceOff", allowed)
            return "ForceOff + " + self._reset("On", allowed)

    def _reset(self, kind: str, allowed: set[str]) -> str:
        import sushy

        if allowed and kind not in allowed:
            raise BmcError(f"{self.target.where}: the BMC does not offer reset {kind} "
                           f"(it offers {', '.join(sorted(allowed))})")
        self._system.reset_system(sushy.ResetType(kind))
        return kind

    def one_time_pxe(self) -> BootOverride:
        """Ask for one UEFI network boot at the next reset, then read back what the BMC stored.

        Where it goes, with which ETag, and what each firmware answers: upi.bmc.override.
        Raises BmcError when the read-back does not show the network target.
        """
        from upi.bmc.override import set_one_time_pxe

        return set_one_time_pxe(self)

    def close(self) -> None:
        """End the session (basic auth holds no server state; the HTTP pool is released)."""
        with contextlib.suppress(Exception):
            self._root._conn.close()
