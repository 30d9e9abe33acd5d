"""What `upi push` needs from a host: run a program, write a file."""

from __future__ import annotations

import errno
import stat
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from upi.runner import Result

# Validators and reloads live in sbin; a non-root login's PATH often lacks it.
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class Transport(Protocol):
    """One host, reached locally or over SSH; the same calls either way."""

    @property
    def name(self) -> str:
        """Where commands run, for messages: `local` or `user@host:port`."""
        ...

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Result:
        """Run `argv` on the host; return its exit code and output (never raise on rc != 0)."""
        ...

    def write_file(self, path: str, content: Content, mode: int) -> None:
        """Create `path` anew with `mode` set before any byte is written.

        A leftover at `path` is removed first (a link itself, never its target)
        and the file is created with O_EXCL, so nothing is ever written through
        a link planted there. `content` is the bytes, or a local file streamed
        in chunks (an RHCOS rootfs is ~1 GB: it is never read into memory whole).
        """
        ...

    def read_tail(self, path: str, limit: int) -> bytes:
        """The last `limit` bytes of the file at `path` at most, from a line start (tail_of).

        A missing or unreadable file is an OSError (its errno and strerror set).
        """
        ...

    def open_log(self, path: str, since: Mark | None,
                 limit: int) -> AbstractContextManager[tuple[Span, Iterator[bytes]]]:
        """A log's bytes appended since `since`, or its last `limit` bytes: the span read, and its chunks.

        With `since` naming this file (same identity, not shorter than the
        offset) the read starts at the offset; otherwise (rotated, truncated,
        first look) at the start. Never more than `limit` bytes: when more
        were written, only the last `limit`. The read ends at the size the
        file had when opened. A missing or unreadable file is an OSError, as
        read_tail.
        """
        ...

    def close(self) -> None:
        """Release the connection (a no-op locally)."""
        ...


CHUNK = 1 << 20


@dataclass(frozen=True)
class Mark:
    """Where the reading of a log stopped: the file's identity (`device:inode`) and the offset."""

    ident: str
    offset: int


@dataclass(frozen=True)
class Span:
    """Which bytes of which file a read of a log returns: [start, end) of the file `ident`."""

    ident: str
    start: int
    end: int

    def follows(self, since: Mark | None) -> bool:
        """Whether these bytes come right after `since` (else the reader starts over)."""
        return since is not None and since.ident == self.ident and since.offset == self.start

    @property
    def mark(self) -> Mark:
        """Where the next read goes on from."""
        return Mark(self.ident, self.end)


def span_of(ident: str, size: int, since: Mark | None, limit: int) -> Span:
    """What to read of a file of `size`: from the mark if it is this file's; the last `limit` at most."""
    start = since.offset if since is not None and since.ident == ident and since.offset <= size else 0
    return Span(ident, max(start, size - limit), size)


class Source(Protocol):
    """A local file to stream (push.model.LocalFile: opened without following links)."""

    def open(self) -> BinaryIO:
        """The file, open for binary reading."""
        ...


Content = bytes | Source | Path


class Seekable(Protocol):
    """An open file (local, or SFTP) read from an offset."""

    def seek(self, offset: int, whence: int = 0, /) -> object:
        """Move to `offset`."""
        ...

    def read(self, size: int, /) -> bytes:
        """At most `size` bytes."""
        ...


def refuse_irregular(path: str, mode: int | None) -> None:
    """Raise OSError unless `mode` is a regular file's: a FIFO blocks its reader, /dev/zero never ends.

    None (an SFTP server that tells no mode) is let through.
    """
    if mode is not None and not stat.S_ISREG(mode):
        from upi.safefs import kind_of

        raise OSError(errno.EINVAL, f"{kind_of(mode)}, not a regular file", path)


def tail_of(fh: Seekable, size: int, limit: int) -> bytes:
    """The last `limit` bytes at most of an open file of `size` bytes, from a line start.

    Never more than `limit` is read (a log may be large, or grow while read);
    when the file is longer, the cut first line is dropped.
    """
    fh.seek(max(0, size - limit))
    data = fh.read(limit)
    if size > limit:
        data = data[data.find(b"\n") + 1:]
    return data


class Writable(Protocol):
    """An open file (local, or SFTP) that takes bytes."""

    def write(self, data: bytes, /) -> object:
        """Write `data`."""
        ...


def copy_into(fh: Writable, content: Content) -> int:
    """Write `content` (bytes, or a local file in 1 MiB chunks) to an open file; the bytes sent."""
    if isinstance(content, bytes):
        fh.write(content)
        return len(content)
    sent = 0
    with content.open("rb") if isinstance(content, Path) else content.open() as src:
        while chunk := src.read(CHUNK):
            fh.write(chunk)
            sent += len(chunk)
    return sent
