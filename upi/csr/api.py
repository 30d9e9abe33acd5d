"""Bounded, defensive JSON requests to the Kubernetes API.

Everything upi reads from an API server is treated as hostile: a response
body is streamed and refused past a size cap (and, for one request, past an
overall deadline, so a server dripping a byte a second cannot hang a pass);
a body that is not one JSON object, is truncated or nests absurdly deep
becomes an ApiResponseError naming the request, never a traceback. Lists are
read in pages (`limit`/`continue`). Watch streams are split into events with
a per-event cap; one malformed event is handed back as such so the caller can
log it and carry on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from upi.digits import natural
from upi.errors import ClusterError

MAX_RESPONSE = 16 * 1024 * 1024  # one response or one page of a list; CSR lists page at PAGE
MAX_EVENT = 2 * 1024 * 1024  # one watch event (one CSR object is a few kB)
REQUEST_SECONDS = 60.0  # overall, per request: the per-read timeout alone lets a drip go on forever
PAGE = 250
MAX_PAGES = 1000


class ApiResponseError(ClusterError):
    """The API answered something that is not what the protocol promises."""


class ApiStatus(ClusterError):
    """The API answered an HTTP error; `code` is its status."""

    def __init__(self, what: str, code: int, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{what}: HTTP {code}" + (f": {message}" if message else ""))


@dataclass(frozen=True)
class BadEvent:
    """A watch event that could not be used, and why (the caller logs it and goes on)."""

    reason: str


def parse_object(raw: bytes, what: str) -> dict[str, Any]:
    """One JSON object, or ApiResponseError saying what is wrong with it."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise ApiResponseError(f"{what}: the response nests too deeply to be a Kubernetes object") from None
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        cut = " (truncated?)" if "Expecting" in str(exc) or "Unterminated" in str(exc) else ""
        raise ApiResponseError(f"{what}: the response is not JSON{cut}: {exc}") from None
    if not isinstance(doc, dict):
        raise ApiResponseError(f"{what}: the response is a JSON {type(doc).__name__}, not an object")
    return doc


