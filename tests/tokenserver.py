"""A token server for docker-registry's token auth: Basic credentials in, a signed JWT out.

Follows the registry's side of distribution v2.8 (docs/spec/auth/token.md,
registry/auth/token/token.go): the client GETs the realm with `service` and
`scope`; the answer is JSON with `token`. The registry verifies the JWT's
`iss`, `aud` (the service), `exp`/`nbf`, its ES256 signature (r||s) by the
key of the first `x5c` certificate, which must chain to `rootcertbundle`,
and grants the `access` list. This server grants pull on the scope asked,
to the one user it knows, and records every request it got.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from certs import Issued, TlsHttpServer, issue, make_ca
from check_helpers import LOOPBACK
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenServer:
    """Where the realm is, the key tokens are signed with, and the requests seen."""

    realm: str
    signer: Issued
    requests: list[dict[str, str]] = field(default_factory=list)


def _jwt(signer: Issued, service: str, scope: str, user: str) -> str:
    der = signer.cert.public_bytes(serialization.Encoding.DER)
    header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
    kind, name, actions = scope.split(":", 2)
    now = int(time.time())
    claims = {"iss": "upi-test-issuer", "sub": user, "aud": service, "exp": now + 300, "nbf": now - 10,
              "iat": now, "jti": f"t{now}", "access": [{"type": kind, "name": name,
                                                       "actions": actions.split(",")}]}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    assert isinstance(signer.key, ec.EllipticCurvePrivateKey)  # noqa: S101 - make_ca makes P-256 keys
    r, s = decode_dss_signature(signer.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@contextlib.contextmanager
def token_server(work: Path, ca: Issued, user: str, password: str) -> Iterator[TokenServer]:
    """An HTTPS token server on a free loopback port (its certificate from `ca`)."""
    work.mkdir(parents=True, exist_ok=True)
    signer = make_ca("upi test token signer")
    cert = issue(ca, "token server", server=True)
    (work / "token.pem").write_bytes(cert.cert_pem)
    (work / "token.key").write_bytes(cert.key_pem)
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            seen.append({**query, "authorised": str(self.headers.get("Authorization") == expected)})
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": _jwt(signer, query.get("service", ""), query.get("scope", ""),
                                             user)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = TlsHttpServer((LOOPBACK, 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(work / "token.pem", work / "token.key")
    # The TLS handshake runs in each connection's thread (its first read), not in accept():
    # a client that connects and never speaks cannot stall the accept loop, nor shutdown().
    server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield TokenServer(f"https://{LOOPBACK}:{server.server_address[1]}/token", signer, seen)
    finally:
        server.shutdown()
        server.server_close()
