"""Where RHCOS files come from: a directory of downloads or an HTTP(S) mirror.

A source opens one file by name at an offset, so an interrupted download
resumes (HTTP Range; a server that ignores it sends the whole file again and
the caller starts over). Files are read in chunks, never whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urlsplit

from upi.errors import UsageError
from upi.safefs import kind_of, shown

CHUNK = 1 << 20
TIMEOUT = 30.0  # seconds without a byte before a download counts as stalled
SUMS = "sha256sum.txt"  # what the RHCOS mirrors publish beside the files
SUMS_LIMIT = 1 << 20
_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *]?(\S+)$")


class FetchFailed(Exception):
    """One file could not be read from the source (the message says why)."""


@dataclass
class Opened:
    """An open file of the source: chunks from `offset` (0 when the source could not resume)."""

    chunks: Iterator[bytes]
    offset: int
    total: int | None


class Source(Protocol):
    """A directory or a mirror URL."""

    def where(self, name: str) -> str:
        """The file's location, for messages."""
        ...

    def open(self, name: str, offset: int) -> contextlib.AbstractContextManager[Opened]:
        """The file `name` from `offset` (or from 0 when resuming is not possible)."""
        ...

    def read_small(self, name: str) -> str | None:
        """A small text file (the checksum list), None when there is none."""
        ...


def parse_sums(text: str) -> dict[str, str]:
    """`sha256sum` output -> file name -> sha256 (lines of another shape are ignored)."""
    out = {}
    for line in text.splitlines():
        found = _SUM_LINE.match(line.strip())
        if found:
            out[found[2].rsplit("/", 1)[-1]] = found[1].lower()
    return out


class DirSource:
    """RHCOS files downloaded into a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def where(self, name: str) -> str:
        """The file's path, for messages."""
        return shown(self.root / name)

    def _fd(self, name: str) -> int:
        path = self.root / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FetchFailed(f"{shown(path)} does not exist") from None
        except OSError as exc:
            raise FetchFailed(f"cannot read {shown(path)}: {exc.strerror}") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise FetchFailed(f"{shown(path)} is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return fd

    @contextlib.contextmanager
    def open(self, name: str, offset: int) -> Iterator[Opened]:
        """The file from `offset` (from 0 when it is shorter than that)."""
        fd = self._fd(name)
        try:
            size = os.fstat(fd).st_size
            start = offset if offset <= size else 0
            os.lseek(fd, start, os.SEEK_SET)
            yield Opened(iter(lambda: os.read(fd, CHUNK), b""), start, size)
        finally:
            os.close(fd)

    def read_small(self, name: str) -> str | None:
        """The first MiB of `name` as text; None when it is missing."""
        try:
            fd = self._fd(name)
        except FetchFailed:
            return None
        try:
            return os.read(fd, SUMS_LIMIT).decode(errors="replace")
        finally:
            os.close(fd)


class HttpSource:
    """An HTTP(S) mirror: `BASE/<file name>`. TLS is verified (the system's CA store)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def where(self, name: str) -> str:
        """The file's URL."""
        return f"{self.base}/{quote(name)}"

    def _get(self, name: str, offset: int) -> urllib.request.Request:
        headers = {"User-Agent": "upi-images", "Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        return urllib.request.Request(self.where(name), headers=headers)  # noqa: S310 - http(s) only

    @contextlib.contextmanager
    def open(self, name: str, offset: int) -> Iterator[Opened]:
        """GET the file, with a Range from `offset` (a 200 answer means: from 0)."""
        try:
            resp = urllib.request.urlopen(self._get(name, offset), timeout=TIMEOUT)  # noqa: S310
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and offset:  # the partial file is longer than the file: start over
                with self.open(name, 0) as opened:
                    yield opened
                return
            raise FetchFailed(f"{self.where(name)}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise FetchFailed(f"{self.where(name)}: {reason}") from None
        with resp:
            start = _range_start(resp.headers.get("Content-Range")) if resp.status == 206 else 0
            if start not in (0, offset):
                raise FetchFailed(f"{self.where(name)}: the server answered a range from {start}, "
                                  f"not {offset}")
            length = resp.headers.get("Content-Length")
            total = start + int(length) if length and length.isdigit() else None
            yield Opened(_chunks(resp, self.where(name)), start, total)

    def read_small(self, name: str) -> str | None:
        """The first MiB of `name` as text; None on any error (the list is optional)."""
        try:
            with urllib.request.urlopen(self._get(name, 0), timeout=TIMEOUT) as resp:  # noqa: S310
                return bytes(resp.read(SUMS_LIMIT)).decode(errors="replace")
        except (urllib.error.URLError, OSError):
            return None


def _range_start(value: str | None) -> int:
    found = re.match(r"bytes (\d+)-", value or "")
    return int(found[1]) if found else -1


def _chunks(resp: object, where: str) -> Iterator[bytes]:
    while True:
        try:
            chunk = resp.read(CHUNK)  # type: ignore[attr-defined]
        except (OSError, urllib.error.URLError) as exc:
            raise FetchFailed(f"{where}: {exc}") from None
        if not chunk:
            return
        yield chunk


def source_for(value: str) -> DirSource | HttpSource:
    """`--from`: an http(s):// URL or an existing directory (anything else is exit 2)."""
    from upi.redact import has_userinfo, hide_userinfo

    safe = repr(hide_userinfo(value))  # the password a URL holds is never printed
    try:
        scheme, host = urlsplit(value).scheme.lower(), urlsplit(value).hostname
    except ValueError:
        raise UsageError(f"--from {safe}: not a URL upi can read") from None
    if scheme in ("http", "https"):
        if has_userinfo(value):
            raise UsageError(f"--from {safe}: a user or password in the URL is refused (upi "
                             "names the mirror in its messages); serve the files without credentials "
                             "or download them into a directory")
        if not host:
            raise UsageError(f"--from {safe}: the URL names no host")
        return HttpSource(value)
    if scheme and len(scheme) > 1:
        raise UsageError(f"--from {safe}: only http:// and https:// mirrors, or a directory")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UsageError(f"--from {shown(path)}: not a directory (nor an http(s):// URL); "
                         "name the directory the RHCOS files were downloaded into")
    return DirSource(path)
