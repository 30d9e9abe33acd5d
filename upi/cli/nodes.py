"""`upi nodes add|remove`: day-2 workers joined to or taken out of an installed cluster (docs/day2.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from upi.cli.base import InventoryArg, JsonOpt, duration_option, output_dir, sub_app

nodes_app = sub_app(
    "nodes",
    help="Day 2: add workers to an installed cluster, or take them out (docs/day2.md).",
    epilog="\b\nExamples:\n"
    "  upi nodes add inventories/dgxpod.yaml worker-2 -o out/dgxpod --dir assets/dgxpod\n"
    "  upi nodes remove inventories/dgxpod.yaml worker-1 --kubeconfig ~/.kube/config",
)

NodesArg = Annotated[list[str], typer.Argument(
    metavar="NODE...", help="Workers of the inventory, by name.", show_default=False)]
KubeconfigOpt = Annotated[Path | None, typer.Option(
    "--kubeconfig", metavar="FILE", show_default=False,
    help="Kubeconfig of the cluster (default: KUBECONFIG, then ASSETS/auth/kubeconfig).")]
AssetsOpt = Annotated[Path | None, typer.Option(
    "--dir", metavar="ASSETS", show_default=False,
    help="openshift-install's assets directory, for its auth/kubeconfig; never modified "
    "(default: none, see --kubeconfig).")]


@nodes_app.command(
    epilog="\b\nExamples:\n"
    "  upi nodes add inventories/dgxpod.yaml worker-2 -o out/dgxpod --dir assets/dgxpod\n"
    "  upi nodes add inventories/dgxpod.yaml worker-2 worker-3 -o out/dgxpod --dry-run\n"
    "  upi nodes add inventories/dgxpod.yaml worker-2 -o out/dgxpod --no-metal --timeout 2h --json",
)
def add(
    inventory: InventoryArg,
    nodes: NodesArg,
    render_dir: Annotated[Path, typer.Option(
        "-o", "--output", metavar="DIR", show_default=False, parser=output_dir,
        help="The render dir of the cluster (its files are re-rendered and pushed).")],
    kubeconfig: KubeconfigOpt = None,
    assets: AssetsOpt = None,
    no_metal: Annotated[bool, typer.Option(
        "--no-metal", help="Drive no BMC: power the nodes on with a one-time network boot by hand.")]
    = False,
    no_gpu: Annotated[bool, typer.Option(
        "--no-gpu", help="Skip the GPU step of the new gpu: true nodes (the GPU pool, labels, allocatable, "
        "a validation pod and a DCGM diagnosis each, with the operators and pool `upi gpu` set up); "
        "`upi gpu --node` does it later.")]
    = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Check the cluster and the ignition, print what render would change; "
        "write, push and boot nothing.")] = False,
    as_json: JsonOpt = False,
    timeout: Annotated[float, duration_option(
        "--timeout", unit="m", default=3600, help="Give up on the nodes after this long")] = 3600,
    poll: Annotated[float, duration_option(
        "--poll", unit="s", default=10.0, help="How often to look at the cluster while waiting")] = 10.0,
) -> None:
    """Join workers already written into the inventory to the installed cluster.

    The cluster must be installed (ClusterVersion Available) and the nodes not
    Nodes yet. Their ignition is the worker pointer config the cluster serves
    now (secret openshift-machine-api/worker-user-data-managed), checked and
    published under each node's own name; the day-1 assets stay untouched.
    Render + push change only the new nodes' entries (the push lists every
    changed file); each node with a BMC is network-booted once; only these
    nodes' CSRs are approved (others stay pending, reported); each PXE file
    flips to local boot as its Node registers; each new `gpu: true` node
    joins the GPU pool (label, rollout, taint) and is verified and
    DCGM-diagnosed as `upi gpu` does, nothing cluster-wide re-applied. Exit 0 when
    every node is Ready (and GPU-verified), 1 naming the node and the stage
    that failed, 2 for bad input.
    A second run changes nothing.
    """
    from upi.commands.nodes import add_command

    report = add_command(inventory, nodes, render_dir, kubeconfig=kubeconfig, assets=assets,
                         metal=not no_metal, gpu=not no_gpu, dry_run=dry_run, as_json=as_json,
                         timeout=timeout, poll=poll)
    if not report.ok and not dry_run:
        raise typer.Exit(1)


@nodes_app.command(
    epilog="\b\nExamples:\n"
    "  upi nodes remove inventories/dgxpod.yaml worker-1 --dir assets/dgxpod -o out/dgxpod\n"
    "  upi nodes remove inventories/dgxpod.yaml worker-1 --kubeconfig ~/.kube/config --dry-run\n"
    "  upi nodes remove inventories/dgxpod.yaml worker-1 --keep-power --drain-timeout 30m --json",
)
def remove(
    inventory: InventoryArg,
    nodes: NodesArg,
    kubeconfig: KubeconfigOpt = None,
    assets: AssetsOpt = None,
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", show_default=False, parser=output_dir,
        help="The render dir whose records (installed.json, own-ignition.json) forget the nodes "
        "(default: none, the records are left).")] = None,
    keep_power: Annotated[bool, typer.Option(
        "--keep-power", help="Leave the machines powered on (default: powered off over Redfish).")]
    = False,
    drain_timeout: Annotated[float, duration_option(
        "--drain-timeout", unit="m", default=600,
        help="Give up when a PodDisruptionBudget still blocks an eviction after this long")] = 600,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say which pods would be evicted or left; change nothing.")] = False,
    as_json: JsonOpt = False,
    poll: Annotated[float, duration_option(
        "--poll", unit="s", default=2.0, help="How often to retry a blocked eviction")] = 2.0,
) -> None:
    """Take workers out of the installed cluster: cordon, drain, delete the Node, power off.

    The drain is `oc adm drain`'s: each pod is evicted through the Eviction
    API so PodDisruptionBudgets are honoured (a blocked eviction is retried
    until --drain-timeout, then exit 1 naming the pod), DaemonSet and static
    pods stay, and each pod whose emptyDir data is lost is named. Then the
    Node is deleted, the machine powered off over Redfish (unless
    --keep-power) and, with -o, its records cleared (installed.json; and
    own-ignition.json, so its own ignition is no longer published). Remove the
    node from the inventory afterwards; the next render + push drop its
    DHCP, DNS, PXE and HAProxy entries (docs/day2.md).
    """
    from upi.commands.nodes import remove_command

    remove_command(inventory, nodes, render_dir, kubeconfig=kubeconfig, assets=assets,
                   keep_power=keep_power, drain_timeout=drain_timeout, dry_run=dry_run,
                   as_json=as_json, poll=poll)
