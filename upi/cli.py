"""The `upi` command line: thin Typer adapters over the library.

Heavy modules (pydantic, jinja2, libvirt, lightkube) are imported inside the
commands so that `upi --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from upi import console


class UpiGroup(TyperGroup):
    """Maps every UpiError to its message and exit code: the one place that does."""

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

InventoryArg = Annotated[
    Path, typer.Argument(metavar="INVENTORY", help="The inventory YAML file.", show_default=False)
]
TABLE_ROWS = 40
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


@app.command(
    epilog="\b\nExamples:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi validate inventories/dgxpod.yaml --json | jq .nodes"
)
def validate(inventory: InventoryArg, as_json: JsonOpt = False) -> None:
    """Check the inventory and print a summary of the cluster it describes."""
    from upi.commands.render import summary
    from upi.inventory import load_inventory

    doc = summary(load_inventory(inventory))
    if as_json:
        console.print_json(doc)
        return
    console.say(f"{inventory}: valid. {doc['cluster']}, OpenShift {doc['openshift_version']}, "
                f"{doc['network_type']}, {doc['topology']} topology")
    cols = ["name", "role", "machine", "firmware", "mac", "ip", "install_disk", "gpu"]
    console.print_table(None, cols, ([n[c] for c in cols] for n in doc["nodes"]))
    for w in doc["warnings"]:
        console.warn(w)


@app.command(
    epilog="\b\nExamples:\n  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod --dry-run --diff"
)
def render(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option("-o", "--output", help="Directory to write into.")],
    diff: Annotated[bool, typer.Option("--diff", help="Show a unified diff of what changes.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a directory holding files upi did not write.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would change.")
    ] = False,
) -> None:
    """Write every config file of the install (layout in docs/render.md)."""
    from upi.commands.render import render as do_render

    result = do_render(inventory, out, diff=diff, force=force, dry_run=dry_run)
    if result.diff:
        console.say(result.diff.rstrip("\n"))
    counts = {s: sum(1 for c in result.changes if c.status == s)
              for s in ("new", "changed", "unchanged", "removed")}
    touched = [c for c in result.changes if c.status != "unchanged"]
    if touched and not diff:
        # A table of every PXE file of a 5,000-node cluster helps nobody and
        # costs seconds: the first rows, then the counts below say the rest.
        rows: list[tuple[str, str]] = [(c.path, c.status) for c in touched[:TABLE_ROWS]]
        if len(touched) > TABLE_ROWS:
            rows.append((f"... and {len(touched) - TABLE_ROWS} more (manifest.json lists all)", ""))
        console.print_table(None, ["file", "status"], rows)
    verb = "would write" if not result.written else "wrote"
    console.say(f"{verb} {out}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))


@app.command(epilog="\b\nExample:\n  upi schema > inventory.schema.json")
def schema() -> None:
    """Print the inventory's JSON Schema (for editor completion and checks)."""
    from upi.commands.render import schema as do_schema

    console.say(do_schema().rstrip("\n"))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="upi")
