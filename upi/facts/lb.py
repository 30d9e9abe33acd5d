"""Load-balancer pools (openshift-docs installation-load-balancing-user-infra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from upi.inventory.model import Inventory, Node

API_PORT = 6443
MCS_PORT = 22623
HTTP_PORT = 80
HTTPS_PORT = 443


@dataclass(frozen=True)
class Backend:
    """One server line: always an IP (HAProxy resolves names only at start)."""

    name: str
    ip: str
    port: int
    backup: bool = False


@dataclass(frozen=True)
class Pool:
    """One layer-4 frontend and its servers.

    check "api": `GET /readyz` over TLS (the API's own health); "tcp": connect.
    """

    name: str
    port: int
    balance: Literal["roundrobin", "source"]
    check: Literal["api", "tcp"]
    servers: tuple[Backend, ...]


def _backends(nodes: list[Node], port: int, backup: set[str] | None = None) -> tuple[Backend, ...]:
    backup = backup or set()
    return tuple(Backend(n.name, str(n.ip), port, n.name in backup) for n in nodes)


def lb_pools(inv: Inventory, *, include_bootstrap: bool = True) -> list[Pool]:
    """API, machine-config and ingress pools.

    The bootstrap serves the API until the masters' own API is up; like the
    docs' sample it is a `backup` server, and it leaves the pool after
    bootstrap-complete (`include_bootstrap=False`).
    """
    control = [*([inv.bootstrap] if include_bootstrap else []), *inv.masters]
    backup = {inv.bootstrap.name}
    # One worker cannot hold both router replicas: the masters (schedulable then) share ingress.
    ingress = inv.workers if not inv.masters_schedulable else [*inv.masters, *inv.workers]
    return [
        Pool("api-server", API_PORT, "roundrobin", "api", _backends(control, API_PORT, backup)),
        Pool("machine-config-server", MCS_PORT, "roundrobin", "tcp",
             _backends(control, MCS_PORT, backup)),
        Pool("ingress-router-https", HTTPS_PORT, "source", "tcp", _backends(ingress, HTTPS_PORT)),
        Pool("ingress-router-http", HTTP_PORT, "source", "tcp", _backends(ingress, HTTP_PORT)),
    ]
