"""`upi push`: the library call behind the command."""

from __future__ import annotations

from pathlib import Path

from upi.errors import UsageError
from upi.inventory import load_inventory
from upi.push import TARGETS, PushResult, push


def push_command(inventory: Path, out: Path, *, only: str | None = None,
                 dry_run: bool = False) -> PushResult:
    """Load the inventory and push the render dir `out` (to one target with `only`)."""
    if only is not None and only not in TARGETS:
        raise UsageError(f"--only {only!r}: expected one of {', '.join(TARGETS)}", field="--only")
    if not out.is_dir():
        raise UsageError(f"{out} is not a directory: run `upi render {inventory} -o {out}` first",
                         field="--output")
    inv = load_inventory(inventory)
    return push(inv, out, only=only, dry_run=dry_run)
