"""`upi gpu`: NFD + NVIDIA GPU Operator through OLM, verified on every GPU node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from upi.cli.base import InventoryArg, JsonOpt, app, duration_option


@app.command(
    epilog="\b\nExamples:\n  upi gpu inventories/dgxpod.yaml --dir assets/dgxpod\n"
    "  upi gpu inventories/dgxpod.yaml --kubeconfig ~/.kube/config --dry-run\n"
    "  upi gpu inventories/dgxpod.yaml --dir assets/dgxpod --json --timeout 45m\n"
    "  upi gpu inventories/dgxpod.yaml --dir assets/dgxpod --node worker-2",
)
def gpu(
    inventory: InventoryArg,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", metavar="FILE", show_default=False,
        help="Kubeconfig of the cluster (default: KUBECONFIG, then ASSETS/auth/kubeconfig).")]
    = None,
    assets: Annotated[Path | None, typer.Option(
        "--dir", metavar="ASSETS", show_default=False,
        help="openshift-install's assets directory, for its auth/kubeconfig (default: none, "
        "see --kubeconfig).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Run the pre-flight checks and print what would be applied; change nothing.")]
    = False,
    as_json: JsonOpt = False,
    timeout: Annotated[float, duration_option(
        "--timeout", unit="m", default=3600,
        help="Give up after this long (the driver build takes 10-20 min)")]
    = 3600,
    poll: Annotated[float, duration_option(
        "--poll", unit="s", default=5.0, help="How often to look at the cluster while waiting")]
    = 5.0,
    node: Annotated[list[str] | None, typer.Option(
        "--node", metavar="NODE", show_default=False,
        help="Verify only this GPU node (a DGX added on day 2); repeatable (default: every GPU node).")]
    = None,
) -> None:
    """Install NFD and the NVIDIA GPU Operator and prove every GPU node works (docs/gpu.md).

    Pre-flight checks (each with its fix), then through OLM with server-side
    apply: NFD, the GPU Operator (only the chosen CSV's InstallPlan is
    approved), the NodeFeatureDiscovery and the ClusterPolicy from the CSVs'
    examples plus the inventory's overrides, and each `mig_config` as the
    node's nvidia.com/mig.config label. With a DGX's `rdma:` the NVIDIA
    Network Operator comes before the ClusterPolicy: its NicClusterPolicy
    ready (the NIC driver loaded on every `rdma:` node), the fabric network,
    then the ClusterPolicy with driver.rdma.enabled (docs/rdma.md). Then
    every `gpu: true` node must show the NVIDIA PCI label,
    nvidia.com/gpu.present, its product and allocatable nvidia.com/gpu equal
    to `gpus` (a MIG node: at least one MIG device per GPU), and run one
    validation pod that logs the success line.
    With gpu_pool.metrics on, the cluster's Prometheus (the Thanos querier
    route, TLS verified by the ingress CA) must hold a DCGM_FI_DEV_GPU_UTIL
    series for every GPU of every GPU node.
    Exit 0 only when every GPU node is verified; 1 with a diagnosis; 2 for
    bad input. A second run changes nothing.
    """
    from upi.commands.gpu import gpu_command

    report = gpu_command(inventory, kubeconfig=kubeconfig, assets=assets, dry_run=dry_run,
                         as_json=as_json, timeout_minutes=timeout / 60, poll=poll, nodes=node or [])
    if not report.ok:
        raise typer.Exit(1)
