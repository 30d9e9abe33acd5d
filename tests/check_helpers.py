"""Real servers on loopback for the `upi check` tests: dnsmasq, haproxy, HTTP, TCP/TLS backends."""

from __future__ import annotations

import contextlib
import datetime as dt
import resource
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import require
from realdns import serve_dns

LOOPBACK = "127.0.0.1"


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _wait_until(ready, what: str, limit: float = 10.0) -> None:
    """Poll `ready()`; a server that never comes up fails the test with `what`."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if ready():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} did not come up")


# Real dnsmasq on a loopback port: the shared helper (tests/realdns.py).
dnsmasq = serve_dns


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@contextlib.contextmanager
def http_server(root: Path) -> Iterator[int]:
    """http.server serving `root` on a loopback port (it sends Last-Modified from mtime)."""
    server = ThreadingHTTPServer((LOOPBACK, 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def tcp_backend(handler=None) -> Iterator[int]:
    """A TCP server that accepts and holds each connection open (or runs `handler(conn)`)."""
    srv = socket.socket()
    srv.bind((LOOPBACK, 0))
    srv.listen(64)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conns.append(conn)
            if handler:
                threading.Thread(target=handler, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            srv.shutdown(socket.SHUT_RDWR)  # wakes accept() (tests/relay.py says why it must)
        srv.close()
        for c in conns:
            c.close()


def self_signed(tmp: Path) -> ssl.SSLContext:
    """A server TLS context with a throwaway self-signed certificate (like the API's, untrusted)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api-fake")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(hours=1))
            .sign(key, hashes.SHA256()))
    (tmp / "api.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "api.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp / "api.crt", tmp / "api.key")
    return ctx


def readyz_handler(ctx: ssl.SSLContext, body: bytes = b"ok", status: str = "200 OK"):
    """A fake kube-apiserver /readyz over TLS: the real path, status line and body."""

    def handle(conn: socket.socket) -> None:
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                request = tls.recv(4096)
                if request.startswith(b"GET /readyz "):
                    tls.sendall(f"HTTP/1.0 {status}\r\nContent-Type: text/plain\r\n\r\n".encode() + body)
                else:
                    tls.sendall(b"HTTP/1.0 404 Not Found\r\n\r\n")
        except (OSError, ssl.SSLError):
            pass  # a TCP-only probe that hangs up before the handshake

    return handle


def tls_handler(ctx: ssl.SSLContext):
    """A TLS server that completes the handshake, then hangs up (the MCS or router, to a probe)."""

    def handle(conn: socket.socket) -> None:
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(4096)
        except (OSError, ssl.SSLError):
            pass

    return handle


def http_handler(body: bytes = b"Application is not available"):
    """The router on 80 for a host it has no route for: a real HTTP answer, 503.

    Its status line, Content-Type and title follow openshift/router
    images/router/haproxy/conf/error-page-503.http.
    """

    def handle(conn: socket.socket) -> None:
        try:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/html\r\n\r\n" + body)
            conn.close()
        except OSError:
            pass

    return handle


HAPROXY_CFG = """\
global
    stats socket {stats} level admin
defaults
    mode tcp
    retries 1
    timeout connect 1s
    timeout client 10s
    timeout server 10s
    timeout check 1s
"""


