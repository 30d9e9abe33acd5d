"""`upi validate`: the summary it prints (kept apart from render: no Jinja, no writer to import)."""

from __future__ import annotations

from typing import Any

from upi.inventory import Inventory
from upi.inventory.rules import warnings
from upi.inventory.segments import segment_of, segments


def summary(inv: Inventory) -> dict[str, Any]:
    """What `upi validate` reports: the cluster and every node with its defaults applied.

    With racks (network.machine_networks): every machine network, and each node's.
    """
    nodes: list[dict[str, Any]] = [
        {
            "name": n.name,
            "role": n.role.value,
            "machine": n.machine_kind.value,
            "firmware": n.boot_firmware.value,
            "mac": n.mac,
            "ip": str(n.ip),
            "install_disk": n.disk,
            "gpu": n.gpu,
        }
        for n in inv.nodes
    ]
    doc: dict[str, Any] = {
        "cluster": inv.cluster.domain,
        "openshift_version": inv.cluster.openshift_version,
        "network_type": inv.network_type.value,
        "topology": "compact" if inv.compact else "standard",
        "nodes": nodes,
        "warnings": warnings(inv),
    }
    segs = segments(inv)
    if len(segs) > 1:
        doc["machine_networks"] = [{"name": g.tag, "cidr": str(g.cidr), "gateway": str(g.gateway),
                                    "relay": str(g.relay) if g.relay else None} for g in segs]
        for node, row in zip(inv.nodes, nodes, strict=True):
            seg = segment_of(segs, node.ip)
            row["network"] = seg.tag if seg else None
    return doc
