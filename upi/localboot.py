"""Flip installed nodes' per-MAC PXE files to local boot: recorded, re-rendered, pushed.

`upi wait` calls this as metal workers join; the step lives here once so
that every flow that learns a node is installed does the same three things.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from upi.errors import UpiError
from upi.inventory.model import Inventory


@dataclass(frozen=True)
class Flipped:
    """What flipping did: nodes now booting their disk, and where their files went."""

    nodes: list[str]
    pushed: list[str]  # host:path (status) of each per-MAC file on the provisioner


def flip_to_disk(inventory: Path, inv: Inventory, out: Path, names: Sequence[str], *,
                 how: str, push: bool = True) -> Flipped:
    """Record `names` installed in `out`, re-render it, and push their per-MAC files to the provisioner.

    Record and render are one transaction of DIR (upi.renderdir): the bootstrap
    stays retired if the last render had it retired, read under the lock.
    Raises UpiError (from render or push) with nothing half-done on the
    provisioner: the push replaces each file atomically.
    """
    from upi.facts import boot_entries
    from upi.push import push_files
    from upi.render import boot_file
    from upi.renderdir import render

    result = render(inventory, out, installed=names, how=how, retire_bootstrap=None)
    entries = [e for e in boot_entries(inv) if e.node.name in names]
    files = [boot_file(e, installed=e.node.name in result.installed) for e in entries]
    pushed: list[str] = []
    if push and files:
        done = push_files(inv, files, target="provisioner")
        pushed = [f"{f.host}:{f.dest} ({f.status})" for f in done.files]
    return Flipped(sorted(result.installed & set(names)), pushed)


@dataclass
class JoinHooks:
    """Where the join watcher reports, and how it learns which Nodes exist."""

    note: Callable[[str], None]
    warn: Callable[[str], None]
    registered: Callable[[], set[str]]


def flip_as_they_join(inventory: Path, inv: Inventory, out: Path, pending: Sequence[str], hooks: JoinHooks,
                      stop: threading.Event, *, poll: float, deadline: float | None = None) -> list[str]:
    """Flip each of `pending` to local boot once its Node registers; the names still pending at the end.

    Ends when all have joined, `stop` is set, or `deadline` (time.monotonic) passes. A flip that
    fails is warned about and tried again at the next look.
    """
    domain = inv.cluster.domain
    left = list(pending)
    while left and not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        try:
            seen = hooks.registered()
        except Exception:  # noqa: BLE001 - an API not answering yet is the normal start; look again
            seen = set()
        joined = [n for n in left if n in seen or f"{n}.{domain}" in seen]
        if joined:
            try:
                flipped = flip_to_disk(inventory, inv, out, joined, how="Node registered")
            except UpiError as exc:
                hooks.warn(f"flipping the PXE files of {', '.join(joined)} to local boot failed: {exc}; "
                           "will try again")
            else:
                pushed = "; ".join(flipped.pushed) or "nothing to push"
                hooks.note(f"{', '.join(joined)} joined: PXE file boots its disk from now on ({pushed})")
                left = [n for n in left if n not in joined]
                continue
        stop.wait(poll)
    return left
