"""An overall deadline for each request to the Kubernetes API: connect, TLS, headers and body.

httpx's timeouts bound one socket operation each, and each restarts with
every byte: a server dripping its response headers a byte every few seconds
held a request (and `approve-csr --once`, `upi gpu`) for as long as it liked,
since upi's own deadline (upi.csr.api) could only start once the headers were
in. Here the network backend under httpx's connection pool shortens every
connect, read and write to what is left of the current request's deadline
(a context variable, so each thread has its own), and fails the one that
starts after it: a request ends by its deadline, however the server sends.
httpcore's NetworkBackend/NetworkStream interface is the documented seam for
this (encode/httpcore docs/network-backends.md; httpcore2 is its fork).
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import httpcore2
import httpx2
from httpcore2 import ConnectTimeout, NetworkBackend, NetworkStream, ReadTimeout, SyncBackend, WriteTimeout

_END: ContextVar[float | None] = ContextVar("upi_api_request_end", default=None)
_FLOOR = 0.001  # a socket timeout of 0 would make it non-blocking, not "expired"


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[None]:
    """Every network operation of this thread, until the block ends, finishes `seconds` from now."""
    token = _END.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _END.reset(token)


def extend(seconds: float) -> None:
    """Move the current deadline to `seconds` from now (a watch stream, once its headers are in)."""
    if _END.get() is not None:
        _END.set(time.monotonic() + seconds)


def expired() -> bool:
    """The current request's deadline has passed."""
    end = _END.get()
    return end is not None and time.monotonic() >= end


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    end = _END.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's overall deadline passed")
    return max(_FLOOR, left if timeout is None else min(timeout, left))


class _Stream(NetworkStream):
    """A connection whose every operation ends by the current request's deadline."""

    def __init__(self, inner: NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout, ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(NetworkBackend):
    """The synchronous socket backend, each stream wrapped in _Stream."""

    def __init__(self) -> None:
        self._inner = SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _clamp(timeout, ConnectTimeout),
                                               local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _clamp(timeout, ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class BoundedTransport(httpx2.HTTPTransport):
    """httpx's transport over a connection pool whose sockets keep the current request's deadline.

    Direct connections only (no proxy from the environment): the API server is
    reached as the kubeconfig names it. HTTPTransport has no parameter for a
    network backend, so its pool is replaced by one built with ours.
    """

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore2.ConnectionPool(ssl_context=ssl_context, network_backend=_Backend())
