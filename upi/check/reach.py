"""Why a host did not answer, in words, and the fix for that cause.

Every checker dials a host this machine may not reach: no route (`ENETUNREACH`
from a host outside the machine network), nothing listening (`ECONNREFUSED`),
a firewall that drops (a timeout), a name that does not resolve. Each becomes
a `Miss` whose `cause` picks the hint, so a FAIL row says what to do for that
cause instead of a traceback or one hint for all of them.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import Literal

from upi.inventory import Inventory

Cause = Literal["no route", "unreachable", "refused", "timeout", "no name", "reset", "other"]

# No route in this machine's own table: it is outside the network it probes.
_NO_ROUTE = {errno.ENETUNREACH, errno.ENETDOWN, errno.EADDRNOTAVAIL}
# A route, but the host is not there (no ARP answer) or a firewall rejects: firewalld's
# default reject is icmp-host-prohibited, which the kernel reports as EHOSTUNREACH.
_UNREACHABLE = {errno.EHOSTUNREACH, errno.EHOSTDOWN}


@dataclass(frozen=True)
class Miss:
    """A probe that reached nobody: its cause and the words for the row's `got` column."""

    cause: Cause
    text: str


def miss(exc: BaseException) -> Miss:
    """The cause of a network error (`OSError`, `socket.gaierror`, `TimeoutError`, ...)."""
    strerror = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if isinstance(exc, socket.gaierror | UnicodeError):
        return Miss("no name", f"name does not resolve ({strerror})")
    if isinstance(exc, TimeoutError) or getattr(exc, "errno", None) == errno.ETIMEDOUT:
        return Miss("timeout", "timed out")
    if isinstance(exc, ConnectionRefusedError):
        return Miss("refused", "connection refused")
    if isinstance(exc, ConnectionResetError):
        return Miss("reset", "connection reset")
    if getattr(exc, "errno", None) in _NO_ROUTE:
        return Miss("no route", f"no route ({strerror})")
    if getattr(exc, "errno", None) in _UNREACHABLE:
        return Miss("unreachable", f"host unreachable ({strerror})")
    return Miss("other", str(strerror))


def endpoint(host: str, port: int, proto: str = "") -> str:
    """`10.33.3.18:69 (udp)`, `[::1]:8080`: a host and port as a user would write them."""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" + (f" ({proto})" if proto else "")


def hint(m: Miss, inv: Inventory, host: str, where: str, *, listens: str, firewall: str,
         redirect: str = "--server") -> str:
    """The fix for `m` at `where` (`host:port`): `listens` says what should listen there.

    `firewall` names the rendered script that opens the port on that host;
    `redirect` the flag that points the check elsewhere (a tunnel, a test server).
    """
    if m.cause == "no route":
        return (f"this machine has no route to {host}: run `upi check` on the provisioner or "
                f"another host in {inv.network.machine_cidr}, or reach {host} through a tunnel "
                f"and name it with {redirect}")
    if m.cause == "no name":
        return f"{host} does not resolve on this machine: give --server its IP address"
    if m.cause == "unreachable":
        return (f"{where}: {m.text}: the host is down or not on this network, or its firewall "
                f"rejects the port: run the rendered {firewall} on it")
    if m.cause == "refused":
        return f"nothing listens on {where}: {listens}"
    if m.cause == "timeout":
        return (f"{where} does not answer (the host is down, or a firewall drops the packets): "
                f"check that the host is up and run the rendered {firewall} on it")
    return f"{where}: {m.text}: {listens}"
