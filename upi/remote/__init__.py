"""Reaching the hosts `upi push` writes to: locally or over SSH, one interface."""

from __future__ import annotations

from pathlib import Path

from upi.inventory.model import Inventory, SshTarget
from upi.remote.base import Transport
from upi.remote.errors import HostKeyError, RemoteError
from upi.remote.local import LocalTransport
from upi.remote.ssh import SshTransport

__all__ = ["HostKeyError", "LocalTransport", "RemoteError", "SshTransport", "Transport",
           "open_transport"]


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
