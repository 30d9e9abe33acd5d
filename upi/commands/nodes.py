"""`upi nodes add|remove`: the day-2 flows run, each step said as it happens, a report printed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from upi import console
from upi.day2.add import AddReport, AddRequest, add_nodes
from upi.errors import UsageError


def _positive(**values: float) -> None:
    """--timeout and --poll of 0: a wait that gives up at once, or a loop that never sleeps."""
    for name, value in values.items():
        if value <= 0:
            raise UsageError(f"--{name} must be a positive duration (write 10s, 30m, 2h), not {value:g}")


def add_command(inventory: Path, names: Sequence[str], out: Path, *, kubeconfig: Path | None,
                assets: Path | None, metal: bool, gpu: bool, dry_run: bool, as_json: bool,
                timeout: float, poll: float) -> AddReport:
    """Everything `upi nodes add` does after parsing its arguments."""
    _positive(timeout=timeout, poll=poll)
    req = AddRequest(inventory, names, out, kubeconfig=kubeconfig, assets=assets, metal=metal,
                     dry_run=dry_run, timeout=timeout, poll=poll, gpu=gpu)
    report = add_nodes(req, console.progress, console.warn)
    if as_json:
        console.print_json(report.as_json())
    else:
        console.print_table(None, ["node", "stage", "boot", "registered", "ready", "GPUs"], [
            [o.name, o.stage, o.booted or "-", "yes" if o.registered else "no", "yes" if o.ready else "no",
             o.gpu or "-"] for o in report.nodes.values()])
    return report


def remove_command(inventory: Path, names: Sequence[str], out: Path | None, *, kubeconfig: Path | None,
                   assets: Path | None, keep_power: bool, drain_timeout: float, dry_run: bool,
                   as_json: bool, poll: float) -> None:
    """Everything `upi nodes remove` does after parsing its arguments."""
    _positive(poll=poll)
    from upi.day2.remove import RemoveRequest, remove_nodes

    req = RemoveRequest(inventory, names, out, kubeconfig=kubeconfig, assets=assets,
                        keep_power=keep_power, drain_timeout=drain_timeout, dry_run=dry_run, poll=poll)
    done = remove_nodes(req, console.progress, console.warn)
    if as_json:
        console.print_json([r.as_json() for r in done.values()])
        return
    console.print_table(None, ["node", "evicted", "left", "Node deleted", "power", "record cleared"], [
        [r.name, str(len(r.evicted)), str(len(r.left)), "yes" if r.node_deleted else "no", r.power or "-",
         "yes" if r.record_cleared else "no"] for r in done.values()])
