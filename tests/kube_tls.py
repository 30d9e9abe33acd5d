"""TLS for the fake API server: a self-made CA, client-certificate auth, an admin kubeconfig."""

from __future__ import annotations

import base64
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from certs import TlsHttpServer, issue, make_ca


def _kubeconfig(url: str, ca_pem: bytes, admin: Any) -> dict[str, Any]:
    """The shape of openshift-install's auth/kubeconfig: embedded CA and admin client cert."""
    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake", "cluster": {"server": url,
                                                      "certificate-authority-data": b64(ca_pem)}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": b64(admin.cert_pem),
                                                 "client-key-data": b64(admin.key_pem)}}],
            "contexts": [{"name": "admin", "context": {"cluster": "fake", "user": "admin"}}],
            "current-context": "admin"}


def serve_tls(workdir: Path, handler: type[BaseHTTPRequestHandler], owner: Any, *,
              verify: ssl.VerifyMode = ssl.CERT_OPTIONAL) -> tuple[ThreadingHTTPServer, str, Path, bytes]:
    """(server, URL, kubeconfig path, CA PEM): a loopback HTTPS server whose handler sees `owner` as `.fake`.

    The kubeconfig has the shape of openshift-install's auth/kubeconfig: embedded CA and
    an admin client certificate (system:masters).
    """
    ca = make_ca("kube-apiserver-fake-ca")
    server = issue(ca, "127.0.0.1", server=True)
    client_ca = make_ca("admin-kubeconfig-signer")
    admin = issue(client_ca, "system:admin", org="system:masters")
    workdir.mkdir(parents=True, exist_ok=True)
    for name, pem in [("server.crt", server.cert_pem + ca.cert_pem), ("server.key", server.key_pem),
                      ("client-ca.crt", client_ca.cert_pem)]:
        (workdir / name).write_bytes(pem)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(workdir / "server.crt", workdir / "server.key")
    ctx.load_verify_locations(workdir / "client-ca.crt")
    ctx.verify_mode = verify
    httpd = TlsHttpServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    # The TLS handshake runs in each connection's thread (its first read), not in accept():
    # a client that connects and never speaks cannot stall the accept loop, nor shutdown().
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    httpd.fake = owner  # type: ignore[attr-defined]
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    kubeconfig = workdir / "auth" / "kubeconfig"
    kubeconfig.parent.mkdir(exist_ok=True)
    kubeconfig.write_text(yaml.safe_dump(_kubeconfig(url, ca.cert_pem, admin)))
    return httpd, url, kubeconfig, ca.cert_pem
