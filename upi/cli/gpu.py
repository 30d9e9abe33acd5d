"""`upi gpu`: NFD + NVIDIA GPU Operator through OLM, verified on every GPU node."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from upi.cli.base import InventoryArg, JsonOpt, app


@app.command(
    epilog="\b\nExamples:\n  upi gpu inventories/dgxpod.yaml --dir assets/dgxpod\n"
    "  upi gpu inventories/dgxpod.yaml --kubeconfig ~/.kube/config --dry-run\n"
    "  upi gpu inventories/dgxpod.yaml --dir assets/dgxpod --json --timeout 45",
)
def gpu(
    inventory: InventoryArg,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="Kubeconfig of the cluster (default: KUBECONFIG, then DIR/auth/kubeconfig).")]
    = None,
    assets: Annotated[Path | None, typer.Option(
        "--dir", help="openshift-install's assets directory (holds auth/kubeconfig).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Run the pre-flight checks and print what would be applied; change nothing.")]
    = False,
    as_json: JsonOpt = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", metavar="MIN", help="Give up after this many minutes (the driver build takes 10-20).")]
    = 60.0,
    poll: Annotated[float, typer.Option(
        "--poll", metavar="SECONDS", help="How often to look at the cluster while waiting.")] = 5.0,
) -> None:
    """Install NFD and the NVIDIA GPU Operator and prove every GPU node works (docs/gpu.md).

    Pre-flight checks (each with its fix), then through OLM with server-side
    apply: NFD, the GPU Operator (only the chosen CSV's InstallPlan is
    approved), the NodeFeatureDiscovery and the ClusterPolicy from the CSVs'
    examples plus the inventory's overrides. Then every `gpu: true` node must
    show the NVIDIA PCI label, nvidia.com/gpu.present, its product and
    allocatable nvidia.com/gpu equal to `gpus`, and run one validation pod
    that logs the success line. Exit 0 only when every GPU node is verified;
    1 with a diagnosis; 2 for bad input. A second run changes nothing.
    """
    from upi.commands.gpu import gpu_command

    report = gpu_command(inventory, kubeconfig=kubeconfig, assets=assets, dry_run=dry_run,
                         as_json=as_json, timeout_minutes=timeout, poll=poll)
    if not report.ok:
        raise typer.Exit(1)
