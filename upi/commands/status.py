"""`upi status`: one row per node, the time it reached each stage, and why one is stuck (docs/status.md)."""

from __future__ import annotations

import time
from pathlib import Path

from upi import console
from upi.inventory import load_inventory
from upi.status.look import Looker, sources
from upi.status.view import Snapshot, StatusView, show, to_json

INTERRUPTED = 130  # the exit status of a watch stopped by Ctrl-C before its first look ended


def _verdict(snap: Snapshot) -> int:
    return 1 if any(r.stuck for r in snap.rows) else 0


def _watch(looker: Looker, interval: float, as_json: bool) -> int:
    """Look every `interval` until every node is done; Ctrl-C ends the watch like that, cleanly.

    The exit status is the last look's; 130 when Ctrl-C came before any look ended.
    """
    import contextlib
    import json

    last: Snapshot | None = None
    try:
        with contextlib.nullcontext() if as_json else StatusView() as view:
            while True:
                last = looker.look()
                if view is None:
                    console.print_json_line(json.dumps(to_json(last), separators=(",", ":")))
                else:
                    view.update(last)
                if all(r.done for r in last.rows):
                    return _verdict(last)
                time.sleep(interval)
    except KeyboardInterrupt:
        console.progress("upi status: stopped (Ctrl-C)")
        return INTERRUPTED if last is None else _verdict(last)


def status_command(inventory: Path, src_args: dict[str, Path | None], *, threshold: float, watch: bool,
                   interval: float, as_json: bool, connect: str | None = None) -> int:
    """Print the status once, or with `watch` every `interval` until every node is done.

    The exit status: 0, or 1 when a node is stuck (130: see _watch).
    """
    inv = load_inventory(inventory, check_files=False)
    with Looker(inv, sources(inv, **src_args, connect=connect), threshold=threshold) as looker:
        if watch:
            return _watch(looker, interval, as_json)
        snap = looker.look()
        if as_json:
            console.print_json(to_json(snap))
        else:
            show(snap)
        return _verdict(snap)