@contextlib.contextmanager
def haproxy(tmp: Path, frontends: dict[int, int], mode: str = "tcp") -> Iterator[Path]:
    """Real haproxy: each loopback frontend port -> one backend port, checked every 300 ms."""
    stats = tmp / "haproxy.stats"
    cfg = HAPROXY_CFG.format(stats=stats)
    for front, back in frontends.items():
        cfg += (f"listen p{front}\n    bind {LOOPBACK}:{front}\n    mode {mode}\n"
                f"    server s{front} {LOOPBACK}:{back} check inter 300ms fall 2 rise 1\n")
    (tmp / "haproxy.cfg").write_text(cfg)
    proc = subprocess.Popen([require("haproxy"), "-db", "-f", str(tmp / "haproxy.cfg")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until(stats.exists, "haproxy")
        yield stats
    finally:
        proc.terminate()
        proc.wait(5)


def server_states(stats: Path) -> dict[str, str]:
    """`show stat` on the admin socket: server name -> UP/DOWN."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(stats))
        s.sendall(b"show stat\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    out = {}
    for line in data.decode().splitlines():
        f = line.split(",")
        if len(f) > 17 and f[1] not in ("FRONTEND", "BACKEND", "svname"):
            out[f[1]] = f[17].split(" ")[0]
    return out


def wait_for_states(stats: Path, want: dict[str, str]) -> None:
    """Until haproxy's health checks agree with `want` (not a timed assertion: a wait)."""
    def agrees() -> bool:
        try:
            states = server_states(stats)
        except OSError:
            return False
        return all(states.get(k) == v for k, v in want.items())

    _wait_until(agrees, f"haproxy server states {want}")


# --- the rendered haproxy.cfg, as written, in a namespace that holds the LB's address ----------

SITE_STATS_DIR = "/var/lib/haproxy"  # where the rendered `stats socket` line puts its socket


@contextlib.contextmanager
def rendered_lb(tmp: Path, inventory: str = "dgxpod") -> Iterator[tuple[object, Path]]:
    """A namespace with the load balancer's IP on a bridge and no node in reach; yields (lab, render).

    Start haproxy in it with `start_rendered_haproxy`; the check then dials the
    inventory's own `load_balancer.ip` and real ports from `lab.inside(...)`.
    """
    from conftest import inventory_path, require_root
    from pxe_harness import Lab
    from typer.testing import CliRunner

    from upi.cli import app
    from upi.inventory import load_inventory

    require_root("a network namespace holding the load balancer's address")
    out = tmp / f"render-{inventory}"
    result = CliRunner().invoke(app, ["render", str(inventory_path(inventory)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    inv = load_inventory(inventory_path(inventory), check_files=False)
    address = f"{inv.load_balancer.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(tmp / f"lb-lab-{inventory}", "lb0", address) as lab:
        yield lab, out


def start_rendered_haproxy(lab, rendered: Path) -> Path:  # noqa: ANN001 - pxe_harness.Lab
    """Real haproxy on `rendered/haproxy/haproxy.cfg` unmodified; returns its stats socket.

    The file names the site's stats socket (/var/lib/haproxy/stats): a test
    directory is bind-mounted over that directory in haproxy's own mount
    namespace, so the file runs as written and the machine's directory is never
    touched (nor shared with a parallel test). The file's `maxconn 20000` needs
    about 40,000 file descriptors, more than a container's hard limit may allow;
    there `-n` (which takes precedence over `maxconn`, haproxy's management
    guide) lowers it on the command line, and nothing else changes.
    """
    here = lab.workdir / "haproxy-state"
    here.mkdir(exist_ok=True)
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", str(here), SITE_STATS_DIR,
            require("haproxy"), "-db", "-f", str(rendered / "haproxy" / "haproxy.cfg")]
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2 * 20000 + 100:
        argv[-2:-2] = ["-n", "4096"]
    proc = lab.spawn(argv, lab.workdir / "haproxy.out")
    stats = here / "stats"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"haproxy exited: {(lab.workdir / 'haproxy.out').read_text()}")
        return stats.exists()

    _wait_until(up, "haproxy")
    return stats


@contextlib.contextmanager
def node_backends(lab, tmp: Path, inventory: str = "dgxpod") -> Iterator[None]:  # noqa: ANN001
    """Every pool's server as a real server at its node's own IP and port, inside the namespace.

    6443 answers /readyz over TLS (HAProxy's health check), 22623 and 443 complete
    a TLS handshake, 80 answers HTTP: what the API, the machine config server
    and the router do.
    """
    from conftest import inventory_path

    from upi.facts import lb_pools
    from upi.facts.lb import API_PORT, HTTP_PORT
    from upi.inventory import load_inventory

    inv = load_inventory(inventory_path(inventory), check_files=False)
    ctx = self_signed(tmp)
    servers = {(s.ip, s.port) for p in lb_pools(inv) for s in p.servers}
    prefix = inv.network.machine_cidr.prefixlen
    for ip in sorted({ip for ip, _ in servers}):
        lab.ip("addr", "add", f"{ip}/{prefix}", "dev", "lb0")

    def bind_all() -> list[tuple[socket.socket, int]]:
        out = []
        for ip, port in sorted(servers):
            srv = socket.socket()
            # haproxy's `bind *:PORT` shares the port (it sets SO_REUSEPORT); the kernel
            # hands a connection to the most specific address, so the nodes' IPs reach us.
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            srv.bind((ip, port))
            srv.listen(64)
            out.append((srv, port))
        return out

    listening = lab.inside(bind_all)  # the sockets belong to the namespace; threads serve them
    handlers = {API_PORT: readyz_handler(ctx), HTTP_PORT: http_handler()}

    def serve(srv: socket.socket, handler) -> None:  # noqa: ANN001
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    for srv, port in listening:
        threading.Thread(target=serve, args=(srv, handlers.get(port, tls_handler(ctx))),
                         daemon=True).start()
    try:
        yield
    finally:
        for srv, _ in listening:
            with contextlib.suppress(OSError):
                srv.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            srv.close()
