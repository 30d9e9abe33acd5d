"""What `upi wait` shows while it waits: a live panel on a terminal, plain lines otherwise.

Every callback may come from another thread (the CSR approver, the VM
shepherd), so the progress is kept under one lock. The same progress also
says where an interruption happened.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from upi.console import LiveRegion, plain, printable, shows
from upi.csr.client import Record
from upi.installer_log import LogEvent
from upi.vms.status import VmEvent

if TYPE_CHECKING:
    from upi.status.view import Snapshot

STAGE_LABELS = {
    "bootstrap_complete": "bootstrap-complete",
    "bootstrap_removed": "remove the bootstrap",
    "install_complete": "install-complete",
}
STEP_TEXT = {
    "waiting_api": "waiting for the Kubernetes API",
    "api_up": "API up",
    "waiting_bootstrap": "waiting for bootstrapping to complete",
    "bootstrap_complete": "bootstrap complete",
    "waiting_cluster": "waiting for the cluster to initialize",
    "waiting_operators": "waiting for the cluster operators",
    "install_complete": "install complete",
}


def stage_label(name: str) -> str:
    """A stage (or wait-for target) as the user reads it."""
    return STAGE_LABELS.get(name, name)


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


@dataclass
class Progress:
    """Where the run is: stage, installer step, last message, CSRs, VM transitions, warnings."""

    stage: str = "starting"
    step: str = ""
    last_message: str = ""
    stage_started: float = field(default_factory=time.monotonic)
    started: float = field(default_factory=time.monotonic)
    csrs_approved: list[str] = field(default_factory=list)
    csrs_skipped: int = 0
    vm_events: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def where(self) -> str:
        """The current stage in words, e.g. `install-complete (waiting for the cluster ...)`."""
        detail = "; ".join(x for x in (self.step, f"last: {self.last_message}"
                                       if self.last_message else "") if x)
        return stage_label(self.stage) + (f" ({detail})" if detail else "")


class WaitDisplay(LiveRegion):
    """Receives every callback of a run and shows it; a context manager for the live panel."""

    def __init__(self, *, live: bool | None = None, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out or sys.stdout
        self._live_wanted = self.out.isatty() if live is None else live
        self._clock = clock
        self.progress = Progress(stage_started=clock(), started=clock())
        self._lock = threading.Lock()  # the progress
        self._print_lock = threading.Lock()  # the output
        self._live: Any = None
        self._snap: Snapshot | None = None  # upi status's latest look at the nodes

    # --- callbacks ------------------------------------------------------------
    def event(self, event: LogEvent) -> None:
        """One installer log line (already parsed; secrets hidden)."""
        with self._lock:
            if event.kind in STEP_TEXT:
                self.progress.step = STEP_TEXT[event.kind]
            shown = shows(event.level) and bool(event.message)  # upi --log-level decides
            if shown:
                self.progress.last_message = event.message.splitlines()[0]
        if shown:
            self._line(f"  {event.level.upper():<5} {event.message}", quiet_when_live=True,
                       level=event.level)

    def stage(self, name: str, message: str) -> None:
        """A stage started, finished, was skipped or is being retried."""
        with self._lock:
            if message == "started":
                self.progress.stage, self.progress.step = name, ""
                self.progress.last_message = ""
                self.progress.stage_started = self._clock()
        self._line(f"== {stage_label(name)}: {message}")

    def csr(self, record: Record) -> None:
        """One approver decision."""
        with self._lock:
            if record.action == "approved":
                self.progress.csrs_approved.append(record.csr)
            else:
                self.progress.csrs_skipped += 1
            if record.action == "held":  # a possible attack: it belongs in the summary's warnings
                self.progress.warnings.append(f"CSR {record.line(False)}")
        self._line(f"  csr: {record.line(False)}")

    def vm(self, event: VmEvent) -> None:
        """One VM transition (shepherd or bootstrap removal)."""
        with self._lock:
            self.progress.vm_events.append(str(event))
        self._line(f"  vm: {event}")

    def note(self, message: str) -> None:
        """Something upi did (e.g. HAProxy pushed)."""
        self._line(f"  {message}")

    def warn(self, message: str) -> None:
        """A problem that does not stop the wait."""
        with self._lock:
            self.progress.warnings.append(message)
        self._line(f"upi: warning: {message}", level="warn")

    def nodes(self, snap: Snapshot) -> None:
        """One look of `upi status`'s at the nodes: the live panel's table, or each change as a line."""
        from upi.status.view import changes

        with self._lock:
            before, self._snap = self._snap, snap
        for line in changes(before, snap):
            self._line(f"  status: {line}", quiet_when_live=True)

    def where(self) -> str:
        """The current stage in words."""
        with self._lock:
            return self.progress.where()

    # --- output ---------------------------------------------------------------
    def _line(self, text: str, *, quiet_when_live: bool = False, level: str = "info") -> None:
        if not shows(level):  # `upi --log-level warn` keeps only warnings (the summary still prints)
            return
        # Printed outside the state lock: rich's refresh thread takes its own lock, then
        # ours (in _panel); holding ours while waiting for rich's would deadlock.
        with self._print_lock:
            live = self._live
            if live is not None:
                if not quiet_when_live:
                    live.console.print(printable(text), markup=False, highlight=False)
                return
            self.out.write(printable(text) + "\n")
            self.out.flush()  # piped into a journal or `tee`: show each line as it happens

    def _panel(self) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        with self._lock:
            p, now = self.progress, self._clock()
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column()
            grid.add_row("stage", stage_label(p.stage) + (f" - {p.step}" if p.step else ""))
            grid.add_row("elapsed", f"{_clock_text(now - p.stage_started)} in this stage, "
                         f"{_clock_text(now - p.started)} in all")
            grid.add_row("installer", plain(p.last_message or "-"))
            grid.add_row("CSRs", f"{len(p.csrs_approved)} approved, {p.csrs_skipped} skipped")
            grid.add_row("VMs", plain("; ".join(p.vm_events[-4:]) or "-"))
            if p.warnings:
                grid.add_row("warning", plain(p.warnings[-1]))
            snap = self._snap
        panel = Panel(grid, title="upi wait", title_align="left")
        if snap is None:
            return panel
        from rich.console import Group

        from upi.status.view import renderable

        return Group(panel, renderable(snap))

    def _live_options(self) -> dict[str, Any]:
        return {"get_renderable": self._panel, "refresh_per_second": 2}
