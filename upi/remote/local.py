"""The machine upi runs on, as a push target: the runner, no shell, no SSH."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from upi.errors import CommandError
from upi.remote.base import (
    CHUNK,
    SBIN_DIRS,
    Content,
    Mark,
    Span,
    copy_into,
    refuse_irregular,
    span_of,
    tail_of,
)
from upi.remote.errors import RemoteError
from upi.runner import Result, run
from upi.safefs import write_all


class _FdWriter:
    """An fd as a Writable whose every write is complete (safefs.write_all)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes, /) -> int:
        write_all(self.fd, data)
        return len(data)


class LocalTransport:
    """Runs programs through upi.runner and writes files directly."""

    def __init__(self, command_timeout: float = 60.0) -> None:
        self.command_timeout = command_timeout
        path = os.environ.get("PATH", "")
        self._env = {**os.environ, "PATH": os.pathsep.join([path, *SBIN_DIRS])}

    @property
    def name(self) -> str:
        """Always `local`."""
        return "local"

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Result:
        """Run `argv` here; a missing program is exit 127, as a shell would say."""
        limit = timeout or self.command_timeout
        try:
            return run(argv, timeout=limit, check=False, env=self._env)
        except CommandError as exc:
            if exc.returncode == 127:
                return Result(tuple(argv), 127, "", exc.stderr)
            raise

    def write_file(self, path: str, content: Content, mode: int) -> None:
        """Create `path` with `mode` (a secret is never readable by others, even briefly).

        A leftover there (an older staged copy, or a planted link) is removed,
        the link itself; then O_EXCL|O_NOFOLLOW: nothing is written through a
        link. Every byte is written (short writes retried) and flushed to disk.
        """
        try:
            Path(path).unlink(missing_ok=True)
            fd = os.open(Path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, mode)
            try:
                os.fchmod(fd, mode)  # the umask may have trimmed it
                copy_into(_FdWriter(fd), content)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RemoteError(f"local: cannot write {path}: {exc.strerror or exc}") from None

    def read_tail(self, path: str, limit: int) -> bytes:
        """The end of a file here (Transport.read_tail); only a regular file is read.

        Opened without blocking, so a FIFO with no writer is refused, not waited on.
        """
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            refuse_irregular(path, st.st_mode)
            os.set_blocking(fd, True)
            return tail_of(fh, st.st_size, limit)

    @contextlib.contextmanager
    def open_log(self, path: str, since: Mark | None, limit: int) -> Iterator[tuple[Span, Iterator[bytes]]]:
        """The new bytes of a log here (Transport.open_log), in chunks of 1 MiB; only a regular file.

        The identity and size are those of the open file (fstat): a rotation
        between two reads is seen at the next.
        """
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):  # as read_tail says it (its fdopen refuses a directory)
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            refuse_irregular(path, st.st_mode)
            os.set_blocking(fd, True)
            span = span_of(f"{st.st_dev}:{st.st_ino}", st.st_size, since, limit)

            def chunks() -> Iterator[bytes]:
                left = span.end - span.start
                while left > 0 and (data := os.pread(fd, min(CHUNK, left), span.end - left)):
                    left -= len(data)
                    yield data

            yield span, chunks()
        finally:
            os.close(fd)

    def close(self) -> None:
        """Nothing to release."""
