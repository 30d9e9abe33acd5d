"""A real registry (Debian's docker-registry, distribution 2.8) on loopback, and a small pusher.

The registry serves TLS with a certificate from a test CA (tests/certs.py)
and asks for htpasswd (bcrypt) credentials, as a site's mirror registry
does. `push` uploads a tiny image through the registry v2 API the way a
client pushes (distribution's docs/spec/api.md: POST an upload, PUT it with
its digest, PUT the manifest), in the OCI or the Docker manifest format.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import http.client
import json
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import bcrypt
from certs import Issued, issue
from check_helpers import LOOPBACK, free_port
from conftest import require
from tokenserver import TokenServer

CONFIG = """\
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: {host}:{port}
  secret: upi-test-secret
  tls:
    certificate: {work}/server.pem
    key: {work}/server.key
auth:
{auth}
"""
HTPASSWD = """\
  htpasswd:
    realm: upi-test-registry
    path: {work}/htpasswd"""
# distribution v2.8 registry/auth/token/accesscontroller.go: the four options it requires.
TOKEN = """\
  token:
    realm: {realm}
    service: upi-test-registry
    issuer: upi-test-issuer
    rootcertbundle: {work}/token-signer.pem"""
# Media types (opencontainers/image-spec media-types.md; distribution's manifest/schema2).
FORMATS = {
    "oci": ("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.image.layer.v1.tar+gzip"),
    "docker": ("application/vnd.docker.distribution.manifest.v2+json",
               "application/vnd.docker.container.image.v1+json",
               "application/vnd.docker.image.rootfs.diff.tar.gzip"),
}


@dataclass(frozen=True)
class RunningRegistry:
    """Where the registry listens and how to push to it."""

    host: str  # 127.0.0.1:PORT
    user: str
    password: str
    ca: Issued

    def _ctx(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.load_verify_locations(cadata=self.ca.cert_pem.decode())
        return ctx

    def _call(self, method: str, url: str, body: bytes = b"",
              headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        parts = urlsplit(url if "://" in url else f"https://{self.host}{url}")
        conn = http.client.HTTPSConnection(parts.hostname or LOOPBACK, parts.port, timeout=10,
                                           context=self._ctx())
        auth = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=body, headers={"Authorization": f"Basic {auth}", **(headers or {})})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp

    def _blob(self, repository: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = self._call("POST", f"/v2/{repository}/blobs/uploads/")
        assert start.status == 202, start.status
        location = start.getheader("Location") or ""
        sep = "&" if "?" in location else "?"
        done = self._call("PUT", f"{location}{sep}digest={digest}", data,
                          {"Content-Type": "application/octet-stream"})
        assert done.status == 201, done.status
        return digest

    def push(self, repository: str, tag: str, fmt: str = "oci", payload: bytes = b"") -> str:
        """Push a one-layer image as repository:tag; returns its manifest digest."""
        manifest_type, config_type, layer_type = FORMATS[fmt]
        config = json.dumps({"architecture": "amd64", "os": "linux",
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        layer = gzip.compress(payload or repository.encode(), mtime=0)
        blobs = [{"mediaType": kind, "digest": self._blob(repository, data), "size": len(data)}
                 for kind, data in ((config_type, config), (layer_type, layer))]
        manifest = json.dumps({"schemaVersion": 2, "mediaType": manifest_type,
                               "config": blobs[0], "layers": blobs[1:]}).encode()
        resp = self._call("PUT", f"/v2/{repository}/manifests/{tag}", manifest,
                          {"Content-Type": manifest_type})
        assert resp.status == 201, resp.status
        return "sha256:" + hashlib.sha256(manifest).hexdigest()


@contextlib.contextmanager
def registry(work: Path, ca: Issued, *, user: str = "mirror-user",
             password: str = "mirror-password-1",  # noqa: S107 - a throwaway test registry's
             storage: Path | None = None, token: TokenServer | None = None) -> Iterator[RunningRegistry]:
    """docker-registry on a free loopback port until the block ends.

    `storage`: another registry's storage directory (to serve what was pushed there);
    `token`: ask for Bearer tokens from that token server instead of htpasswd.
    """
    program = require("docker-registry")
    work.mkdir(parents=True, exist_ok=True)
    cert = issue(ca, "registry", server=True)
    (work / "server.pem").write_bytes(cert.cert_pem)
    (work / "server.key").write_bytes(cert.key_pem)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    (work / "htpasswd").write_text(f"{user}:{hashed}\n")
    for _ in range(5):
        port = free_port()
        config = work / "config.yml"
        auth = (TOKEN.format(realm=token.realm, work=work) if token else HTPASSWD.format(work=work))
        if token:
            (work / "token-signer.pem").write_bytes(token.signer.cert_pem)
        config.write_text(CONFIG.format(root=storage or work / "storage", host=LOOPBACK, port=port,
                                        work=work, auth=auth))
        proc = subprocess.Popen([program, "serve", str(config)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        running = RunningRegistry(f"{LOOPBACK}:{port}", user, password, ca)
        end = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < end:
            with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException):
                if running._call("GET", "/v2/").status in ((401,) if token else (200,)):
                    break
            time.sleep(0.05)
        else:
            err = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
            if "address already in use" in err:
                continue
            proc.kill()
            proc.wait(5)
            raise AssertionError(f"docker-registry did not start: {err}")
        break
    else:
        raise AssertionError("docker-registry found no free port")
    try:
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=10)
