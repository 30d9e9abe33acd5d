"""Which kubeconfig approve-csr uses, and verified TLS clients built from it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upi.errors import ClusterError, UsageError

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

    http: Any  # httpx2.Client built by lightkube from the kubeconfig: its TLS and credentials
    server: str

    def close(self) -> None:
        """Release the connection pool."""
        self.http.close()


def _config(kubeconfig: Path | None) -> Any:
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.core.exceptions import ConfigError

    try:
        if kubeconfig is None:
            return KubeConfig.from_service_account(SERVICE_ACCOUNT).get()
        return KubeConfig.from_file(kubeconfig).get()
    except (ConfigError, OSError, KeyError, TypeError, ValueError) as exc:
        where = kubeconfig or "the pod's service account"
        raise UsageError(f"{where}: cannot use this kubeconfig: {exc}") from None


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
    """Clients for the kubeconfig's current context; TLS is always verified."""
    import httpx2
    from lightkube.config.client_adapter import Client as http_client
    from lightkube.config.client_adapter import ConnectionParams

    config = _config(kubeconfig)
    where = kubeconfig or "the pod's service account"
    server = str(config.cluster.server)
    if config.cluster.insecure:
        raise UsageError(f"{where}: insecure-skip-tls-verify is set; upi approves certificates "
                         "only over a verified connection")
    if not server.startswith("https://"):
        from upi.redact import hide_userinfo

        raise UsageError(f"{where}: server {hide_userinfo(server)[:200]!r} is not https://")
    _check_server(server, where)
    try:
        http = http_client(config, ConnectionParams(timeout=httpx2.Timeout(timeout)))
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: bad CA or key data
        raise ClusterError(f"{where}: cannot set up TLS: {exc}") from None
    return Connection(http, server)
