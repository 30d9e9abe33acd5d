"""The RDMA verification's tables, like `upi gpu`'s per-node table: one row per DGX, one per pair.

docs/rdma.md ("Reading the table") explains each column.
"""

from __future__ import annotations

import sys

from upi import console
from upi.gpu.rdma_verify import NodeRow, PairRow, RdmaReport

NODE_COLUMNS = ["node", "fabric", "RDMA resource", "allocatable", "peermem", "NIC driver", "problem"]
PAIR_COLUMNS = ["pair", "fabric", "round", "Gb/s average", "Gb/s peak", "minimum", "verdict", "seconds"]


def node_cells(row: NodeRow) -> list[str]:
    """A DGX's row: what the device plugin offers, nvidia-peermem, the NIC driver pod, the problem."""
    return [row.node, row.fabric, row.resource, str(row.allocatable), row.peermem, row.nic_driver,
            row.problem or "-"]


def pair_cells(row: PairRow, min_gbps: float) -> list[str]:
    """A pair's row: the client's figures against the minimum, and the verdict."""
    def gbps(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "-"

    return [row.name, row.fabric, str(row.round + 1), gbps(row.average_gbps), gbps(row.peak_gbps),
            f"{min_gbps:g}", row.verdict, f"{row.seconds:.1f}"]


def print_tables(report: RdmaReport) -> None:
    """The per-node and the per-pair table (`upi gpu` prints them after its GPU table)."""
    if report.nodes:
        console.print_table("RDMA nodes", NODE_COLUMNS, [node_cells(n) for n in report.nodes])
    if report.pairs:
        console.print_table("RDMA pairs (ib_write_bw, GPU memory to GPU memory)", PAIR_COLUMNS,
                            [pair_cells(p, report.min_gbps) for p in report.pairs])


def show_rdma(report: RdmaReport, *, as_json: bool) -> None:
    """Both tables (or the JSON report), then the first failure's diagnosis on stderr."""
    if as_json:
        console.print_json(report.to_json())
        return
    print_tables(report)
    if report.diagnosis is not None:
        console.error(report.diagnosis.text())
    elif report.ok:
        console.say("GPUDirect RDMA verified on every DGX" + (" and every pair" if report.pairs else ""))
    sys.stdout.flush()
