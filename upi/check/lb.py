"""`upi check lb`: the load balancer listens on every pool's port and forwards.

HAProxy in `mode tcp` accepts a client first and only then picks a server.
Right after it (re)starts it believes every server UP until its health
checks say otherwise (for 6443, `inter 10s fall 2`: 20 s), and meanwhile it
holds the client while it tries a server that is not there. So a connection
that is accepted, or even held open, proves nothing: a pool forwards only
when a server behind it answers through the load balancer. 6443, 22623 and
443 are TLS on every backend (API, machine config server, router), so a
completed TLS handshake is that answer; on 80 an HTTP answer is. Before the
nodes boot no pool has a live server: that is a warning, and a failure with
`cluster_up`.
"""

from __future__ import annotations

import functools
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from upi.check.reach import Miss, endpoint, hint, miss
from upi.check.report import CheckResult, Verdict
from upi.digits import natural
from upi.errors import UsageError
from upi.facts import Pool, lb_pools
from upi.facts.lb import API_PORT, HTTP_PORT, HTTPS_PORT, MCS_PORT
from upi.inventory import Inventory

AREA = "lb"
# HAProxy's own answer when it runs in `mode http` and has no server: the body of its
# built-in 503 (haproxy src/http.c, http_err_msgs), checked against the real haproxy in tests.
HAPROXY_NO_SERVER = b"No server is available to handle this request"


@dataclass(frozen=True)
class Target:
    """One LB frontend as checked: the pool, and the address actually dialled."""

    pool: Pool
    host: str
    port: int

    @property
    def label(self) -> str:
        """`LB 10.33.3.54:6443 (api-server)`, naming the mapped port when it differs."""
        mapped = "" if self.port == self.pool.port else f" via {self.port}"
        return f"LB {self.host}:{self.pool.port}{mapped} ({self.pool.name})"


def _connect(host: str, port: int, timeout: float, retries: int) -> socket.socket | Miss:
    """A connected socket, or why not (after `retries` more tries on a timeout)."""
    why = Miss("other", "")
    for _ in range(retries + 1):
        try:
            return socket.create_connection((host, port), timeout=timeout)
        except (OSError, UnicodeError) as exc:
            why = miss(exc)
            if why.cause != "timeout":
                return why  # a definite answer (refused, no route, no name): no retry
    return why


