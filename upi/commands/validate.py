"""`upi validate`: the summary it prints (kept apart from render: no Jinja, no writer to import)."""

from __future__ import annotations

from typing import Any

from upi.inventory import Inventory
from upi.inventory.rules import warnings


def summary(inv: Inventory) -> dict[str, Any]:
    """What `upi validate` reports: the cluster and every node with its defaults applied."""
    return {
        "cluster": inv.cluster.domain,
        "openshift_version": inv.cluster.openshift_version,
        "network_type": inv.network_type.value,
        "topology": "compact" if inv.compact else "standard",
        "nodes": [
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
        ],
        "warnings": warnings(inv),
    }
