"""What day 2 reads from the cluster: installed or not, its Nodes, the worker ignition it serves.

Facts (reference openshift-upi.md, gpu-day2.md): ClusterVersion `version`
has condition Available=True once the install completed; the MCO keeps the
worker pointer ignition in secret openshift-machine-api/worker-user-data-managed,
key userData: an Ignition config whose ignition.config.merge[0].source is the
machine config server through the load balancer
(https://api-int.<cluster domain>:22623/config/worker) and whose
ignition.security.tls.certificateAuthorities[0].source is the root CA as a
data: URL.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from upi.errors import ClusterError
from upi.gpu.kube import Kube

# Where the worker ignition is kept: names of a Secret object, no secret values (S105 is wrong here).
SECRET_NS = "openshift-machine-api"  # noqa: S105
SECRET_NAME = "worker-user-data-managed"  # noqa: S105
SECRET_KEY = "userData"  # noqa: S105
MCS_PORT = 22623


def cluster_installed(kube: Kube) -> None:
    """ClusterError unless ClusterVersion `version` is Available=True (the install completed)."""
    cv = kube.get("config.openshift.io/v1", "ClusterVersion", "version")
    if cv is None:
        raise ClusterError("the cluster has no ClusterVersion 'version': it is not an installed "
                           "OpenShift cluster; finish day 1 with `upi wait` first")
    conds = (cv.get("status") or {}).get("conditions") or []
    available = [c for c in conds if isinstance(c, dict) and c.get("type") == "Available"]
    if not available or available[0].get("status") != "True":
        why = (available[0].get("message") if available else None) or "no Available condition"
        raise ClusterError(f"the cluster is not installed yet (ClusterVersion Available is not True: "
                           f"{str(why)[:200]}); finish day 1 with `upi wait` first")


def node_states(kube: Kube) -> dict[str, bool]:
    """Every Node by name, and whether its Ready condition is True."""
    out = {}
    for node in kube.find("v1", "Node"):
        name = (node.get("metadata") or {}).get("name")
        conds = (node.get("status") or {}).get("conditions") or []
        ready = any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                    for c in conds)
        if isinstance(name, str):
            out[name] = ready
    return out


def mcs_url(domain: str) -> str:
    """Where a worker's pointer ignition must point: the MCS through the load balancer."""
    return f"https://api-int.{domain}:{MCS_PORT}/config/worker"


def worker_ignition(kube: Kube, domain: str) -> bytes:
    """The worker pointer ignition the cluster serves now, checked (ClusterError saying what is wrong)."""
    where = f"secret {SECRET_NS}/{SECRET_NAME}"
    secret = kube.get("v1", "Secret", SECRET_NAME, SECRET_NS)
    if secret is None:
        raise ClusterError(f"{where} does not exist: the machine-config operator keeps the worker "
                           "ignition there; is the cluster's machine-api healthy?")
    value = (secret.get("data") or {}).get(SECRET_KEY)
    if not isinstance(value, str):
        raise ClusterError(f"{where} has no key {SECRET_KEY}")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ClusterError(f"{where}: {SECRET_KEY} is not base64") from None
    check_pointer(raw, domain, where)
    return raw


def check_pointer(raw: bytes, domain: str, where: str) -> None:
    """`raw` is a pointer config to the cluster's MCS whose root CA parses; else ClusterError."""
    from cryptography import x509

    try:
        doc = json.loads(raw)
        ign: Any = doc["ignition"]
        sources = [m.get("source") for m in ign["config"]["merge"]]
        cas = [c.get("source") for c in ign["security"]["tls"]["certificateAuthorities"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ClusterError(f"{where}: not a pointer Ignition config (no ignition.config.merge and "
                           "ignition.security.tls.certificateAuthorities)") from None
    want = mcs_url(domain)
    if sources != [want]:
        raise ClusterError(f"{where}: the config points at {', '.join(map(str, sources)) or 'nothing'}, "
                           f"not at the machine config server {want}")
    if len(cas) != 1 or not isinstance(cas[0], str) or not cas[0].startswith("data:"):
        raise ClusterError(f"{where}: the root CA is not one data: URL")
    meta, _, payload = cas[0].partition(",")
    try:
        pem = base64.b64decode(payload) if meta.endswith(";base64") else unquote_to_bytes(payload)
        x509.load_pem_x509_certificates(pem)
    except (ValueError, binascii.Error):
        raise ClusterError(f"{where}: the root CA does not parse as a PEM certificate") from None
