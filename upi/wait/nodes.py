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


def _status(node: Any) -> NodeStatus:
    labels = node.metadata.labels or {}
    roles = tuple(sorted(k[len(ROLE_LABEL):] for k in labels if k.startswith(ROLE_LABEL)))
    conds = (node.status.conditions or []) if node.status else []
    ready = any(c.type == "Ready" and c.status == "True" for c in conds)
    return NodeStatus(node.metadata.name, roles, ready)


def node_readiness(kubeconfig: Path, *, timeout: float = 10.0) -> list[NodeStatus]:
    """Every Node, sorted by name. Raises UpiError or the client's error when the API does not answer."""
    from lightkube.resources.core_v1 import Node

    from upi.csr.connect import connect

    conn = connect(kubeconfig, timeout=timeout)
    try:
        return sorted((_status(n) for n in conn.api.list(Node)), key=lambda s: s.name)
    finally:
        conn.close()
