"""Flip installed nodes' per-MAC PXE files to local boot: recorded, re-rendered, pushed.

`upi wait` calls this as metal workers join; the step lives here once so
that every flow that learns a node is installed does the same three things.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from upi.inventory.model import Inventory
from upi.writer import previous_manifest


@dataclass(frozen=True)
class Flipped:
    """What flipping did: nodes now booting their disk, and where their files went."""

    nodes: list[str]
    pushed: list[str]  # host:path (status) of each per-MAC file on the provisioner


def flip_to_disk(inventory: Path, inv: Inventory, out: Path, names: Sequence[str], *,
                 how: str, push: bool = True) -> Flipped:
    """Record `names` installed in `out`, re-render it, and push their per-MAC files to the provisioner.

    The render keeps the bootstrap retired if the last one had it retired.
    Raises UpiError (from render or push) with nothing half-done on the
    provisioner: the push replaces each file atomically.
    """
    from upi.commands.render import render
    from upi.facts import boot_entries
    from upi.push import push_files
    from upi.render import boot_file

    retired = bool(previous_manifest(out).get("bootstrap_retired"))
    result = render(inventory, out, installed=names, how=how, retire_bootstrap=retired)
    entries = [e for e in boot_entries(inv) if e.node.name in names]
    files = [boot_file(e, installed=e.node.name in result.installed) for e in entries]
    pushed: list[str] = []
    if push and files:
        done = push_files(inv, files, target="provisioner")
        pushed = [f"{f.host}:{f.dest} ({f.status})" for f in done.files]
    return Flipped(sorted(result.installed & set(names)), pushed)
