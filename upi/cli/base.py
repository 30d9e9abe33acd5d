"""The Typer app, its error mapping and the options every command shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from upi import console

# `upi --help` lists the commands in the order of an install, not alphabetically.
WORKFLOW = ["validate", "schema", "render", "ignition", "push", "check", "boot-vms",
            "boot-metal", "power", "approve-csr", "wait", "gpu"]


class UpiGroup(TyperGroup):
    """Maps every UpiError to its message and exit code: the one place that does."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Commands in workflow order (sub-groups keep their own order)."""
        names = list(super().list_commands(ctx))
        known = [n for n in WORKFLOW if n in names]
        return known + [n for n in names if n not in known]

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a UpiError becomes a message and an exit code."""
        from upi.errors import InventoryError, UpiError

        try:
            return super().invoke(ctx)
        except InventoryError as exc:
            n = len(exc.problems)
            if n > 1:
                console.error(f"the inventory has {n} problems:")
                for problem in exc.problems:
                    console.say_err(f"  {problem}")
            else:
                console.error(exc.problems[0] if exc.problems else str(exc))
            raise typer.Exit(exc.exit_code) from None
        except UpiError as exc:
            console.error(str(exc))
            raise typer.Exit(exc.exit_code) from None


def output_dir(value: str) -> Path:
    """An -o DIR value; '' is refused (pathlib would read it as `.`, the current directory)."""
    if not str(value).strip():
        raise typer.BadParameter("an empty path would mean the current directory: name the "
                                 "directory (e.g. -o out/dgxpod, or -o . for the current one)")
    return Path(value)


app = typer.Typer(
    cls=UpiGroup,
    name="upi",
    help="OpenShift 4 bare-metal UPI from one inventory file.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)



def _version(value: bool) -> None:
    if value:
        from upi import __version__

        console.say(f"upi {__version__}")
        raise typer.Exit(0)


@app.callback(
    epilog="\b\nQuick start:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "Reference: docs/cli.md; the inventory: docs/inventory.md"
)
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """OpenShift 4 bare-metal UPI from one inventory file.

    Renders install-config, DNS, DHCP/PXE, HAProxy and VM definitions, checks
    them, boots the control-plane VMs, approves node CSRs safely and drives
    the installer to the end.
    """


InventoryArg = Annotated[
    Path, typer.Argument(metavar="INVENTORY", help="The inventory YAML file.", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]

