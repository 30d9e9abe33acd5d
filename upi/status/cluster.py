"""The API's side of a node's install: its CSRs, its Ready condition, its GPUs."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from pathlib import Path
from typing import Any

# Imported with the module, not on the first CSR: upi wait imports this in its main thread
# before its helpers' threads start (imports racing in threads can meet half-built modules).
from cryptography import x509
from cryptography.x509.oid import NameOID

from upi.csr.decide import CLIENT_SIGNER, SERVING_SIGNER
from upi.digits import natural
from upi.errors import UpiError
from upi.gpu.verify import VERIFIED
from upi.inventory.model import Inventory
from upi.status.stages import Cluster, keep_first

NODE_USER = "system:node:"
GPU_RESOURCE = "nvidia.com/gpu"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_time(text: Any) -> datetime | None:
    """An ISO 8601 time with its zone (`2026-11-25T12:13:21Z`), or None.

    A time without a zone is None too: it cannot be compared with now.
    """
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def _csr_node(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(`client` or `serving`, node name) of a node CSR, else None."""
    spec = _dict(obj.get("spec"))
    signer, user = spec.get("signerName"), spec.get("username")
    if signer == SERVING_SIGNER and isinstance(user, str) and user.startswith(NODE_USER):
        return "serving", user.removeprefix(NODE_USER)
    if signer != CLIENT_SIGNER or not isinstance(spec.get("request"), str):
        return None
    try:
        req = x509.load_pem_x509_csr(base64.b64decode(spec["request"], validate=True))
        names = req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except (ValueError, binascii.Error):
        return None
    cn = names[0].value if names else ""
    if isinstance(cn, str) and cn.startswith(NODE_USER):
        return "client", cn.removeprefix(NODE_USER)
    return None


def cluster_from(inv: Inventory, csrs: list[Any], nodes: list[Any], pool: Any = None) -> Cluster:
    """What the CSR and Node lists say about the inventory's nodes (shapes not expected are skipped).

    `pool`: the GPU pool's MachineConfigPool (None: not there, or not read).
    """
    ours = {n.name: n for n in inv.nodes}
    client: dict[str, datetime | None] = {}
    serving: dict[str, datetime | None] = {}
    for obj in csrs:
        found = _csr_node(obj) if isinstance(obj, dict) else None
        if found is None or found[1] not in ours:
            continue
        when = parse_time(_dict(obj.get("metadata")).get("creationTimestamp"))
        keep_first(client if found[0] == "client" else serving, found[1], when)
    ready: dict[str, datetime | None] = {}
    gpu: dict[str, datetime | None] = {}
    for obj in nodes:
        obj = _dict(obj)
        name = _dict(obj.get("metadata")).get("name")
        if not isinstance(name, str) or name not in ours:
            continue
        status = _dict(obj.get("status"))
        conds = status.get("conditions")
        conds = conds if isinstance(conds, list) else []
        for cond in conds:
            if isinstance(cond, dict) and cond.get("type") == "Ready" and cond.get("status") == "True":
                ready[name] = parse_time(cond.get("lastTransitionTime"))
        if ours[name].gpu and (verified := _gpu_verified(obj, ours[name].gpus, name in ready)):
            gpu[name] = verified[0]
    from upi.status.pool import pool_stages

    tuned, diagnosed, notes = pool_stages(inv, [_dict(o) for o in nodes], pool)
    return Cluster(client, serving, ready, gpu, tuned, diagnosed, notes)


def _gpu_verified(obj: dict[str, Any], gpus: int | None, ready: bool) -> tuple[datetime | None] | None:
    """(when,) the node's GPUs were verified, or None.

    upi gpu's verdict on the Node: the time its validation pod passed there,
    or anything else (`failed`): not verified. Without one (GPUs set up by
    other means), a Ready node allocating its GPUs counts, at a time unknown.
    """
    annotations = _dict(_dict(obj.get("metadata")).get("annotations"))
    if VERIFIED in annotations:
        when = parse_time(annotations[VERIFIED])
        return (when,) if when is not None else None
    count = natural(str(_dict(_dict(obj.get("status")).get("allocatable")).get(GPU_RESOURCE, "0")))
    if ready and count is not None and count >= (gpus or 1):
        return (None,)
    return None


def read_cluster(inv: Inventory, kubeconfig: Path | None, *,
                 timeout: float = 10.0) -> tuple[Cluster, list[str]]:
    """CSRs and Nodes from the API, and why either could not be listed.

    Each list is read on its own: credentials that may not list CSRs (RBAC)
    or an API without them still give the Nodes. Raises UpiError when the
    API cannot be reached at all.
    """
    from upi.csr.api import Api
    from upi.csr.client import CSR_URL, NODE_URL
    from upi.csr.connect import connect

    conn = connect(kubeconfig, timeout=timeout)
    found: dict[str, list[Any]] = {}
    problems: list[str] = []
    pool: Any = None
    try:
        api = Api(conn.http)
        for url in (CSR_URL, NODE_URL):
            try:
                found[url] = api.list(url)[1]
            except UpiError as exc:
                problems.append(str(exc))
        if any(n.gpu for n in inv.nodes):
            from upi.status.pool import read_pool

            pool = read_pool(api, inv, problems)
    finally:
        conn.close()
    return (cluster_from(inv, found.get(CSR_URL, []), found.get(NODE_URL, []), pool),
            list(dict.fromkeys(problems)))
