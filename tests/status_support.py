"""Helpers for the `upi status` tests that need a real process: a terminal of its own, signals."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from childsignals import sigint_default, with_sigint_default

ROOT = Path(__file__).resolve().parent.parent


def _take_terminal() -> None:
    """In the child, after setsid: stdin (the pty) becomes the controlling terminal, as in a login."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass
class Upi:
    """A `python -m upi` process and everything it wrote so far (stdout and stderr together on a pty)."""

    proc: subprocess.Popen[bytes]
    fd: int | None = None  # the pty's master side (stdout and stderr), or the stdout pipe
    err_fd: int | None = None  # the stderr pipe, without a pty
    output: bytearray = field(default_factory=bytearray)
    errors: bytearray = field(default_factory=bytearray)

    def read(self, limit: float = 0.1) -> None:
        """Collect what arrived within `limit` seconds."""
        fds = [fd for fd in (self.fd, self.err_fd) if fd is not None]
        ready, _, _ = select.select(fds, [], [], limit) if fds else ([], [], [])
        for fd in ready:
            with contextlib.suppress(OSError):  # EIO: the child closed its side of the pty
                (self.output if fd == self.fd else self.errors).extend(os.read(fd, 65536))

    def until(self, predicate: Callable[[], bool], what: str, limit: float = 90.0) -> None:
        """Read until `predicate` holds; the limit only guards against a hang (it fails the test)."""
        end = time.monotonic() + limit
        while not predicate():
            if time.monotonic() > end:
                self.proc.kill()
                raise AssertionError(f"gave up waiting for {what} after {limit:.0f} s; the output:\n"
                                     + self.text())
            self.read()

    def finish(self, limit: float = 90.0) -> int:
        """Wait for the exit (reading on), then the exit status."""
        self.until(lambda: self.proc.poll() is not None, "upi to exit", limit)
        for _ in range(20):
            self.read(0.01)
        if self.proc.stdout is None and self.fd is not None:
            os.close(self.fd)  # the pty (pipes are closed with the Popen)
        self.fd = self.err_fd = None
        return self.proc.returncode

    def text(self) -> str:
        """What it wrote: stdout (with stderr on a pty)."""
        return self.output.decode(errors="replace")

    def stderr(self) -> str:
        """What it wrote on stderr, without a pty."""
        return self.errors.decode(errors="replace")


def spawn(args: list[str], *, tty: bool, env: dict[str, str] | None = None) -> Upi:
    """`upi ARGS` in a new session: on a pty as its controlling terminal, or with pipes (no stdin)."""
    argv = [sys.executable, "-m", "upi", *args]
    environ = {**os.environ, **(env or {})}
    if not tty:
        proc = subprocess.Popen(argv, cwd=ROOT, env=environ, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=sigint_default)  # tests send it SIGINT (childsignals.py)
        assert proc.stdout is not None and proc.stderr is not None
        return Upi(proc, proc.stdout.fileno(), proc.stderr.fileno())
    # The terminal's size is the pty's: COLUMNS and LINES in this environment (pytest-xdist's
    # workers have 80x24 there) would override it for rich and cut the table.
    environ = {k: v for k, v in environ.items() if k not in ("COLUMNS", "LINES")}
    master, slave = pty.openpty()
    # A wide terminal, so the live table's cells are not cut to `…`.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 220, 0, 0))
    try:
        proc = subprocess.Popen(argv, cwd=ROOT, env=environ, stdin=slave, stdout=slave, stderr=slave,
                                start_new_session=True, preexec_fn=with_sigint_default(_take_terminal))
    finally:
        os.close(slave)
    return Upi(proc, master)
