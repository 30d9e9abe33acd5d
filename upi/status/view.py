"""The status table for people and scripts: printed once, kept live on a terminal, told as changes.

`upi status` prints one look; `upi status --watch` and `upi wait` show the
looks as they come: on a terminal one table redrawn in place, into a pipe
or a journal one line per change (a node moved on, got stuck, a stranger
or an unreadable source appeared), so a log stays readable.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from upi import console
from upi.console import LiveRegion, duration_text
from upi.status.stages import STAGES, Row, Stranger

STRANGERS_SHOWN = 20  # MACs and IPs no node has, listed under the table; the rest are counted


@dataclass
class Snapshot:
    """One look: the rows, the strangers, and what could not be read."""

    rows: list[Row]
    strangers: list[Stranger]
    unread: list[str]
    now: datetime


def clock(when: datetime | None) -> str:
    """A stage's time as the table shows it (`?`: reached at a time no source keeps)."""
    return when.astimezone().strftime("%H:%M:%S") if when is not None else "?"


def time_there(snap: Snapshot, row: Row) -> str:
    """How long the node has been at its current stage (`-` when unknown)."""
    if row.since is None:
        return "-"
    return duration_text(max(0, int((snap.now - row.since).total_seconds())))


def shown_stages(snap: Snapshot) -> list[tuple[str, str]]:
    """The stages some node has: the rootfs (4.6+) or the metal image (before), GPU with GPU nodes."""
    return [(key, name) for key, name in STAGES if any(key in r.applicable for r in snap.rows)]


def columns(snap: Snapshot) -> tuple[str, ...]:
    """The table's header."""
    return ("NODE", "ROLE", *(name for _, name in shown_stages(snap)), "NOW", "FOR")


def table_rows(snap: Snapshot) -> list[list[str]]:
    """The table's cells: a time per stage reached, `-` not yet, blank when it does not apply."""
    out = []
    for row in snap.rows:
        cells = [row.name, row.role]
        for key, _ in shown_stages(snap):
            if key not in row.applicable:
                cells.append("")
            else:
                cells.append(clock(row.stages[key]) if key in row.stages else "-")
        cells += [row.current + (" (stuck)" if row.stuck else ""), time_there(snap, row)]
        out.append(cells)
    return out


def to_json(snap: Snapshot) -> dict[str, Any]:
    """The document `--json` prints."""
    def iso(when: datetime | None) -> str | None:
        return when.isoformat() if when is not None else None

    return {
        "now": snap.now.isoformat(),
        "nodes": [{
            "name": r.name, "role": r.role, "mac": r.mac, "ip": r.ip,
            "stages": {k: ({"reached": k in r.stages, "time": iso(r.stages.get(k))}
                           if k in r.applicable else None) for k, _ in STAGES},
            "current": r.current, "since": iso(r.since),
            "seconds": int((snap.now - r.since).total_seconds()) if r.since else None,
            "stuck": r.stuck, "causes": r.causes, "done": r.done,
        } for r in snap.rows],
        "unknown": [{"kind": s.what, "value": s.value, "first_seen": iso(s.first), "seen": s.seen}
                    for s in snap.strangers],
        "unread": snap.unread,
    }


def _stuck_text(snap: Snapshot, row: Row) -> str:
    return f"{row.name}: stuck at {row.current} for {time_there(snap, row)}; likely:"


def _stranger_text(s: Stranger) -> str:
    return f"not in the inventory: {s.what.upper()} {s.value} ({s.seen}, first at {clock(s.first)})"


def _notes(snap: Snapshot) -> list[str]:
    """What goes under the table: stuck nodes' likely causes, then the strangers."""
    lines = []
    for row in snap.rows:
        if row.stuck:
            lines.append(_stuck_text(snap, row))
            lines += [f"  - {cause}" for cause in row.causes]
    return lines + _strangers_text(snap.strangers)


def _strangers_text(strangers: list[Stranger]) -> list[str]:
    """A line per stranger, the first STRANGERS_SHOWN of them: --json lists them all."""
    lines = [_stranger_text(s) for s in strangers[:STRANGERS_SHOWN]]
    if len(strangers) > STRANGERS_SHOWN:
        lines.append(f"... and {len(strangers) - STRANGERS_SHOWN} more not in the inventory "
                     "(--json lists them all)")
    return lines


def show(snap: Snapshot) -> None:
    """The table on stdout; stuck nodes' likely causes and the strangers after it."""
    console.print_table(f"Nodes at {snap.now.strftime('%H:%M:%S')}", columns(snap), table_rows(snap))
    for line in _notes(snap):
        console.say(line)
    for what in snap.unread:
        console.warn(f"cannot read {what}")


def renderable(snap: Snapshot) -> Any:
    """The table and its notes as one rich renderable, for a live view."""
    from rich.console import Group
    from rich.table import Table

    table = Table(title=f"Nodes at {snap.now.strftime('%H:%M:%S')}", title_justify="left")
    for col in columns(snap):
        table.add_column(col)
    for cells in table_rows(snap):
        table.add_row(*(console.plain(c) for c in cells))
    notes = [console.plain(line) for line in _notes(snap)]
    notes += [console.plain(f"cannot read {what}") for what in snap.unread]
    return Group(table, *notes)


def _source(unread: str) -> str:
    """The source an `unread` entry names (its reason may word itself differently each look)."""
    return unread.split(": ", 1)[0]


def changes(before: Snapshot | None, snap: Snapshot) -> list[str]:
    """What a look says that the one before did not (everything, for the first look).

    A node's stage (`worker-0: PXE file -> kernel+initrd at 12:14:02`), a node
    newly stuck with its likely causes, a new stranger, a source newly unreadable.
    """
    old = {r.name: r for r in before.rows} if before else {}
    lines = []
    for row in snap.rows:
        prev = old.get(row.name)
        at = f" at {clock(row.since)}" if row.since else ""
        if prev is None:
            lines.append(f"{row.name}: {row.current}{at}")
        elif prev.current != row.current:
            lines.append(f"{row.name}: {prev.current} -> {row.current}{at}")
        if row.stuck and (prev is None or not prev.stuck or prev.current != row.current):
            lines.append(" ".join([_stuck_text(snap, row), "; ".join(row.causes)]))
    seen = {(s.what, s.value) for s in before.strangers} if before else set()
    lines += _strangers_text([s for s in snap.strangers if (s.what, s.value) not in seen])
    unreadable = {_source(u) for u in before.unread} if before else set()
    lines += [f"cannot read {u}" for u in snap.unread if _source(u) not in unreadable]
    return lines


class StatusView(LiveRegion):
    """`upi status --watch`: a live table on a terminal; into a pipe the first table, then the changes.

    A context manager: the live table is stopped on the way out, whatever the way.
    """

    def __init__(self, *, out: TextIO | None = None, live: bool | None = None) -> None:
        self.out = out or sys.stdout
        self._live_wanted = self.out.isatty() if live is None else live
        self._live: Any = None
        self.last: Snapshot | None = None

    def update(self, snap: Snapshot) -> None:
        """Show one look."""
        before, self.last = self.last, snap
        if self._live is not None:
            self._live.update(renderable(snap), refresh=True)
        elif before is None:
            show(snap)
        else:
            for line in changes(before, snap):
                self.out.write(f"{snap.now.strftime('%H:%M:%S')} {console.printable(line)}\n")
        self.out.flush()  # into a pipe or a journal: each look as it happens

