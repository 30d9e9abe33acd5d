"""Which kubeconfig approve-csr uses, and verified TLS clients built from it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upi.csr.kubeconfig import in_cluster, load_kubeconfig
from upi.errors import UsageError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def find_kubeconfig(explicit: Path | None, assets: Path | None = None) -> Path | None:
    """--kubeconfig, else KUBECONFIG, else ASSETS/auth/kubeconfig; None means in-cluster.

    Raises UsageError when none applies and the process is not in a pod.
    """
    if explicit is not None:
        return explicit
    env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if env:
        return next((Path(p) for p in env if Path(p).is_file()), Path(env[0]))
    if assets is not None:
        return assets / "auth" / "kubeconfig"
    if os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT / "token").is_file():
        return None
    raise UsageError("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or pass --dir with the "
                     "installer's asset directory (it holds auth/kubeconfig)")


@dataclass
class Connection:
    """The HTTP client every API request goes through (upi.csr.api.Api bounds what it reads)."""

    http: Any  # httpx2.Client: the kubeconfig's TLS and credentials, over upi.csr.deadline's transport
    server: str

    def close(self) -> None:
        """Release the connection pool."""
        self.http.close()


def _check_server(server: str, where: object) -> None:
    """A kubeconfig's server URL must parse (`https://[::1`, `https://h:x` would crash the client)."""
    import httpx2

    try:
        url = httpx2.URL(server)
        port = url.port
    except httpx2.InvalidURL as exc:
        reason = str(exc)
    else:
        if not url.host or "%" in url.host:  # '%': a space or the like, percent-encoded
            reason = "no usable host name"
        elif port is not None and not 0 < port < 65536:
            reason = f"port {port} is not 1-65535"
        else:
            return
    from upi.redact import hide_userinfo

    raise UsageError(f"{where}: server {hide_userinfo(server)[:200]!r} is not a URL upi can use "
                     f"({hide_userinfo(reason)})")


def connect(kubeconfig: Path | None, *, timeout: float = 10.0) -> Connection:
    """A client for the kubeconfig's current context (None: the pod's service account).

    TLS is always verified; every request through it ends by the deadline
    upi.csr.api sets (upi.csr.deadline). An unusable kubeconfig is a
    UsageError naming the file and the field, whichever command reads it.
    """
    import httpx2

    from upi.csr.credentials import credentials, tls_context
    from upi.csr.deadline import BoundedTransport

    access = load_kubeconfig(kubeconfig) if kubeconfig is not None else in_cluster(SERVICE_ACCOUNT)
    where, server = access.where, access.server
    if access.insecure:
        raise UsageError(f"{where}: insecure-skip-tls-verify is set; upi approves certificates "
                         "only over a verified connection")
    if not server.startswith("https://"):
        from upi.redact import hide_userinfo

        raise UsageError(f"{where}: server {hide_userinfo(server)[:200]!r} is not https://")
    _check_server(server, where)
    auth = credentials(access)
    http = httpx2.Client(base_url=server, auth=auth, timeout=httpx2.Timeout(timeout),
                         transport=BoundedTransport(tls_context(access)), trust_env=False)
    return Connection(http, server)
