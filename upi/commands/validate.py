"""`upi validate`: the summary it prints (kept apart from render: no Jinja, no writer to import)."""

from __future__ import annotations

from typing import Any

from upi.inventory import Inventory
from upi.inventory.rules import warnings
from upi.inventory.segments import segment_of, segments


def yes_no(value: object) -> str:
    """How the table shows a flag: `yes`/`no`, never Python's True/False."""
    return "yes" if value else "no"


def table_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The node table of `upi validate`: GPUs, BMC and insecure TLS as yes/no; Secure Boot (or auto)."""
    cols = ["name", "role", "machine", "firmware", "mac", "ip", "install_disk", "gpu", "bmc",
            "insecure tls", "secure boot"]
    if "machine_networks" in doc:  # racks behind relays: which network each node is in
        cols.append("network")
    rows = []
    for n in doc["nodes"]:
        gpu = yes_no(n["gpu"]) + (f" ({n['gpus']})" if n["gpu"] and n["gpus"] else "")
        rows.append([n["name"], n["role"], n["machine"], n["firmware"], n["mac"], n["ip"],
                     n["install_disk"], gpu, yes_no(n["bmc"]), yes_no(n["insecure_tls"]),
                     "auto" if n["secure_boot"] == "auto" else yes_no(n["secure_boot"]),
                     *([n["network"] or "-"] if "machine_networks" in doc else [])])
    return cols, rows


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
            "gpus": n.gpus,  # the count the node must show, or None: any
            "bmc": n.bmc.address if n.bmc else None,
            # TLS to the BMC not verified (verify_tls: false): upi warns at every use
            "insecure_tls": bool(n.bmc and n.bmc.verify_tls is False),
            # true: handed shim + the signed GRUB; auto: boot-metal asks the BMC (docs/secure-boot.md)
            "secure_boot": n.secure_boot_mode,
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
