"""A FAKE HTTP server that misbehaves on purpose, and a real nginx for the rest.

No real server sends a Last-Modified of `yesterday`, a Content-Length of `²`
or its headers one byte a second, so a few lines of socket code do: each path
gets a script of raw byte strings (sent as written) and pauses (floats, in
seconds) between them. Well-behaved serving is a real nginx's job (tests/realnginx.py).
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator

from check_helpers import LOOPBACK

Script = list[bytes | float]


def response(body: bytes, *, status: str = "200 OK", headers: dict[str, str] | None = None) -> bytes:
    """A raw HTTP/1.1 response; `headers` replace the defaults (a None-free dict, sent as written)."""
    head = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def drip(data: bytes, every: float = 1.0) -> Script:
    """`data` one byte at a time, `every` seconds apart: a server that never quite stalls."""
    out: Script = []
    for b in data:
        out += [bytes([b]), every]
    return out


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(5)
        ctx = self.server.ssl_context  # type: ignore[attr-defined]
        if ctx is not None:
            try:
                conn = ctx.wrap_socket(conn, server_side=True)
            except OSError:
                return
        request = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in request and len(request) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
        parts = request.split(b" ", 2)
        path = parts[1].decode("latin-1") if len(parts) > 1 else "/"
        server: FakeHttp = self.server  # type: ignore[assignment]
        server.requests.append(path)
        script = server.routes.get(path, server.default)
        with contextlib.suppress(OSError):
            for step in script:
                if server.stopping.is_set():
                    return
                if isinstance(step, float):
                    server.stopping.wait(step)
                else:
                    conn.sendall(step)


class FakeHttp(socketserver.ThreadingTCPServer):
    """The fake's state: routes (path -> script), a default script, the paths asked for."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, routes: dict[str, Script], default: Script,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__((LOOPBACK, 0), _Handler)
        self.routes, self.default, self.ssl_context = routes, default, ssl_context
        self.requests: list[str] = []
        self.stopping = threading.Event()


@contextlib.contextmanager
def fake_http(routes: dict[str, Script], default: Script | None = None, *,
              ssl_context: ssl.SSLContext | None = None) -> Iterator[FakeHttp]:
    """Serve the scripts on a loopback port (`server.server_address[1]`) until the block ends.

    With `ssl_context` (a server context) every connection is TLS first.
    """
    server = FakeHttp(routes, default or [response(b"\x7fELF" + b"\0" * 64)], ssl_context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
