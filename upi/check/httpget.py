"""One HTTP GET that a hostile or broken server cannot hang or crash.

The socket timeout alone bounds each read, so a server that sends one byte a
second (in its headers or its body) would hold a check forever: every fetch
also has an overall deadline, enforced by a watchdog that shuts the socket
(`upi.watchdog`).
Bodies are read up to a cap, or streamed through sha256 without being kept.
Anything unexpected (a URL that does not parse, a bad redirect, a broken
status line) becomes `Fetched.error`, never an exception.
"""

from __future__ import annotations

import hashlib
import http.client
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from upi.check.reach import miss
from upi.watchdog import Watchdog

MAX_REDIRECTS = 5
CHUNK = 1 << 20
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class Fetched:
    """Status, headers, the first `keep` bytes of the body, its size and sha256, or `error`."""

    status: int = 0
    body: bytes = b""
    last_modified: str | None = None
    length: str | None = None
    size: int = 0
    sha256: str = ""
    complete: bool = False  # the whole body was read (not cut at `read`)
    error: str = ""
    cause: str = ""  # a network error's cause (`upi.check.reach.Cause`): no route, refused, ...


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection for `url` and the request target; ValueError for anything but http(s)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http:// or https:// URL")
    port = parts.port  # ValueError for a port that is not 0-65535
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme == "https":
        ctx = ssl.create_default_context()  # verified: certificate and host name
        return http.client.HTTPSConnection(parts.hostname, port, timeout=timeout, context=ctx), target
    return http.client.HTTPConnection(parts.hostname, port, timeout=timeout), target


def _why(exc: BaseException) -> str:
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(exc, http.client.BadStatusLine):
        return f"not an HTTP answer: {exc.args[0][:60]!r}" if exc.args and exc.args[0] else \
            "not an HTTP answer"
    if isinstance(exc, http.client.IncompleteRead):
        short = f" {exc.expected:,} bytes short of its Content-Length" if exc.expected else ""
        return f"the answer ended early (a broken chunk or a closed connection){short}"
    text = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
    return str(text) or type(exc).__name__


def _header(resp: http.client.HTTPResponse, name: str) -> str | None:
    value = resp.getheader(name)
    return value[:200] if value is not None else None


def _body(resp: http.client.HTTPResponse, keep: int, read: int | None, digest: bool,
          dog: Watchdog) -> tuple[bytes, int, str, bool]:
    """Read up to `read` bytes (None: to the end), keeping the first `keep`; hash them if asked."""
    sha = hashlib.sha256() if digest else None
    kept = bytearray()
    size = 0
    while read is None or size < read:
        want = CHUNK if read is None else min(CHUNK, read - size)
        chunk = resp.read1(want)
        if dog.fired:
            raise TimeoutError
        if not chunk:
            missing = resp.length  # what Content-Length promised and never came
            if missing:
                raise http.client.IncompleteRead(bytes(kept), missing)
            return bytes(kept), size, sha.hexdigest() if sha else "", True
        size += len(chunk)
        if sha is not None:
            sha.update(chunk)
        if len(kept) < keep:
            kept += chunk[:keep - len(kept)]
    return bytes(kept), size, sha.hexdigest() if sha else "", False


def _once(url: str, *, keep: int, read: int | None, digest: bool, timeout: float,
          dog: Watchdog) -> Fetched:
    """One GET, following up to MAX_REDIRECTS redirects."""
    for _ in range(MAX_REDIRECTS + 1):
        conn, target = _connection(url, timeout)
        dog.conn = conn
        try:
            conn.request("GET", target, headers={"Accept-Encoding": "identity", "User-Agent": "upi-check"})
            if dog.fired:
                raise TimeoutError
            resp = conn.getresponse()
            if resp.status in _REDIRECTS and resp.getheader("Location"):
                url = urljoin(url, resp.getheader("Location", ""))
                continue
            if resp.status >= 400:
                return Fetched(resp.status, error=f"HTTP {resp.status} {resp.reason[:80]}".rstrip())
            body, size, sha, complete = _body(resp, keep, read, digest, dog)
            return Fetched(resp.status, body, _header(resp, "Last-Modified"),
                           _header(resp, "Content-Length"), size, sha, complete)
        finally:
            conn.close()
    return Fetched(error=f"more than {MAX_REDIRECTS} redirects")


def fetch(url: str, *, timeout: float, retries: int = 0, deadline: float | None = None,
          keep: int = 0, read: int | None = None, digest: bool = False) -> Fetched:
    """GET `url` directly (no proxy from the environment); retry network errors and timeouts.

    `timeout` bounds connect and each read; `deadline` (default `timeout`) the whole
    attempt, headers and body, however slowly the server sends them. At most `read`
    bytes are read (None: all), the first `keep` kept; `digest` hashes what is read.
    """
    limit = timeout if deadline is None else deadline
    error, cause = "", ""
    for _ in range(retries + 1):
        start = time.monotonic()
        with Watchdog(limit) as dog:
            try:
                got = _once(url, keep=keep, read=read, digest=digest, timeout=timeout, dog=dog)
            except ValueError as exc:  # the URL (or a redirect's) does not parse: retrying cannot help
                return Fetched(error=f"bad URL: {exc}")
            except (OSError, UnicodeError, http.client.HTTPException) as exc:
                got = None
                error, cause = _why(exc), ""
                if isinstance(exc, OSError | UnicodeError) and \
                        not isinstance(exc, http.client.HTTPException):
                    m = miss(exc)
                    error, cause = m.text, m.cause
        if dog.fired or time.monotonic() - start > limit:
            error = f"no complete answer within {round(limit, 1):g} s (the server is too slow or stalls)"
            cause = "timeout"
        elif got is not None:
            return got
        if cause in ("refused", "no route", "no name"):
            break  # a definite answer: trying again cannot change it
    return Fetched(error=error, cause=cause)
