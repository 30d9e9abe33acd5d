"""What `upi gpu` shows while it runs: a live stage panel on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from upi.console import LiveRegion, plain, printable, shows
from upi.gpu.flow import STAGES


class GpuDisplay(LiveRegion):
    """A Reporter (upi.gpu.steps) that shows stages like `upi wait` does."""

    def __init__(self, *, live: bool | None = None, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._live_wanted = self.out.isatty() if live is None else live
        self._lock = threading.Lock()
        self.states: dict[str, str] = {s: "pending" for s in STAGES}
        self.current = ""
        self.last = ""
        self.started = time.monotonic()
        self._live: Any = None

    def stage(self, name: str, message: str) -> None:
        """A stage started, is done, or failed."""
        with self._lock:
            if message == "started" and name in STAGES:  # a stage this run has not (Network Operator
                for earlier in STAGES[:STAGES.index(name)]:  # without rdma:) shows as skipped
                    if self.states.get(earlier) == "pending":
                        self.states[earlier] = "skipped"
            self.states[name] = message
            self.current = name if message == "started" else self.current
        self._line(f"== {name}: {message}")

    def note(self, message: str) -> None:
        """Something the flow did or saw."""
        with self._lock:
            self.last = message
        self._line(f"  {message}")

    def warn(self, message: str) -> None:
        """A problem (a failed check)."""
        self._line(f"upi: warning: {message}", level="warn")

    def _line(self, text: str, level: str = "info") -> None:
        if not shows(level):  # `upi --log-level warn` keeps only warnings (the report still prints)
            return
        live = self._live
        if live is not None:
            live.console.print(printable(text), markup=False, highlight=False)
            return
        self.out.write(printable(text) + "\n")
        self.out.flush()

    def _panel(self) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        marks = {"done": "[ok]", "started": "[..]", "failed": "[!!]", "pending": "[  ]", "skipped": "[--]"}
        grid = Table.grid(padding=(0, 2))
        with self._lock:
            for name, state in self.states.items():
                grid.add_row(plain(marks.get(state, "[  ]")), plain(name))
            minutes, secs = divmod(int(time.monotonic() - self.started), 60)
            grid.add_row("", plain(f"{minutes}m{secs:02d}s; last: {self.last or '-'}"))
        return Panel(grid, title="upi gpu", title_align="left")

    def _live_options(self) -> dict[str, Any]:
        return {"get_renderable": self._panel, "refresh_per_second": 2}