class Api:
    """JSON over a client (httpx API: `stream`) whose base URL and credentials are the kubeconfig's."""

    def __init__(self, http: Any, *, max_bytes: int | None = None, max_event: int | None = None,
                 deadline: float | None = None) -> None:
        self.http = http
        # None: the module's limits, read now (so a test can lower them for every Api).
        self.max_bytes = MAX_RESPONSE if max_bytes is None else max_bytes
        self.max_event = MAX_EVENT if max_event is None else max_event
        self.deadline = REQUEST_SECONDS if deadline is None else deadline

    def request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                body: dict[str, Any] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        """The JSON object of one response; an HTTP error status raises ApiStatus."""
        raw = self.raw(method, path, params=params, body=body, content_type=content_type)
        return parse_object(raw, f"{method} {path}")

    def raw(self, method: str, path: str, *, params: dict[str, str] | None = None,
            body: dict[str, Any] | None = None, content_type: str = "application/json") -> bytes:
        """The body of one response, read within the caps (a pod's log is text, not JSON)."""
        what = f"{method} {path}"
        kwargs: dict[str, Any] = {"params": params or {}}
        if body is not None:
            kwargs["content"] = json.dumps(body).encode()
            kwargs["headers"] = {"Content-Type": content_type}
        import httpx2

        from upi.csr.deadline import request_deadline

        end = time.monotonic() + self.deadline
        try:
            # The whole request: connect, TLS, headers and body (a dripped header too).
            with request_deadline(self.deadline), self.http.stream(method, path, **kwargs) as resp:
                raw = self._read(resp, what, end)
                code = resp.status_code
        except httpx2.TimeoutException:
            if time.monotonic() < end:
                raise
            raise ApiResponseError(f"{what}: the response took longer than {self.deadline:g} s "
                                   "(the server sends too slowly, or never ends)") from None
        if code >= 400:
            raise ApiStatus(what, code, _status_message(raw))
        return raw

    def _read(self, resp: Any, what: str, end: float) -> bytes:
        length = resp.headers.get("Content-Length")
        size = natural(length.strip(), leading_zeros=True) if length is not None else None
        if length is not None and size is None:  # '²', 5,000 digits, '-1': no HTTP length
            raise ApiResponseError(f"{what}: the response's Content-Length {length[:20]!r} is not a number")
        if size is not None and size > self.max_bytes:
            raise ApiResponseError(f"{what}: the response is {size:,} bytes, more than upi "
                                   f"reads ({self.max_bytes:,})")
        out = bytearray()
        for chunk in resp.iter_bytes():
            out += chunk
            if len(out) > self.max_bytes:
                raise ApiResponseError(f"{what}: the response is larger than upi reads "
                                       f"({self.max_bytes:,} bytes)")
            if time.monotonic() > end:
                raise ApiResponseError(f"{what}: the response took longer than {self.deadline:g} s "
                                       f"({len(out):,} bytes so far)")
        return bytes(out)

    def list(self, path: str, *, params: dict[str, str] | None = None) -> tuple[str, list[Any]]:
        """Every item of a list (followed page by page) and the list's resourceVersion."""
        items: list[Any] = []
        token = ""
        for _ in range(MAX_PAGES):
            query = {**(params or {}), "limit": str(PAGE)}
            if token:
                query["continue"] = token
            doc = self.request("GET", path, params=query)
            meta = doc.get("metadata")
            page = doc.get("items")
            if not isinstance(meta, dict) or not isinstance(page, list | None):
                raise ApiResponseError(f"GET {path}: the response is not a list "
                                       "(no metadata, or items is not an array)")
            items += page or []
            rv, token = meta.get("resourceVersion"), meta.get("continue") or ""
            if not isinstance(rv, str) or not isinstance(token, str):
                raise ApiResponseError(f"GET {path}: the list's resourceVersion or continue is not a string")
            if not token:
                return rv, items
        raise ApiResponseError(f"GET {path}: more than {MAX_PAGES} pages")

    def watch(self, path: str, params: dict[str, str], *, read_timeout: float,
              stop: threading.Event) -> Iterator[dict[str, Any] | BadEvent]:
        """Events of one watch stream until it ends, `stop` is set, or it idles `read_timeout`.

        Raises ApiStatus for an HTTP error; a malformed event is yielded as BadEvent.
        """
        import httpx2

        from upi.csr.deadline import extend, request_deadline

        timeout = httpx2.Timeout(10.0, read=read_timeout)
        what = f"watch {path}"
        # The server ends a watch after timeoutSeconds; past that (and a request's deadline) it is stuck.
        lasts = float(natural(params.get("timeoutSeconds", "")) or 0) + self.deadline
        try:
            with request_deadline(self.deadline), \
                    self.http.stream("GET", path, params=params, timeout=timeout) as resp:
                extend(lasts)
                if resp.status_code >= 400:
                    raw = self._read(resp, what, time.monotonic() + self.deadline)
                    raise ApiStatus(what, resp.status_code, _status_message(raw))
                buf = bytearray()
                for chunk in resp.iter_bytes():
                    buf += chunk
                    *lines, rest = bytes(buf).split(b"\n")
                    buf = bytearray(rest)
                    if len(buf) > self.max_event:
                        raise ApiResponseError(f"{what}: one event is larger than upi reads "
                                               f"({self.max_event:,} bytes)")
                    for line in lines:
                        if stop.is_set():
                            return
                        if line.strip():
                            yield _event(line)
                if buf.strip() and not stop.is_set():
                    yield BadEvent(f"the stream ended inside an event ({len(buf):,} bytes)")
        except (httpx2.ReadTimeout, httpx2.ConnectTimeout):
            return  # idle or past its deadline: the caller checks `stop`, then resumes or starts over


def _event(line: bytes) -> dict[str, Any] | BadEvent:
    try:
        event = parse_object(line, "watch event")
    except ApiResponseError as exc:
        return BadEvent(str(exc).removeprefix("watch event: "))
    if not isinstance(event.get("type"), str) or not isinstance(event.get("object"), dict):
        return BadEvent("the event has no string type or no object")
    return event


def _status_message(raw: bytes) -> str:
    """The message of a metav1.Status body, if it is one (else nothing: never echo raw bytes)."""
    try:
        doc = json.loads(raw[:65536])
    except (ValueError, RecursionError):
        return ""
    msg = doc.get("message") if isinstance(doc, dict) else None
    if not isinstance(msg, str):
        return ""
    return "".join(c if c.isprintable() else "?" for c in msg[:300])
