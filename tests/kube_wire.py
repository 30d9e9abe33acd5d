"""What the FAKE API server (tests/fake_apiserver.py) sends besides objects: errors, discovery, tables.

Each follows the real kube-apiserver (kubernetes/kubernetes):
- errors are a metav1.Status (staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go:
  reason, code and message as NewNotFound, NewConflict, NewInvalid... word them);
- discovery is the legacy form kubectl falls back to when the server sends no
  aggregated (apidiscovery.k8s.io/v2) document: /api an APIVersions, /apis an
  APIGroupList, /api/v1 and /apis/<group>/<version> an APIResourceList naming each
  resource, its short names, its verbs and its subresources as `<plural>/<sub>`
  (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go; kubectl resolves
  `kubectl get csr` through the short names listed there);
- a list or get asked for with `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`
  (what `kubectl get` sends) answers a meta.k8s.io/v1 Table: CSRs and Nodes with the
  columns of pkg/printers/internalversion/printers.go (Name, Age, SignerName, Requestor,
  RequestedDuration, Condition; Name, Status, Roles, Age, Version), any other kind with
  the default convertor's (staging/src/k8s.io/apiserver/pkg/registry/rest/table.go:
  Name, Created At).

Tamper / send_tampered let a hostile test send raw bytes instead of any answer.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

Obj = dict[str, Any]
Tamper = Callable[[str, str], Iterable[bytes] | None]
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# Subresources beyond /status, per kind, with their verbs (the real server's discovery).
SUBRESOURCES: dict[str, list[tuple[str, list[str]]]] = {
    "CertificateSigningRequest": [("approval", ["get", "patch", "update"])],
    "Pod": [("eviction", ["create"]), ("log", ["get"])],
}
TABLE_ACCEPT = "as=Table"


class KindLike(Protocol):
    """What discovery needs of a served kind (fake_apiserver.Kind)."""

    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...
    @property
    def status_subresource(self) -> bool: ...
    @property
    def short_names(self) -> tuple[str, ...]: ...
    @property
    def api_version(self) -> str: ...


def status(code: int, reason: str, message: str) -> Obj:
    """A metav1.Status as the API server returns it for errors."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def send_tampered(handler: BaseHTTPRequestHandler, tamper: Tamper | None, method: str) -> bool:
    """Send the test's raw bytes instead of the answer, if it wants to for this request.

    `tamper(method, path)` returns the chunks (each flushed on its own, so a
    generator can drip) or None for the real answer.
    """
    chunks = tamper(method, handler.path) if tamper is not None else None
    if chunks is None:
        return False
    handler.rfile.read(int(handler.headers.get("Content-Length") or "0"))  # the request's body
    try:
        for chunk in chunks:
            handler.wfile.write(chunk)
            handler.wfile.flush()
    except OSError:
        pass
    handler.close_connection = True
    return True


def _resources(kinds: list[KindLike]) -> list[Obj]:
    out: list[Obj] = []
    for k in kinds:
        entry: Obj = {"name": k.plural, "singularName": k.kind.lower(), "namespaced": k.namespaced,
                      "kind": k.kind, "verbs": VERBS}
        if k.short_names:
            entry["shortNames"] = list(k.short_names)
        out.append(entry)
        subs = ([("status", ["get", "patch", "update"])] if k.status_subresource else [])
        for sub, verbs in subs + SUBRESOURCES.get(k.kind, []):
            entry = {"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                     "kind": k.kind, "verbs": verbs}
            if sub == "eviction":
                # Its own group and version: `kubectl drain` evicts only when they are listed, else it
                # deletes (staging/src/k8s.io/kubectl/pkg/drain/drain.go CheckEvictionSupport).
                entry.update(kind="Eviction", group="policy", version="v1")
            out.append(entry)
    return out


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority, highest first: GA, then beta, then alpha, larger numbers first
    (staging/src/k8s.io/apimachinery/pkg/version/helpers.go CompareKubeAwareVersionStrings)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (3, 0, 0)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0))


def discovery(path: str, kinds: list[KindLike]) -> Obj | None:
    """The legacy discovery document at `path` listing `kinds` (the served ones), or None."""
    groups: dict[str, list[str]] = {}
    for k in kinds:
        if k.group and k.version not in groups.setdefault(k.group, []):
            groups[k.group].append(k.version)

    def group_doc(name: str) -> Obj:
        ordered = sorted(groups[name], key=_version_priority)
        versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
        return {"name": name, "versions": versions, "preferredVersion": versions[0]}

    parts = [p for p in path.split("/") if p]
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if parts == ["api", "v1"]:
        return {"kind": "APIResourceList", "groupVersion": "v1",
                "resources": _resources([k for k in kinds if not k.group])}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_doc(g) for g in groups]}
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **group_doc(parts[1])}
    if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], []):
        gv = f"{parts[1]}/{parts[2]}"
        return {"kind": "APIResourceList", "groupVersion": gv,
                "resources": _resources([k for k in kinds if k.api_version == gv])}
    return None


def age(stamp: str | None, now: dt.datetime | None = None) -> str:
    """How long ago `stamp` was, in kubectl's words (apimachinery pkg/util/duration HumanDuration)."""
    if not stamp:
        return "<unknown>"
    then = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    secs = max(0, int(((now or dt.datetime.now(dt.UTC)) - then).total_seconds()))
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    if secs < 120:
        return f"{secs}s"
    if mins < 10:
        return f"{mins}m{secs % 60}s" if secs % 60 else f"{mins}m"
    if mins < 180:
        return f"{mins}m"
    if hours < 8:
        return f"{hours}h{mins % 60}m" if mins % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    return (f"{years}y{days % 365}d" if days % 365 else f"{years}y") if years < 8 else f"{years}y"


def _csr_row(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    condition = (",".join(c["type"] for c in st.get("conditions", [])) or "Pending") + (
        ",Issued" if st.get("certificate") else "")
    return [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp")), o["spec"]["signerName"],
            o["spec"].get("username", ""), "<none>", condition]


def _node_row(o: Obj) -> list[Any]:
    st = o.get("status") or {}
    ready = next((c.get("status") for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    status = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in (o["metadata"].get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/"))
    return [o["metadata"]["name"], status, ",".join(roles) or "<none>",
            age(o["metadata"].get("creationTimestamp")), (st.get("nodeInfo") or {}).get("kubeletVersion", "")]


def _default_row(o: Obj) -> list[Any]:
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]


# Columns per kind (pkg/printers/internalversion/printers.go AddHandlers); any other kind gets the
# default convertor's (staging/src/k8s.io/apiserver/pkg/registry/rest/table.go).
_COLUMNS: dict[str, tuple[list[tuple[str, str]], Callable[[Obj], list[Any]]]] = {
    "CertificateSigningRequest": ([("Name", "string"), ("Age", "date"), ("SignerName", "string"),
                                   ("Requestor", "string"), ("RequestedDuration", "string"),
                                   ("Condition", "string")], _csr_row),
    "Node": ([("Name", "string"), ("Status", "string"), ("Roles", "string"), ("Age", "string"),
              ("Version", "string")], _node_row),
}


def table(kind: str, items: list[Obj], rv: str) -> Obj:
    """`items` as a meta.k8s.io/v1 Table, the form `kubectl get` asks for."""
    cols, row = _COLUMNS.get(kind, ([("Name", "string"), ("Created At", "date")], _default_row))
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": [{"name": n, "type": t, "format": "", "description": "", "priority": 0}
                                  for n, t in cols],
            "rows": [{"cells": row(o),
                      "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": o["metadata"]}} for o in items]}