@functools.cache
def _unverified() -> ssl.SSLContext:
    """The one client context of every LB probe: it verifies nothing (see `_tls_answer`).

    Made once and shared by the probes' threads (an SSLContext is safe to share):
    `ssl.create_default_context()` would also load the system's CA store, about
    20 ms at each probe, for certificates this context never checks.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _tls_answer(sock: socket.socket, server_name: str, timeout: float) -> tuple[bool, str]:
    """Whether a TLS server answers a handshake through the LB; else what happened.

    Nothing is sent but a ClientHello and nothing is trusted from the answer:
    the backends' certificates are signed by the cluster's own CA, which no
    one has before the install (HAProxy's own health check uses `verify none`).
    """
    sock.settimeout(timeout)
    tls = _unverified().wrap_socket(sock, server_hostname=server_name, do_handshake_on_connect=False)
    try:
        tls.do_handshake()
        return True, "forwards"
    except TimeoutError:
        return False, f"accepted, no server answered within {timeout:g} s"
    except (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError):
        return False, "accepted, then closed"
    except ssl.SSLError as exc:
        if "ALERT" in str(exc.reason or ""):  # a TLS server refused our hello: it answered
            return True, "forwards"
        return False, f"accepted, but the answer is not TLS ({exc.reason or exc})"
    except OSError as exc:
        return False, f"accepted, then {exc.strerror or exc}"
    finally:
        tls.close()


def _http_answer(sock: socket.socket, server_name: str, timeout: float) -> tuple[bool, str]:
    """Whether an HTTP server (the router) answers `GET /` through the LB; else what happened."""
    sock.settimeout(timeout)
    data = b""
    try:
        sock.sendall(f"GET / HTTP/1.0\r\nHost: {server_name}\r\n\r\n".encode())
        end = time.monotonic() + timeout
        while len(data) < 4096 and time.monotonic() < end:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and data.split(b" ", 2)[1:2] != [b"503"]:
                break  # a server's answer; only a 503 needs its body read (whose page is it?)
    except TimeoutError:
        if not data:
            return False, f"accepted, no server answered within {timeout:g} s"
    except OSError as exc:
        if not data:
            return False, f"accepted, then {exc.strerror or 'closed'}"
    if not data:
        return False, "accepted, then closed"
    if not data.startswith(b"HTTP/"):
        return False, "accepted, but the answer is not HTTP"
    if HAPROXY_NO_SERVER in data:
        return False, "answered by the load balancer itself: no server"
    return True, "forwards"


def _answers(t: Target, sock: socket.socket, domain: str, timeout: float) -> tuple[bool, str]:
    """Ask the pool's protocol through the connection; the socket is closed after."""
    try:
        if t.pool.port == HTTP_PORT:
            return _http_answer(sock, f"console-openshift-console.apps.{domain}", timeout)
        name = f"api.{domain}" if t.pool.port in (API_PORT, MCS_PORT) else \
            f"console-openshift-console.apps.{domain}"
        return _tls_answer(sock, name, timeout)
    finally:
        sock.close()


def probe(t: Target, inv: Inventory, *, timeout: float, retries: int, cluster_up: bool) -> CheckResult:
    """Connect to one frontend and see whether a server of its pool answers through it."""
    servers = ", ".join(f"{s.name} {s.ip}" for s in t.pool.servers) or "no servers"
    conn = _connect(t.host, t.port, timeout, retries)
    if isinstance(conn, Miss):
        return CheckResult(AREA, t.label, "accepts and forwards", conn.text, "fail",
                           hint(conn, inv, t.host, endpoint(t.host, t.port),
                                listens="start haproxy with haproxy/haproxy.cfg there (`upi push`)",
                                firewall="firewall/load-balancer.sh",
                                redirect="--server and --port-map"))
    ok, got = _answers(t, conn, inv.cluster.domain, timeout)
    if ok:
        return CheckResult(AREA, t.label, "accepts and forwards", got, "pass")
    verdict: Verdict = "fail" if cluster_up else "warn"
    later = "" if cluster_up else " (expected until those nodes boot)"
    return CheckResult(AREA, t.label, "accepts and forwards", got, verdict,
                       f"{t.host}:{t.port} accepts but no server of {t.pool.name} answers "
                       f"({servers}){later}")


def readyz(host: str, port: int, *, timeout: float, cluster_up: bool) -> CheckResult:
    """`GET /readyz` over TLS through the API frontend, as HAProxy's own health check does."""
    label = f"GET https://{host}:{API_PORT}/readyz" + ("" if port == API_PORT else f" via {port}")
    # The API's certificate is signed by the cluster's own CA, which no one has
    # before the install; HAProxy's health check uses `verify none` too.
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                _unverified().wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(f"GET /readyz HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            data = _read_all(tls, timeout)
        status, _, body = data.partition(b"\r\n\r\n")
        first = status.split(b"\r\n", 1)[0].decode(errors="replace")
        got = f"{first.partition(' ')[2]} {body.decode(errors='replace').strip()[:40]}".strip()
        ok = first.split(" ")[1:2] == ["200"]
    except (OSError, ssl.SSLError) as exc:
        got, ok = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc), False
    if ok:
        return CheckResult(AREA, label, "200 ok", got, "pass")
    return CheckResult(AREA, label, "200 ok", got or "no answer", "fail" if cluster_up else "warn",
                       f"the Kubernetes API behind {host}:{port} is not ready: "
                       "see `openshift-install wait-for bootstrap-complete --log-level debug`")


def _read_all(tls: ssl.SSLSocket, timeout: float, limit: int = 65536) -> bytes:
    data = b""
    end = time.monotonic() + timeout
    while len(data) < limit and time.monotonic() < end:
        chunk = tls.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def check_lb(inv: Inventory, *, server: str | None = None, port_map: dict[int, int] | None = None,
             cluster_up: bool = False, timeout: float = 3.0, retries: int = 1,
             workers: int = 8) -> list[CheckResult]:
    """Probe 6443, 22623, 443 and 80 on the LB (or `server`), then /readyz through 6443.

    `port_map` dials another port for a pool's port (a tunnel, a test LB);
    rows still name the pool's real port.
    """
    host = server or str(inv.load_balancer.ip)
    mapping = port_map or {}
    targets = [Target(p, host, mapping.get(p.port, p.port)) for p in lb_pools(inv)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(lambda t: probe(t, inv, timeout=timeout, retries=retries,
                                             cluster_up=cluster_up), targets))
    api = next(t for t in targets if t.pool.port == API_PORT)
    api_row = rows[targets.index(api)]
    # /readyz only through a frontend that accepted: a port nobody listens on (or no route)
    # already has its row and its fix.
    if api_row.verdict == "pass" or (cluster_up and api_row.got.startswith("accepted")):
        rows.append(readyz(host, api.port, timeout=timeout, cluster_up=cluster_up))
    return rows


def parse_port_map(items: list[str]) -> dict[int, int]:
    """`["6443=16443", ...]` -> {6443: 16443}; UsageError names a bad item."""
    known = {API_PORT, MCS_PORT, HTTP_PORT, HTTPS_PORT}
    out: dict[int, int] = {}
    for item in items:
        text, sep, right = item.partition("=")
        left, port = natural(text), natural(right)
        if not (sep and left is not None and port is not None and 0 < port < 65536):
            raise UsageError(f"--port-map {item[:40]}: expected LB_PORT=PORT, e.g. 6443=16443")
        if left not in known:
            ports = ", ".join(str(p) for p in sorted(known))
            raise UsageError(f"--port-map {item[:40]}: {left} is not a load-balancer port ({ports})")
        out[left] = port
    return out
