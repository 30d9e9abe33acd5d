"""Background jobs of `upi wait` (CSR approver, VM shepherd): started, stopped, failures kept.

A job that fails does not stop the wait (the installer decides whether the
install is healthy); its failure is reported as a warning and in the summary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from upi.errors import UpiError

JOIN_SECONDS = 15.0  # an approver blocked on an unreachable API returns within its 10 s timeout

Job = Callable[[threading.Event], object]


class Worker:
    """One job in a daemon thread, ended by setting its stop event."""

    def __init__(self, name: str, job: Job, on_error: Callable[[str], None]) -> None:
        self.name = name
        self.error: str | None = None
        self._job = job
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"upi-wait-{name}", daemon=True)

    def _run(self) -> None:
        try:
            self._job(self._stop)
        except UpiError as exc:
            self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - a helper's bug must not kill the wait; it is reported
            self._fail(f"{type(exc).__name__}: {exc}")

    def _fail(self, message: str) -> None:
        if not self._stop.is_set():
            self.error = message
            self._on_error(f"{self.name} stopped: {message}")

    def start(self) -> None:
        """Run the job."""
        self._thread.start()

    def signal(self) -> None:
        """Ask the job to end, without waiting."""
        self._stop.set()

    def stop(self) -> None:
        """Ask the job to end and wait for it (a bounded time: the thread is a daemon)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(JOIN_SECONDS)


class Workers:
    """The jobs of one run; every one stopped on exit, whatever the exit."""

    def __init__(self) -> None:
        self.jobs: dict[str, Worker] = {}

    def add(self, worker: Worker) -> None:
        """Start a job and keep it for stopping."""
        self.jobs[worker.name] = worker
        worker.start()

    def stop(self, name: str) -> None:
        """Stop one job, if it runs."""
        if name in self.jobs:
            self.jobs[name].stop()

    def stop_all(self) -> None:
        """Stop every job (signal all first, then wait, so they end together)."""
        for worker in self.jobs.values():
            worker.signal()
        for worker in self.jobs.values():
            worker.stop()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop_all()
