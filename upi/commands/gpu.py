"""`upi gpu`: connect, run the GPU flow with a live display, print the table or JSON."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from upi import console
from upi.csr.connect import connect, find_kubeconfig
from upi.errors import UsageError
from upi.gpu.display import GpuDisplay
from upi.gpu.flow import GpuReport, check_pace, run_gpu
from upi.gpu.kube import Kube
from upi.gpu.steps import Clock, Reporter
from upi.inventory import Inventory, load_inventory

COLUMNS = ["node", "label", "product", "GPUs expected/allocatable", "driver", "validation", "seconds",
           "DCGM", "metrics"]


def gpu_command(inventory: Path, *, kubeconfig: Path | None, assets: Path | None, dry_run: bool,
                as_json: bool, timeout_minutes: float, poll: float = 5.0,
                nodes: Sequence[str] = ()) -> GpuReport:
    """Run `upi gpu` and print its outcome; the caller exits 1 unless the report is ok."""
    check_pace(timeout_minutes, poll)
    inv = load_inventory(inventory, check_files=False)
    if not any(n.gpu for n in inv.nodes):
        raise UsageError(f"{inventory} marks no node gpu: true; upi gpu has nothing to set up")
    only = gpu_nodes_named(inv, nodes)
    path = find_kubeconfig(kubeconfig, assets)
    with GpuDisplay(out=sys.stderr if as_json else sys.stdout) as display:
        report = gpu_on_cluster(inv, path, display, timeout_minutes=timeout_minutes, poll=poll,
                                dry_run=dry_run, only=only)
    show(report, as_json=as_json)
    return report


def gpu_nodes_named(inv: Inventory, names: Sequence[str]) -> frozenset[str]:
    """--node values: each a `gpu: true` node of the inventory (exit 2 naming the others)."""
    gpu = [n.name for n in inv.nodes if n.gpu]
    wrong = [console.shown_name(n) for n in dict.fromkeys(names) if n not in gpu]
    if wrong:
        raise UsageError(f"--node {', '.join(wrong)}: not a gpu: true node of {inv.source} "
                         f"(GPU nodes: {', '.join(gpu)})")
    return frozenset(names)


def gpu_on_cluster(inv: Inventory, kubeconfig: Path | None, reporter: Reporter, *,
                   timeout_minutes: float, poll: float, dry_run: bool = False,
                   only: frozenset[str] = frozenset()) -> GpuReport:
    """The GPU flow against the kubeconfig's cluster (`upi gpu`, and `upi wait --gpu` after the install)."""
    conn = connect(kubeconfig)
    # Labels follow ClusterPolicy ready within seconds; give them 30 looks before judging.
    clock = Clock(timeout_minutes * 60, poll=poll, settle=30 * poll)
    try:
        inv = driver_from_bmcs(inv, reporter)
        return run_gpu(inv, Kube(conn), clock, reporter, dry_run=dry_run, only=only)
    finally:
        conn.close()


def driver_from_bmcs(inv: Inventory, reporter: Reporter) -> Inventory:
    """The inventory with `gpu.driver` decided: auto asks the GPU nodes' BMCs about Secure Boot.

    Secure Boot keeps an unsigned, node-built NVIDIA driver from loading; the
    precompiled images carry signed modules (upi.gpu.precompiled). Only GPU
    nodes with a bmc section are asked; a BMC that cannot be asked is a
    warning, never a stop. `gpu.driver: build` with Secure Boot on is warned about.
    """
    from upi.gpu.precompiled import driver_mode
    from upi.inventory.gpu import settings
    from upi.inventory.model import Machine

    names = [n.name for n in inv.nodes if n.gpu and n.bmc is not None and n.machine_kind is Machine.metal]
    reported: dict[str, bool | None] = {}
    if names:
        from upi.bmc.flow import power  # sushy only when a GPU node has a BMC

        result = power(inv, names, None, warn=reporter.warn)
        for name, error in result.errors.items():
            reporter.warn(f"{name}: Secure Boot not checked ({error})")
        reported = {name: state.secure_boot for name, state in result.states.items()}
    mode = driver_mode(inv, reported)
    gpu = settings(inv)
    on = [n for n in names if reported.get(n)]
    if on:
        reporter.note(f"{', '.join(on)}: Secure Boot on; NVIDIA driver: {mode} (gpu.driver: {gpu.driver})")
    if gpu.driver == mode:
        return inv
    return inv.model_copy(update={"gpu": gpu.model_copy(update={"driver": mode})})


def show(report: GpuReport, *, as_json: bool) -> None:
    """The per-node table (or JSON), the dry-run plan, and the diagnosis of a failure."""
    if as_json:
        doc = report.to_json()
        if report.dry_run:
            doc["planned"] = report.planned
        console.print_json(doc)
        return
    if report.dry_run:
        console.say("--dry-run: nothing was changed; upi gpu would apply:")
        for text in report.planned:
            console.say("---\n" + text.rstrip())
    if report.nodes:
        console.print_table("GPU nodes", COLUMNS, [
            [n.node, n.label or "-", n.product or "-",
             f"{n.expected if n.expected is not None else 'any'}/{n.allocatable}"
             + (f" (MIG {n.mig})" if n.mig else ""), n.driver or "-",
             n.validation, f"{n.seconds:.1f}", n.diagnosis or "-", n.metrics or "-"] for n in report.nodes])
    if report.rdma is not None:  # GPUDirect RDMA per DGX and per pair (docs/rdma.md, "Reading the table")
        from upi.gpu.rdma_table import print_tables

        print_tables(report.rdma)
    if report.diagnosis is not None:
        console.error(report.diagnosis.text())
    elif report.ok and not report.dry_run:
        console.say("GPUs verified on every GPU node"
                    + (", GPUDirect RDMA on every DGX and pair" if report.rdma is not None else "")
                    + ("" if report.changed else
                                                          " (nothing changed: already installed)"))
