"""An overall deadline for one HTTP exchange, however slowly the peer sends.

A socket timeout bounds each read and restarts with every byte, so a peer
sending one byte a second would hold a reader forever. The watchdog shuts the
connection's socket when the deadline passes; a read blocked on it returns,
and the reader, seeing `fired`, reports the deadline rather than whatever
error the shut socket produced.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any


class Watchdog:
    """Shuts `conn.sock` (any http.client-style connection) when `seconds` have passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.conn: Any = None  # the connection to watch, set once it exists
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        self.fired = True
        sock = getattr(self.conn, "sock", None)
        if sock is not None:
            # The plain socket's shutdown: an SSL socket's would drop its state under the reader.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


_current = threading.local()  # the watchdog of the request this thread is making


class Watched:
    """A mixin for http.client connections: hands itself to the current watchdog as it connects.

    `watching(dog)` names the watchdog for the connections this thread opens
    meanwhile (a Redfish request, an image download): the socket is set before
    the TLS handshake, so the handshake is watched too.
    """

    def connect(self) -> None:
        """Connect, the current watchdog (if any) watching this connection."""
        dog = getattr(_current, "dog", None)
        if dog is not None:
            dog.conn = self
        super().connect()  # type: ignore[misc]


@contextlib.contextmanager
def watching(dog: Watchdog) -> Iterator[Watchdog]:
    """While the block runs, the connections this thread opens (Watched) are `dog`'s."""
    _current.dog = dog
    try:
        yield dog
    finally:
        _current.dog = None
