"""Loopback accept loops that stop for good: a listener closed under a thread blocked in accept().

Closing a listening socket does not wake a thread blocked in its accept(): the
call goes on, and when the kernel restarts it (the process stopped and
continued, a signal whose handler asks for restart) it runs again on the same
file descriptor number, by then another test's listening socket. That thread then
takes the other test's connections: a BMC fake's client met an sshd behind
this relay ("Connection reset by peer") and the fake's own serving loop
blocked in accept() forever. `shutdown(SHUT_RDWR)` wakes the blocked accept()
(EINVAL), so the loop ends before the descriptor is released.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class AcceptLoop:
    """A listening socket on loopback whose thread runs `handle(conn)` for each connection."""

    def __init__(self, handle: Callable[[socket.socket], None], backlog: int = 64) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=backlog)
        self.port: int = self.sock.getsockname()[1]
        self._handle = handle
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # shut down by close(): the loop is over
                return
            self._handle(conn)

    def close(self) -> None:
        """Wake the accept(), wait for the loop to end, then release the socket."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self.sock.close()


class Relay(AcceptLoop):
    """A TCP relay on loopback to `port`, counting the bytes sent towards the client (`down`)."""

    def __init__(self, port: int) -> None:
        self.target, self.down = port, 0
        super().__init__(self._connect)

    def _connect(self, client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if down:
                    self.down += len(data)
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
