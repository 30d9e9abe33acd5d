"""Reaching the hosts `upi push` writes to: locally or over SSH, one interface."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from upi.inventory.model import Inventory, SshTarget
from upi.remote.base import Transport
from upi.remote.errors import HostKeyError, RemoteError
from upi.remote.local import LocalTransport
from upi.remote.ssh import SshTransport

__all__ = ["HostKeyError", "LocalTransport", "RemoteError", "SshTransport", "Transport",
           "host_access", "is_local", "open_host", "open_transport"]

Host = Literal["provisioner", "load_balancer"]


def host_access(inv: Inventory, host: Host) -> tuple[SshTarget, str]:
    """How upi reaches the provisioner or the load balancer: its `ssh` section, and its address.

    The one rule every command follows (`upi push`, `upi status`, `upi wait`;
    docs/push.md): no `ssh` section is an empty one, so SSH to the host's
    `ip` as root on port 22, its key checked against ~/.ssh/known_hosts;
    only `ssh: {local: true}` makes it the machine upi runs on.
    """
    section = inv.provisioner.ssh if host == "provisioner" else inv.load_balancer.ssh
    address = inv.provisioner.ip if host == "provisioner" else inv.load_balancer.ip
    return section or SshTarget(), str(address)


def is_local(inv: Inventory, host: Host) -> bool:
    """Whether `host` is the machine upi runs on (its `ssh` section says `local: true`)."""
    return host_access(inv, host)[0].local


def open_host(inv: Inventory, host: Host) -> Transport:
    """The way to the provisioner or the load balancer (an SSH one connects on first use)."""
    section, address = host_access(inv, host)
    return open_transport(inv, section, address)


def open_transport(inv: Inventory, target: SshTarget | None, default_host: str) -> Transport:
    """The transport for a target: local, or SSH (to `default_host` unless `host` is set).

    Relative known_hosts and identity_file paths are read from the inventory's
    directory; without `known_hosts`, `~/.ssh/known_hosts` is used.
    """
    cfg = target or SshTarget()
    if cfg.local:
        return LocalTransport(cfg.command_timeout)
    known = inv.resolve(cfg.known_hosts) if cfg.known_hosts else Path("~/.ssh/known_hosts").expanduser()
    identity = inv.resolve(cfg.identity_file) if cfg.identity_file else None
    return SshTransport(cfg.host or default_host, port=cfg.port, user=cfg.user,
                        known_hosts=known, identity_file=identity,
                        connect_timeout=cfg.connect_timeout, command_timeout=cfg.command_timeout)
