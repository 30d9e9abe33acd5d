"""A BMC that cannot be reached is named with the cause in the system's words, not requests' internals.

Real failures on this host: a loopback port nobody listens on (refused), an
address with no route, a name that does not resolve, a server whose
certificate no configured CA signed, a plain-HTTP server where TLS was
expected. Each is one line: the node, its BMC, the errno text or the TLS
reason, what upi was doing; never "HTTPSConnectionPool(host=...): Max
retries exceeded ... (Caused by NewConnectionError(<... object at 0x...>".
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from redfish_support import AmiFake, Tls, free_port, inventory_with_bmcs, make_tls, write_credentials
from typer.testing import CliRunner

from upi.cli import app

INTERNALS = ("ConnectionPool", "Max retries", "Caused by", "NewConnectionError", "object at 0x",
             "urllib3", "SSLError(", "Errno")


def _power_status(runner: CliRunner, example_dir: Path, tls: Tls, address: str, **bmc: Any) -> Any:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": address, "credentials_file": creds.name, "verify_tls": str(tls.ca_file),
        "timeout": 3.0, **bmc}})
    res = runner.invoke(app, ["power", str(inv), "status"])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    for word in INTERNALS:
        assert word not in res.stderr, f"{word!r} in {res.stderr}"
    return res


def _errno_text(host: str, port: int) -> str | None:
    """What connecting to (host, port) says here: the errno text, or None when it only times out."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(3)
        try:
            s.connect((host, port))
        except TimeoutError:
            return None
        except OSError as exc:
            return exc.strerror
    return "connected"


def test_a_refused_connection_says_connection_refused(runner: CliRunner, example_dir: Path,
                                                      tls: Tls) -> None:
    port = free_port()
    res = _power_status(runner, example_dir, tls, f"https://127.0.0.1:{port}")
    assert (f"worker-0 (BMC https://127.0.0.1:{port}): cannot connect (Connection refused) while "
            "reading the service root") in res.stderr, res.stderr


def test_an_unreachable_network_says_so(runner: CliRunner, example_dir: Path, tls: Tls) -> None:
    # Linux refuses a TCP connect to a multicast address at once: ENETUNREACH (tcp_v4_connect).
    want = _errno_text("224.0.0.1", 443)
    assert want == "Network is unreachable", want
    res = _power_status(runner, example_dir, tls, "https://224.0.0.1")
    assert ("worker-0 (BMC https://224.0.0.1): cannot connect (Network is unreachable) while reading "
            "the service root") in res.stderr, res.stderr


def test_an_address_without_a_route_says_why_or_times_out(runner: CliRunner, example_dir: Path,
                                                          tls: Tls) -> None:
    # 2001:db8::/32 is for documentation (RFC 3849), never routed: the kernel answers "No route to
    # host" or "Network is unreachable", or the connect times out, depending on this host's routes.
    res = _power_status(runner, example_dir, tls, "https://[2001:db8::1]")
    where = "worker-0 (BMC https://[2001:db8::1]): "
    assert any(f"{where}{m}" in res.stderr for m in (
        "cannot connect (No route to host)", "cannot connect (Network is unreachable)",
        "no answer within 3 s")), res.stderr


def test_a_name_that_does_not_resolve_says_so(runner: CliRunner, example_dir: Path, tls: Tls) -> None:
    try:  # .invalid never resolves (RFC 6761); the resolver's words are the message
        socket.getaddrinfo("bmc-0.invalid", 443)
        pytest.fail("bmc-0.invalid resolved")
    except socket.gaierror as exc:
        want = exc.strerror
    res = _power_status(runner, example_dir, tls, "https://bmc-0.invalid")
    assert f"worker-0 (BMC https://bmc-0.invalid): cannot connect ({want}) while" in res.stderr, res.stderr


def test_a_certificate_from_another_ca_fails_verification_naming_the_reason(
        runner: CliRunner, example_dir: Path, tls: Tls, tmp_path: Path) -> None:
    other = make_tls(tmp_path / "other", "other")
    fake = AmiFake(other)  # its certificate is signed by a CA the inventory does not name
    try:
        res = _power_status(runner, example_dir, tls, fake.url)
    finally:
        fake.stop()
    assert (f"worker-0 (BMC {fake.url}): TLS verification failed (unable to get local issuer "
            "certificate) while reading the service root; give its CA file as bmc.verify_tls"
            in res.stderr), res.stderr
    assert fake.state.seen == []


class _Plain(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[str]:
    """A plain-HTTP server: what answers when a BMC address names the wrong port or scheme."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_tls_to_a_plain_http_server_is_a_handshake_failure_not_a_verification_one(
        runner: CliRunner, example_dir: Path, tls: Tls, plain_http: str) -> None:
    res = _power_status(runner, example_dir, tls, plain_http)
    assert f"worker-0 (BMC {plain_http}): TLS handshake failed (" in res.stderr, res.stderr
    assert "is it an https:// Redfish service on that port?" in res.stderr
    assert "verification" not in res.stderr and "verify_tls" not in res.stderr
