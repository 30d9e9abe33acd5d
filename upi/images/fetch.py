"""Where RHCOS files come from: a directory of downloads or an HTTP(S) mirror.

A source opens one file by name at an offset, so an interrupted download
resumes (HTTP Range; a server that ignores it sends the whole file again and
the caller starts over). Files are read in chunks, never whole.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import ssl
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from upi.digits import natural
from upi.errors import UsageError
from upi.safefs import kind_of, shown
from upi.watchdog import Watchdog, Watched, watching

CHUNK = 1 << 20
TIMEOUT = 30.0  # seconds without a byte before a download counts as stalled
HEAD_SECONDS = 60.0  # connect, TLS, redirects and response headers, however slowly they come
MIN_RATE = 64 * 1024  # bytes/s over a whole transfer, judged after RATE_GRACE seconds
RATE_GRACE = 30.0
MAX_FILE = 8 << 30  # a file of no announced or recorded size: an RHCOS rootfs or raw.gz is ~1-2 GiB
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


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to another http(s):// URL (urllib alone would also follow ftp://)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        scheme = urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise urllib.error.HTTPError(req.full_url, code, f"redirect to a {scheme[:20]}: URL refused "
                                         "(only http:// and https://)", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _HttpConnection(Watched, http.client.HTTPConnection):
    pass


class _HttpsConnection(Watched, http.client.HTTPSConnection):
    pass


class _HttpHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HttpConnection, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self) -> None:
        self.tls = ssl.create_default_context()  # verified: certificate and host name
        super().__init__(context=self.tls)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HttpsConnection, req, context=self.tls)


@contextlib.contextmanager
def _watched(seconds: float) -> Iterator[Watchdog]:
    """A watchdog over the connections this thread opens while the block runs."""
    with Watchdog(seconds) as dog, watching(dog):
        yield dog


def _budget(size: int) -> float:
    """Seconds a transfer of `size` bytes may take: the rate floor's worth, plus a stall's."""
    return RATE_GRACE + size / MIN_RATE + TIMEOUT


class HttpSource:
    """An HTTP(S) mirror: `BASE/<file name>`. TLS is verified (the system's CA store).

    Each request is bounded as a whole: connect and headers (redirects too)
    within HEAD_SECONDS, the body within what MIN_RATE allows for its size
    (a watchdog shuts the socket), and slower than MIN_RATE on average after
    RATE_GRACE seconds is a failure at once. A redirect leads only to http(s).
    """

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self._opener = urllib.request.build_opener(_Redirects, _HttpHandler, _HttpsHandler)

    def where(self, name: str) -> str:
        """The file's URL."""
        return f"{self.base}/{quote(name)}"

    def _get(self, name: str, offset: int) -> urllib.request.Request:
        headers = {"User-Agent": "upi-images", "Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        return urllib.request.Request(self.where(name), headers=headers)  # noqa: S310 - http(s) only

    def _head(self, name: str, offset: int) -> tuple[Any, Any]:
        """The response (headers read) and its connection; FetchFailed for errors and a late answer."""
        with _watched(HEAD_SECONDS) as dog:
            try:
                resp = self._opener.open(self._get(name, offset), timeout=TIMEOUT)
            except urllib.error.HTTPError as exc:
                exc.close()
                if dog.fired:
                    raise self._late(name, HEAD_SECONDS) from None
                raise
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if dog.fired:
                    raise self._late(name, HEAD_SECONDS) from None
                reason = getattr(exc, "reason", None) or exc
                raise FetchFailed(f"{self.where(name)}: {reason}") from None
            return resp, dog.conn

    def _late(self, name: str, seconds: float) -> FetchFailed:
        return FetchFailed(f"{self.where(name)}: no answer within {seconds:g} s (the mirror is too slow "
                           "or stalls)")

    @contextlib.contextmanager
    def open(self, name: str, offset: int) -> Iterator[Opened]:
        """GET the file, with a Range from `offset` (a 200 answer means: from 0)."""
        try:
            resp, conn = self._head(name, offset)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and offset:  # the partial file is longer than the file: start over
                with self.open(name, 0) as opened:
                    yield opened
                return
            raise FetchFailed(f"{self.where(name)}: HTTP {exc.code} {str(exc.reason)[:120]}") from None
        with resp:
            start = _range_start(resp.headers.get("Content-Range")) if resp.status == 206 else 0
            if start not in (0, offset):
                raise FetchFailed(f"{self.where(name)}: the server answered a range from {start}, "
                                  f"not {offset}")
            length = resp.headers.get("Content-Length")
            size = natural(length.strip(), leading_zeros=True) if length is not None else None
            if length is not None and size is None:
                raise FetchFailed(f"{self.where(name)}: the server's Content-Length {length[:20]!r} is "
                                  "not a number")
            # More than MAX_FILE is refused by the stager anyway (and would overflow the timer).
            seconds = _budget(min(size, MAX_FILE) if size is not None else MAX_FILE)
            with Watchdog(seconds) as dog:
                dog.conn = conn
                yield Opened(_chunks(resp, self.where(name), dog), start,
                             start + size if size is not None else None)

    def read_small(self, name: str) -> str | None:
        """The first MiB of `name` as text; None on any error (the list is optional)."""
        try:
            resp, conn = self._head(name, 0)
        except (FetchFailed, urllib.error.HTTPError):
            return None
        with resp, Watchdog(_budget(SUMS_LIMIT)) as dog:
            dog.conn = conn
            try:
                return b"".join(_chunks(resp, self.where(name), dog, SUMS_LIMIT)).decode(errors="replace")
            except FetchFailed:
                return None


def _range_start(value: str | None) -> int:
    found = re.match(r"bytes ([0-9]{1,19})-", value or "")
    return int(found[1]) if found else -1


def _chunks(resp: Any, where: str, dog: Watchdog, limit: int | None = None) -> Iterator[bytes]:
    """The body as it arrives (read1: a byte that comes is seen), under the rate floor and the watchdog."""
    started, got = time.monotonic(), 0
    while limit is None or got < limit:
        try:
            chunk = resp.read1(CHUNK if limit is None else min(CHUNK, limit - got))
        except (OSError, urllib.error.URLError, http.client.HTTPException) as exc:
            if dog.fired:
                raise FetchFailed(f"{where}: not complete within {dog.seconds:g} s") from None
            raise FetchFailed(f"{where}: {exc}") from None
        if dog.fired:
            raise FetchFailed(f"{where}: not complete within {dog.seconds:g} s")
        if not chunk:
            return
        got += len(chunk)
        elapsed = time.monotonic() - started
        if elapsed > RATE_GRACE and got / elapsed < MIN_RATE:
            raise FetchFailed(f"{where}: slower than {MIN_RATE // 1024} KiB/s ({got:,} bytes in "
                              f"{elapsed:.0f} s): a mirror this slow is stalled or dripping")
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
