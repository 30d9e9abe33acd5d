"""`upi validate`: the summary it prints (kept apart from render: no Jinja, no writer to import)."""

from __future__ import annotations

from typing import Any

from upi.inventory import Inventory
from upi.inventory.rules import warnings


def yes_no(value: object) -> str:
    """How the table shows a flag: `yes`/`no`, never Python's True/False."""
    return "yes" if value else "no"


def table_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The node table of `upi validate`: GPUs, BMC and insecure TLS as yes/no."""
    cols = ["name", "role", "machine", "firmware", "mac", "ip", "install_disk", "gpu", "bmc",
            "insecure tls"]
    rows = []
    for n in doc["nodes"]:
        gpu = yes_no(n["gpu"]) + (f" ({n['gpus']})" if n["gpu"] and n["gpus"] else "")
        rows.append([n["name"], n["role"], n["machine"], n["firmware"], n["mac"], n["ip"],
                     n["install_disk"], gpu, yes_no(n["bmc"]), yes_no(n["insecure_tls"])])
    return cols, rows


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
                "gpus": n.gpus,  # the count the node must show, or None: any
                "bmc": n.bmc.address if n.bmc else None,
                # TLS to the BMC not verified (verify_tls: false): upi warns at every use
                "insecure_tls": bool(n.bmc and n.bmc.verify_tls is False),
            }
            for n in inv.nodes
        ],
        "warnings": warnings(inv),
    }
