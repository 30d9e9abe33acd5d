"""TLS and credentials for the API client, from a checked kubeconfig (upi.csr.kubeconfig.Access).

The CA is trusted from memory; a client certificate and key go through a
private temporary directory (ssl loads a chain only from files) that is gone
before the first request. Tokens from a file are re-read on a 401 (a rotated
service account token), an exec plugin is run again then; both bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import httpx2

from upi.csr.kubeconfig import Access, ExecPlugin, read_credential, usable_token
from upi.errors import UsageError
from upi.runner import run

EXEC_SECONDS = 60.0  # a credential plugin that has not answered by then is not going to
MAX_EXEC_OUTPUT = 1 << 20


def tls_context(access: Access) -> ssl.SSLContext:
    """Verified TLS: the kubeconfig's CA (else the system store) and its client certificate."""
    try:
        cadata = access.ca_pem.decode("ascii") if access.ca_pem is not None else None
        ctx = ssl.create_default_context(cadata=cadata)
    except (ssl.SSLError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise UsageError(f"{access.ca_field}: not PEM CA certificates ({_why(exc)})") from None
    if access.cert_pem is not None and access.key_pem is not None:
        with tempfile.TemporaryDirectory(prefix="upi-tls-") as private:  # mode 0700
            cert, key = Path(private, "cert.pem"), Path(private, "key.pem")
            for path, data in ((cert, access.cert_pem), (key, access.key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            try:
                ctx.load_cert_chain(cert, key)
            except (ssl.SSLError, ValueError) as exc:
                raise UsageError(f"{access.cert_field}: the client certificate and key are not a "
                                 f"PEM pair ({_why(exc)})") from None
    return ctx


def _why(exc: Exception) -> str:
    return getattr(exc, "reason", None) or str(exc)[:120] or type(exc).__name__


class _Bearer(httpx2.Auth):
    """`Authorization: Bearer`; on a 401, `refresh` (if any) gets a new token and the request goes again."""

    def __init__(self, token: str, refresh: Callable[[], str] | None) -> None:
        self.token = token
        self.refresh = refresh

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401 and self.refresh is not None:
            self.token = self.refresh()
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def bearer_token(auth: object) -> str | None:
    """The token an Auth from `credentials` sends now; None for a client certificate or basic auth.

    The GPU metrics proof hands it to the Thanos querier, which takes bearer tokens only.
    """
    return (auth.token or None) if isinstance(auth, _Bearer) else None


def credentials(access: Access) -> httpx2.Auth | None:
    """The Auth for the kubeconfig's user: a token (file), an exec plugin, basic auth, or none."""
    if access.token_file is not None:
        path, where = access.token_file, f"{access.where}: tokenFile"
        return _Bearer(access.token or "",
                       lambda: usable_token(read_credential(None, None, where, path), where))
    if access.token is not None:
        return _Bearer(access.token, None)
    if access.exec_plugin is not None:
        plugin = access.exec_plugin
        return _Bearer(exec_token(plugin), lambda: exec_token(plugin))
    if access.basic is not None:
        return httpx2.BasicAuth(*access.basic)
    return None


def exec_token(plugin: ExecPlugin) -> str:
    """Run a credential plugin (bounded, no terminal) and take the token of its ExecCredential.

    client-go's contract (k8s.io/client-go/plugin/pkg/client/auth/exec): the
    plugin reads KUBERNETES_EXEC_INFO, prints an ExecCredential whose
    status.token is the bearer token. Certificates from a plugin are not taken.
    """
    if plugin.api_version not in ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"):
        raise UsageError(f"{plugin.field}.apiVersion: {plugin.api_version[:80]!r} is not "
                         "client.authentication.k8s.io/v1 or v1beta1")
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env = {**os.environ, **plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    result = run(list(plugin.argv), timeout=EXEC_SECONDS, env=env, input_text="")
    doc: Any = None
    with contextlib.suppress(ValueError, RecursionError):  # not JSON: the message below says so
        doc = json.loads(result.stdout[:MAX_EXEC_OUTPUT])
    status = doc.get("status") if isinstance(doc, dict) else None
    token = status.get("token") if isinstance(status, dict) else None
    if not isinstance(token, str):
        raise UsageError(f"{plugin.field}: {plugin.argv[0]} printed no ExecCredential with a "
                         "status.token (client certificates from a plugin are not supported)")
    return usable_token(token.encode(), f"{plugin.field}: the token {plugin.argv[0]} printed")
