"""Commands that drive bare-metal nodes through their BMCs: power, boot-metal (docs/metal.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from upi.cli.base import InventoryArg, JsonOpt, app

DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Read each BMC and print what would be sent; change nothing.")]


@app.command(
    epilog="\b\nExamples:\n  upi power inventories/dgxpod.yaml status\n"
    "  upi power inventories/dgxpod.yaml worker-0 restart\n"
    "  upi power inventories/dgxpod.yaml worker-0 worker-1 off --dry-run\n"
    "  upi power inventories/dgxpod.yaml status --json",
)
def power(
    inventory: InventoryArg,
    words: Annotated[list[str], typer.Argument(
        metavar="[NODE...] status|on|off|restart",
        help="Nodes (default: every node with a bmc section), then the action.", show_default=False)],
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Power state of bare-metal nodes over Redfish, or power them on, off or restart them.

    Prints a table of node, power state, boot override and Secure Boot.
    `off` is a forced power-off; `restart` a forced restart (on when off).
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
) -> None:
    """Network-boot bare-metal nodes once: one-time UEFI PXE, then power on or force restart.

    The boot override goes to the BMC's settings object with its ETag where
    one is advertised (DGX/AMI), and is read back before the reset; nodes are
    handled in parallel. Secure Boot on is warned about (the GPU step needs it off).
    """
    from upi.commands.metal import boot_metal_command

    boot_metal_command(inventory, nodes or [], dry_run=dry_run, as_json=as_json)
