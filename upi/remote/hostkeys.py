"""Host keys: checked against known_hosts, refused with a fingerprint and the fix.

known_hosts is read by upi, not by paramiko (whose loader stops with an
exception at the first line it does not understand): comments, blank and
malformed lines and `@cert-authority` lines (paramiko cannot check host
certificates) are skipped and named in the refusal if the host turns out
unknown; a key under `@revoked` is refused for every host, even where
another line lists it. Hashed names (`|1|salt|hash`) match as in ssh.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import paramiko

from upi.remote.errors import HostKeyError
from upi.safefs import UnreadableFile, read_named_file, shown

MAX_KNOWN_HOSTS = 8 * 1024 * 1024  # a known_hosts of 50,000 hosts is well under this
MARKERS = ("@cert-authority", "@revoked")


def fingerprint(key: paramiko.PKey) -> str:
    """`SHA256:...` as `ssh-keygen -lf` and ssh print it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names a host: `host`, or `[host]:port` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def _accept_hint(host: str, port: int, key_type: str, known_hosts: Path) -> str:
    scan = shlex.join(["ssh-keyscan", "-p", str(port), "-t", key_type, host])
    path = shlex.quote(str(known_hosts))
    return (f"check the fingerprint on the host itself (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), "
            f"then accept it with:\n  {scan} >> {path}")


def unknown_key(host: str, port: int, key: paramiko.PKey, known_hosts: Path) -> HostKeyError:
    """The error for a host known_hosts does not list."""
    return HostKeyError(
        f"{known_hosts_name(host, port)} is not in {known_hosts}: refused to connect. "
        f"It offered {key.get_name()} key {fingerprint(key)}; "
        + _accept_hint(host, port, key.get_name(), known_hosts))


def changed_key(host: str, port: int, got: paramiko.PKey, expected: paramiko.PKey,
                known_hosts: Path) -> HostKeyError:
    """The error for a host whose key differs from the one in known_hosts."""
    name = known_hosts_name(host, port)
    forget = shlex.join(["ssh-keygen", "-R", name, "-f", str(known_hosts)])
    return HostKeyError(
        f"the host key of {name} CHANGED: refused to connect (this can be an attack). "
        f"known_hosts has {expected.get_name()} {fingerprint(expected)}, the host offered "
        f"{got.get_name()} {fingerprint(got)}. If the host was reinstalled, remove the old key "
        f"with:\n  {forget}\nand " + _accept_hint(host, port, got.get_name(), known_hosts))


class RefuseUnknown(paramiko.RejectPolicy):
    """RejectPolicy that says which key was refused and how to accept it."""

    def __init__(self, host: str, port: int, known: KnownHosts) -> None:
        self.host, self.port, self.known = host, port, known

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        """Refuse, always: an unknown host is never trusted on first use."""
        if key.asbytes() in self.known.revoked:
            raise revoked_key(self.host, self.port, key, self.known)
        err = unknown_key(self.host, self.port, key, self.known.path)
        raise HostKeyError(str(err) + self.known.unused())


@dataclass
class KnownHosts:
    """What a known_hosts file says: keys by host, revoked keys, and the lines left unused."""

    path: Path
    entries: list[tuple[str, str, paramiko.PKey]] = field(default_factory=list)
    revoked: dict[bytes, int] = field(default_factory=dict)  # key blob -> its line
    skipped: list[str] = field(default_factory=list)  # "line N: why"

    def install(self, client: paramiko.SSHClient) -> None:
        """Give the client every known key that is not revoked."""
        keys = client.get_host_keys()
        for name, key_type, key in self.entries:
            if key.asbytes() not in self.revoked:
                keys.add(name, key_type, key)

    def unused(self) -> str:
        """A sentence naming the lines upi skipped (empty when none were)."""
        if not self.skipped:
            return ""
        more = f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else ""
        return (f" {shown(self.path)} has lines upi cannot use: {'; '.join(self.skipped[:5])}{more}.")


def _key(key_type: str, blob: str) -> paramiko.PKey | None:
    try:
        return paramiko.PKey.from_type_string(key_type, base64.b64decode(blob, validate=True))
    except Exception:  # noqa: BLE001 - paramiko raises many kinds for a bad blob: all mean unusable
        return None


def _line(known: KnownHosts, number: int, text: str) -> None:
    fields = text.split()
    marker = fields.pop(0) if fields and fields[0].startswith("@") else None
    if marker is not None and marker not in MARKERS:
        known.skipped.append(f"line {number}: unknown marker {marker[:30]!r}")
        return
    if len(fields) < 3:
        known.skipped.append(f"line {number}: not `host key-type key`")
        return
    names, key_type, blob = fields[:3]
    key = _key(key_type, blob)
    if key is None:
        known.skipped.append(f"line {number}: not a {key_type[:40]!r} key upi can read")
    elif marker == "@revoked":
        known.revoked.setdefault(key.asbytes(), number)
    elif marker == "@cert-authority":
        known.skipped.append(f"line {number}: @cert-authority (upi does not check host certificates: "
                             "list the host's own key)")
    else:
        usable = [name for name in names.split(",") if name and _name_ok(name)]
        if len(usable) < len(names.split(",")):
            known.skipped.append(f"line {number}: a malformed host name or hash")
        known.entries += [(name, key_type, key) for name in usable]


def _name_ok(name: str) -> bool:
    """A plain name, or a `|1|salt|hash` whose parts are base64 (paramiko would crash on others)."""
    if not name.startswith("|"):
        return True
    parts = name.split("|")
    try:
        return len(parts) == 4 and parts[1] == "1" and all(
            base64.b64decode(p, validate=True) for p in parts[2:])
    except (binascii.Error, ValueError):
        return False


def load_known_hosts(path: Path) -> KnownHosts:
    """Parse `path` (missing: no keys); a FIFO, device or oversized file is refused (exit 2)."""
    known = KnownHosts(path)
    try:
        raw = read_named_file(path, MAX_KNOWN_HOSTS)
    except FileNotFoundError:
        return known
    except OSError as exc:
        raise UnreadableFile(f"known_hosts {shown(path)}: cannot read it ({exc.strerror or exc})") from None
    except UnreadableFile as exc:
        raise UnreadableFile(f"known_hosts {exc}") from None
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        text = line.strip()
        if text and not text.startswith("#"):
            _line(known, number, text)
    return known


def revoked_key(host: str, port: int, key: paramiko.PKey, known: KnownHosts) -> HostKeyError:
    """The error for a host that offers a key known_hosts marks @revoked."""
    return HostKeyError(
        f"{known_hosts_name(host, port)} offered {key.get_name()} key {fingerprint(key)}, which "
        f"{shown(known.path)} line {known.revoked[key.asbytes()]} marks @revoked: refused to connect. "
        "Give the host a new key (ssh-keygen -A after removing the old one) and check its "
        "fingerprint before listing it.")
