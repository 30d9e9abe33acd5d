"""Commands that drive bare-metal nodes through their BMCs: power, boot-metal (docs/metal.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from upi.cli.base import InventoryArg, JsonOpt, app, duration_option, output_dir

DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Read each BMC and print what would be sent; change nothing.")]


@app.command(
    epilog="\b\nExamples:\n  upi power inventories/dgxpod.yaml status\n"
    "  upi power inventories/dgxpod.yaml worker-0 restart\n"
    "  upi power inventories/dgxpod.yaml worker-0 worker-1 off --dry-run\n"
    "  upi power inventories/dgxpod.yaml status --json\n"
    "  upi power inventories/dgxpod.yaml secure-boot status\n"
    "  upi power inventories/dgxpod.yaml worker-0 secure-boot on",
)
def power(
    inventory: InventoryArg,
    words: Annotated[list[str], typer.Argument(
        metavar="[NODE...] status|on|off|restart | [NODE...] secure-boot status|on|off",
        help="Nodes (default: every node with a bmc section), then the action.", show_default=False)],
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Power state of bare-metal nodes over Redfish, or power them on, off or restart them.

    Prints a table of node, power state, boot override and Secure Boot.
    `off` is a forced power-off; `restart` a forced restart (on when off).
    `secure-boot status|on|off` reads or sets the system's Redfish SecureBoot
    resource (SecureBootEnable, with If-Match where the BMC gives an ETag)
    and reads it back; the change takes effect at the next boot.
    Nodes are handled in parallel; exit 1 when any BMC failed.
    """
    from upi.commands.metal import power_command

    *nodes, action = words
    power_command(inventory, nodes, action, dry_run=dry_run, as_json=as_json)


@app.command(
    "boot-metal",
    epilog="\b\nExamples:\n  upi boot-metal inventories/dgxpod.yaml --dry-run\n"
    "  upi boot-metal inventories/dgxpod.yaml worker-1\n"
    "  upi boot-metal inventories/dgxpod.yaml --watch --dir assets/dgxpod -o out/dgxpod",
)
def boot_metal(
    inventory: InventoryArg,
    nodes: Annotated[list[str] | None, typer.Argument(
        metavar="[NODE...]", help="Nodes (default: every node with a bmc section).",
        show_default=False)] = None,
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Then follow each node until its Node registers, and flip its PXE file "
        "to local boot (needs -o and a kubeconfig).")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", metavar="PATH", show_default=False,
        help="With --watch: the cluster's kubeconfig (default: KUBECONFIG, then ASSETS/auth/kubeconfig).")]
    = None,
    assets: Annotated[Path | None, typer.Option(
        "--dir", metavar="ASSETS", show_default=False,
        help="With --watch: openshift-install's assets directory (default: none).")] = None,
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", show_default=False, parser=output_dir,
        help="With --watch: the render dir whose PXE files are flipped and pushed (default: none).")]
    = None,
    timeout: Annotated[float, duration_option(
        "--timeout", unit="m", default=3600, help="With --watch: give up on a node after this long")]
    = 3600,
    poll: Annotated[float, duration_option(
        "--poll", unit="s", default=10.0, help="With --watch: how often to look at the cluster")] = 10.0,
) -> None:
    """Network-boot bare-metal nodes once: one-time UEFI PXE, then power on or force restart.

    The boot override goes to the BMC's settings object with its ETag where
    one is advertised (DGX/AMI), and is read back before the reset; nodes are
    handled in parallel. A node whose BMC reports Secure Boot on is booted only
    when the inventory says `secure_boot: true` (the render hands it shim and
    the signed GRUB; docs/secure-boot.md); it is also warned about for the GPU step.
    With --watch, each node is followed until its Node registers; its per-MAC
    PXE file is then flipped to local boot and pushed (docs/metal.md).
    """
    from upi.commands.metal import boot_metal_command, watch_options

    follow = watch_options(watch=watch, dry_run=dry_run, kubeconfig=kubeconfig, assets=assets,
                           render_dir=render_dir, timeout=timeout, poll=poll)
    boot_metal_command(inventory, nodes or [], dry_run=dry_run, as_json=as_json, watch=follow)
