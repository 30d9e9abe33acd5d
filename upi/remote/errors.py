"""Errors of reaching a host: refused host keys, failed logins, dropped links."""

from __future__ import annotations

from upi.errors import UpiError


class RemoteError(UpiError):
    """A host could not be reached, refused us, or a command on it timed out."""


class HostKeyError(RemoteError):
    """The host's key is unknown or differs from known_hosts: nothing was sent."""
