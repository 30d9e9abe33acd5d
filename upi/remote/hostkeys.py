"""Host keys: checked against known_hosts, refused with a fingerprint and the fix."""

from __future__ import annotations

import base64
import hashlib
import shlex
from pathlib import Path
from typing import NoReturn

import paramiko

from upi.remote.errors import HostKeyError


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

    def __init__(self, host: str, port: int, known_hosts: Path) -> None:
        self.host, self.port, self.known_hosts = host, port, known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        """Refuse, always: an unknown host is never trusted on first use."""
        raise unknown_key(self.host, self.port, key, self.known_hosts)
