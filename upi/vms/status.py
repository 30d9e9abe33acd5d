"""Progress of boot-vms: one event per VM transition, shown as a live table or plain lines."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from upi import console
from upi.facts import VmSpec


@dataclass(frozen=True)
class VmEvent:
    """One transition of one VM: `state` is a short word, `detail` says more."""

    name: str
    uri: str
    state: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.state}" + (f" ({self.detail})" if self.detail else "")


Report = Callable[[VmEvent], None]


def ignore(_event: VmEvent) -> None:
    """A Report that shows nothing (library callers that do not care)."""


class StatusBoard:
    """A Report: rich Live table on a terminal, a plain line per event otherwise, or nothing."""

    def __init__(self, specs: Sequence[VmSpec], *, live: bool | None = None, quiet: bool = False) -> None:
        self._rows: dict[str, list[str]] = {s.name: [s.uri, "-", ""] for s in specs}
        self._live_wanted = sys.stdout.isatty() if live is None else live
        self._quiet = quiet
        self._live: Any = None
        self._lock = threading.Lock()
        self.events: list[VmEvent] = []

    def __call__(self, event: VmEvent) -> None:
        """Record an event and show it."""
        with self._lock:
            self.events.append(event)
            self._rows[event.name] = [event.uri, event.state, event.detail]
            if self._live is not None:
                self._live.update(self._table())
            elif not self._quiet:
                console.say(str(event))

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title="upi boot-vms", title_justify="left")
        for col in ("vm", "hypervisor", "state", "detail"):
            table.add_column(col)
        for name, row in self._rows.items():
            table.add_row(*(console.plain(c) for c in (name, *row)))
        return table

    def __enter__(self) -> StatusBoard:
        if self._live_wanted and not self._quiet:
            from rich.live import Live

            self._live = Live(self._table(), refresh_per_second=4)
            self._live.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
