"""Nodes and their Ready condition, for the summary at the end of `upi wait`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLE_LABEL = "node-role.kubernetes.io/"


@dataclass(frozen=True)
class NodeStatus:
    """One Node: its name, roles (from labels) and whether its Ready condition is True."""

    name: str
    roles: tuple[str, ...]
    ready: bool


def _status(node: Any) -> NodeStatus | None:
    """One Node from the API's JSON; None when it is not shaped like one (never a traceback)."""
    meta = node.get("metadata") if isinstance(node, dict) else None
    if not isinstance(meta, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = meta.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    roles = tuple(sorted(k[len(ROLE_LABEL):] for k in labels if isinstance(k, str)
                         and k.startswith(ROLE_LABEL)))
    status = node.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    conds = conds if isinstance(conds, list) else []
    ready = any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                for c in conds)
    return NodeStatus(name, roles, ready)


def node_readiness(kubeconfig: Path, *, timeout: float = 10.0) -> list[NodeStatus]:
    """Every Node, sorted by name. Raises UpiError or the client's error when the API does not answer."""
    from upi.csr.api import Api
    from upi.csr.client import NODE_URL
    from upi.csr.connect import connect

    conn = connect(kubeconfig, timeout=timeout)
    try:
        _, items = Api(conn.http).list(NODE_URL)
        return sorted((s for s in map(_status, items) if s is not None), key=lambda s: s.name)
    finally:
        conn.close()
