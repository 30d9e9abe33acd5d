"""Helpers for the `upi wait` tests: an installed assets dir, a scripted FAKE installer, the CLI call,
and a machine config server's /healthz (TLS, signed by the cluster's root CA).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from certs import Issued, TlsHttpServer, issue
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from fake_apiserver import FakeApiServer

from upi.cli import app


def make_assets(runner, inventory: Path, root: Path) -> Path:
    """`upi ignition` with the fake installer, as a user runs it before `upi wait`."""
    assets = root / "assets"
    result = runner.invoke(app, ["ignition", str(inventory), "--dir", str(assets),
                                 "-o", str(root / "ign-out")])
    assert result.exit_code == 0, result.output
    return assets


def script(monkeypatch: pytest.MonkeyPatch, root: Path, **outcomes: list[str]) -> Path:
    """Outcomes of the fake's wait-for runs: {"bootstrap_complete": ["api-timeout", "ok"], ...}."""
    plan = root / "wait-plan.json"
    plan.write_text(json.dumps({k.replace("_", "-"): v for k, v in outcomes.items()}))
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_WAIT", str(plan))
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_RELEASE", str(root / "release"))
    return plan


def wait_args(inventory: Path, assets: Path, kube: FakeApiServer, *extra: str) -> list[str]:
    """`upi wait` with a fast retry and the fake API server's kubeconfig."""
    return ["wait", str(inventory), "--dir", str(assets), "--kubeconfig", str(kube.kubeconfig),
            "--retry-pause", "0", *extra]


def installer_log(assets: Path) -> str:
    """What the fake installer wrote to ASSETS/.openshift_install.log."""
    return (assets / ".openshift_install.log").read_text()


def state(assets: Path) -> set[str]:
    """Stages recorded in ASSETS/.upi-wait.json."""
    path = assets / ".upi-wait.json"
    return set(json.loads(path.read_text())["done"]) if path.exists() else set()


def cluster_ca(assets: Path) -> Issued:
    """The root CA the FAKE installer made for ASSETS: cert and key, from its state file (as the real one)."""
    kept = json.loads((assets / ".openshift_install_state.json").read_text())["*tls.RootCA"]
    cert_pem, key_pem = base64.b64decode(kept["CertRaw"]), base64.b64decode(kept["KeyRaw"])
    key = serialization.load_pem_private_key(key_pem, password=None)
    return Issued(key, x509.load_pem_x509_certificate(cert_pem), cert_pem, key_pem)  # type: ignore[arg-type]


class _Healthz(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.probes.append(self.path)
        code = 404 if self.path != "/healthz" else 200 if self.server.up.is_set() else 503
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()


class FakeMcs:
    """A machine config server's /healthz over TLS on loopback, its api-int certificate signed by `ca`.

    `probes` lists every path asked for (what upi's probe did). Until `up` is set, /healthz
    answers 503, as the MCS behind HAProxy does before any backend serves it.
    """

    def __init__(self, work: Path, ca: Issued, domain: str, *, up: bool = True,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        leaf = issue(ca, f"api-int.{domain}", server=True, dns=(f"api-int.{domain}",))
        work.mkdir(parents=True, exist_ok=True)
        (work / "mcs.crt").write_bytes(leaf.cert_pem)
        (work / "mcs.key").write_bytes(leaf.key_pem)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(work / "mcs.crt", work / "mcs.key")
        self.httpd = TlsHttpServer((host, port), _Healthz)
        self.httpd.daemon_threads = True
        # The TLS handshake runs in each connection's thread (its first read), not in accept():
        # a client that connects and never speaks cannot stall the accept loop, nor shutdown().
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                               do_handshake_on_connect=False)
        self.httpd.probes = []  # type: ignore[attr-defined]
        self.up = self.httpd.up = threading.Event()  # type: ignore[attr-defined]
        if up:
            self.up.set()
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def probes(self) -> list[str]:
        return list(self.httpd.probes)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
