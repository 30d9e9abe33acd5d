"""`upi push`: put rendered files on their hosts, validated, and reload (docs/push.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from upi.push.model import TARGETS, FileStatus, PushError, PushResult, Step, TargetName, TargetPlan

# What a push does is imported when one runs: `upi check` reads the ledger format of
# upi.push.owned, and importing this package must not import SSH (paramiko: ~0.1 s), the
# renderer or the inventory's models for it.
if TYPE_CHECKING:
    from upi.inventory.model import Inventory
    from upi.remote import Transport
    from upi.render import RenderedFile

__all__ = ["TARGETS", "FileStatus", "PushError", "PushResult", "Step", "push", "push_files"]


def _connect(inv: Inventory, plan: TargetPlan) -> Transport:
    from upi.remote import open_host

    return open_host(inv, plan.name)


def push(inv: Inventory, out: Path, *, only: TargetName | None = None,
         dry_run: bool = False) -> PushResult:
    """Push a render dir (checked against its manifest.json) to the inventory's hosts."""
    from upi.push.apply import apply
    from upi.push.sources import owned_roots, plans_for, read_render_dir

    files, http = read_render_dir(inv, out)
    # The whole render: a file upi placed earlier that it no longer has is removed (upi.push.owned).
    plans = [replace(plan, prune=owned_roots(inv, plan.name)) for plan in plans_for(inv, files, only, http)]
    return apply(plans, lambda plan: _connect(inv, plan), dry_run=dry_run)


def push_files(inv: Inventory, files: list[RenderedFile], target: TargetName, *,
               dry_run: bool = False) -> PushResult:
    """Push in-memory rendered files to one target (files of other targets are ignored).

    `upi wait` takes the bootstrap out of the load balancer with
    `push_files(inv, [haproxy_cfg(inv, include_bootstrap=False)], target="load_balancer")`:
    validated with `haproxy -c` on the host, backed up, renamed into place, reloaded.
    """
    if target not in TARGETS:
        raise PushError(f"unknown push target {target!r} (one of: {', '.join(TARGETS)})")
    from upi.push.apply import apply
    from upi.push.sources import plans_for

    plans = plans_for(inv, files, target)
    return apply(plans, lambda plan: _connect(inv, plan), dry_run=dry_run)
