"""`upi check lb`: the load balancer listens on every pool's port and forwards.

HAProxy in `mode tcp` accepts a client first and only then picks a server;
when no server of the pool is usable it closes the connection at once. So a
connection that stays open (or gets data) reached a backend, and one closed
without a byte did not. Before the nodes boot no pool has a live server: that
is a warning, and a failure with `cluster_up`.
"""

from __future__ import annotations

import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from upi.check.report import CheckResult, Verdict
from upi.digits import natural
from upi.errors import UsageError
from upi.facts import Pool, lb_pools
from upi.facts.lb import API_PORT, HTTP_PORT, HTTPS_PORT, MCS_PORT
from upi.inventory import Inventory

AREA = "lb"


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


def _connect(host: str, port: int, timeout: float, retries: int) -> socket.socket | str:
    """A connected socket, or why not (after `retries` more tries)."""
    why = ""
    for _ in range(retries + 1):
        try:
            return socket.create_connection((host, port), timeout=timeout)
        except ConnectionRefusedError:
            return "connection refused"  # a definite answer: no retry
        except OSError as exc:
            why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
    return why


def _forwards(sock: socket.socket, settle: float) -> bool:
    """Whether the connection stays open (or gets data) for `settle` seconds."""
    sock.settimeout(settle)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True  # the backend waits for us to speak first (TLS, HTTP)
    except OSError:
        return False  # reset by the load balancer
    finally:
        sock.close()


def probe(t: Target, *, timeout: float, retries: int, settle: float, cluster_up: bool) -> CheckResult:
    """Connect to one frontend and see whether it reaches a server of its pool."""
    servers = ", ".join(f"{s.name} {s.ip}" for s in t.pool.servers) or "no servers"
    conn = _connect(t.host, t.port, timeout, retries)
    if isinstance(conn, str):
        return CheckResult(AREA, t.label, "accepts and forwards", conn, "fail",
                           f"nothing accepts on {t.host}:{t.port}: start haproxy with "
                           "haproxy/haproxy.cfg and open the port in the firewall")
    if _forwards(conn, settle):
        return CheckResult(AREA, t.label, "accepts and forwards", "forwards", "pass")
    verdict: Verdict = "fail" if cluster_up else "warn"
    later = "" if cluster_up else " (expected until those nodes boot)"
    return CheckResult(AREA, t.label, "accepts and forwards", "accepted, then closed", verdict,
                       f"{t.host}:{t.port} accepts but no server of {t.pool.name} answers "
                       f"({servers}){later}")


def readyz(host: str, port: int, *, timeout: float, cluster_up: bool) -> CheckResult:
    """`GET /readyz` over TLS through the API frontend, as HAProxy's own health check does."""
    label = f"GET https://{host}:{API_PORT}/readyz" + ("" if port == API_PORT else f" via {port}")
    # The API's certificate is signed by the cluster's own CA, which no one has
    # before the install; HAProxy's health check uses `verify none` too.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as tls:
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
             settle: float = 1.0, workers: int = 8) -> list[CheckResult]:
    """Probe 6443, 22623, 443 and 80 on the LB (or `server`), then /readyz through 6443.

    `port_map` dials another port for a pool's port (a tunnel, a test LB);
    rows still name the pool's real port.
    """
    host = server or str(inv.load_balancer.ip)
    mapping = port_map or {}
    targets = [Target(p, host, mapping.get(p.port, p.port)) for p in lb_pools(inv)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(lambda t: probe(t, timeout=timeout, retries=retries, settle=settle,
                                             cluster_up=cluster_up), targets))
    api = next(t for t in targets if t.pool.port == API_PORT)
    api_row = rows[targets.index(api)]
    if cluster_up or api_row.verdict == "pass":
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
