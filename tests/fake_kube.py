"""A FAKE Kubernetes API server for CSR tests: the real protocol, a tiny store.

No kube-apiserver can run here (reference csr.md), so this speaks what the
approver and kubectl use, as the real server does: TLS with a self-made CA,
client-certificate authentication from a kubeconfig shaped like the one
openshift-install writes (auth/kubeconfig), legacy discovery, list with a
resourceVersion, watch as chunked JSON events, the /approval subresource with
409 on a stale resourceVersion, Table output for `kubectl get`, and Nodes.
Tests add CSRs and Nodes in-process (add_csr, add_node).

For day 2 it also serves an installed cluster's objects, read with GET:
ClusterVersion `version` at /apis/config.openshift.io/v1/clusterversions/version
with status.conditions[type=Available] (OpenShift docs, "ClusterVersion
[config.openshift.io/v1]", and `oc get clusterversion`'s AVAILABLE column),
and Secrets at /api/v1/namespaces/<ns>/secrets/<name> with base64 `data`
(Kubernetes API reference, Secret v1 core); a missing one is a 404 Status.
Draining a node (kubernetes.io docs, "API-initiated Eviction" and "Safely
Drain a Node"): Pods listed across namespaces with fieldSelector
spec.nodeName=<node>; POST .../pods/<name>/eviction with a policy/v1 Eviction
answers 429 TooManyRequests while a PodDisruptionBudget whose selector
matches the pod allows no disruption, else deletes the pod (201); Nodes take
a merge PATCH (spec.unschedulable, as `kubectl cordon`) and DELETE.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kube_proto import decode_csr_approval
from kube_tls import serve_tls

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODE_PATH = "/api/v1/nodes"
CLUSTER_VERSION_PATH = "/apis/config.openshift.io/v1/clusterversions/version"
CSR_RESOURCES = [
    {"name": "certificatesigningrequests", "singularName": "certificatesigningrequest",
     "namespaced": False, "kind": "CertificateSigningRequest", "shortNames": ["csr"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"name": "certificatesigningrequests/approval", "singularName": "", "namespaced": False,
     "kind": "CertificateSigningRequest", "verbs": ["get", "patch", "update"]},
]
CORE_RESOURCES = [{"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
                   "shortNames": ["no"], "verbs": ["get", "list", "watch"]}]
DISCOVERY: dict[str, Any] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": "certificates.k8s.io",
        "versions": [{"groupVersion": "certificates.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "certificates.k8s.io/v1", "version": "v1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": CORE_RESOURCES},
    "/apis/certificates.k8s.io/v1": {"kind": "APIResourceList",
                                     "groupVersion": "certificates.k8s.io/v1",
                                     "resources": CSR_RESOURCES},
}


Tamper = Callable[[str, str], Iterable[bytes] | None]


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


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1.Status as the API server returns it for errors."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class FakeKube:
    """The store and the server; `kubeconfig` is the admin kubeconfig to use."""

    def __init__(self, workdir: Path) -> None:
        self.lock = threading.Condition()
        self.rv = 1
        self.csrs: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.created_at: dict[str, float] = {}
        self.approved_at: dict[str, float] = {}
        self.approval_order: list[str] = []
        self.approval_puts = 0
        self.conflicts_to_inject = 0
        self.watch_generation = 0
        self.watches_served = 0
        self.closed = False
        # Misbehaviour on demand: tamper(method, path) returns the raw bytes to send instead
        # of the real answer (each chunk flushed on its own, so a generator can drip), or None.
        self.tamper: Tamper | None = None
        # Bearer tokens the API accepts beside the admin client certificate (kube-apiserver's
        # token authenticators: "Authorization: Bearer <token>", docs: Authenticating).
        self.tokens: set[str] = set()
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object (set_cluster_version, add_secret)
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> Pod
        self.pdbs: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> PodDisruptionBudget
        self.evictions: list[tuple[str, str, int]] = []  # (namespace, pod, HTTP status answered)
        self.httpd, self.url, self.kubeconfig, self.ca_pem = serve_tls(workdir, _Handler, self)
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> FakeKube:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every watch and the listening socket."""
        with self.lock:
            self.closed = True
            self.lock.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- the store, for tests -------------------------------------------------
    def _bump(self, obj: dict[str, Any], event: str) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, event, json.loads(json.dumps(obj))))
        self.lock.notify_all()

    def add_csr(self, name: str, request_pem: bytes, *, signer: str, username: str,
                groups: list[str], usages: list[str]) -> None:
        """Create a pending CSR as the kubelet (or an attacker) would."""
        obj = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": _now()},
               "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": signer,
                        "username": username, "groups": groups, "usages": usages, "uid": "1"},
               "status": {}}
        with self.lock:
            self.csrs[name] = obj
            self.created_at[name] = time.monotonic()
            self._bump(obj, "ADDED")

    def add_node(self, name: str, *, ready: bool | None = None) -> None:
        """Register a Node (what a kubelet does once its client CSR is approved).

        `ready` sets its Ready condition as the kubelet reports it (None: no conditions yet).
        """
        status: dict[str, Any] = {}
        if ready is not None:
            status["conditions"] = [{
                "type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready else "container runtime "
                "network not ready", "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]
        with self.lock:
            obj = {"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "creationTimestamp": _now()}, "spec": {},
                   "status": status}
            self.nodes[name] = obj
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)

    def set_cluster_version(self, *, available: bool, version: str = "4.16.3") -> None:
        """ClusterVersion `version` as the CVO reports it: Available True once installed."""
        cond = {"type": "Available", "status": "True" if available else "False",
                "lastTransitionTime": _now(),
                "message": f"Done applying {version}" if available else "Working towards " + version}
        self.put_object(CLUSTER_VERSION_PATH, {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"}, "spec": {"clusterID": "00000000-0000-4000-8000-000000000001"},
            "status": {"conditions": [cond], "desired": {"version": version}}})

    def add_secret(self, namespace: str, name: str, data: dict[str, bytes]) -> None:
        """A Secret as the API returns it: each value base64 in `data`."""
        self.put_object(f"/api/v1/namespaces/{namespace}/secrets/{name}", {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})

    def put_object(self, path: str, obj: dict[str, Any]) -> None:
        """Serve `obj` at `path` (GET), with a fresh resourceVersion."""
        with self.lock:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[path] = obj

    def add_pod(self, namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None,
                owner: str | None = None, empty_dir: bool = False) -> None:
        """A running Pod bound to `node`; `owner` the kind of its controller (ReplicaSet, DaemonSet)."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {},
                                "uid": f"uid-{namespace}-{name}"}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                        "uid": f"uid-{name}-owner", "controller": True}]
        volumes = [{"name": "scratch", "emptyDir": {}}] if empty_dir else []
        with self.lock:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self.pods[(namespace, name)] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                            "spec": {"nodeName": node, "volumes": volumes},
                                            "status": {"phase": "Running"}}

    def add_pdb(self, namespace: str, name: str, match_labels: dict[str, str], *,
                disruptions_allowed: int) -> None:
        """A PodDisruptionBudget as the disruption controller keeps it (status.disruptionsAllowed)."""
        with self.lock:
            self.pdbs[(namespace, name)] = {
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": match_labels}},
                "status": {"disruptionsAllowed": disruptions_allowed}}

    def evict(self, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        """The eviction subresource: 429 while a matching PDB allows no disruption, else the pod goes."""
        with self.lock:
            pod = self.pods.get((namespace, name))
            if pod is None:
                code, doc = 404, status(404, "NotFound", f'pods "{name}" not found')
            elif any(pdb["metadata"]["namespace"] == namespace
                     and pdb["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
                     and pdb["status"]["disruptionsAllowed"] < 1 for pdb in self.pdbs.values()):
                code, doc = 429, status(429, "TooManyRequests", "Cannot evict pod as it would violate "
                                        "the pod's disruption budget.")
            else:
                del self.pods[(namespace, name)]
                code, doc = 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            self.evictions.append((namespace, name, code))
            return code, doc

    def add_raw_event(self, line: bytes) -> None:
        """Send `line` as-is to every watch, as one event line (a malformed event, for tests)."""
        with self.lock:
            self.rv += 1
            self.events.append((self.rv, "RAW", {"raw": line}))
            self.lock.notify_all()

    def decide_directly(self, name: str, condition: str = "Approved") -> None:
        """Approve (or deny) a CSR as another approver, an admin or an earlier run did."""
        with self.lock:
            cur = self.csrs[name]
            cur["status"]["conditions"] = [{"type": condition, "status": "True", "reason": "Other",
                                            "lastUpdateTime": _now(), "lastTransitionTime": _now()}]
            if condition == "Approved":
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            self._bump(cur, "MODIFIED")

    def touch_csr(self, name: str) -> None:
        """Another writer changed the CSR: its resourceVersion moves on."""
        with self.lock:
            self._bump(self.csrs[name], "MODIFIED")

    def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart does."""
        with self.lock:
            self.watch_generation += 1
            self.lock.notify_all()

    def conditions(self, name: str) -> list[str]:
        """The condition types of one CSR."""
        with self.lock:
            return [c["type"] for c in self.csrs[name]["status"].get("conditions", [])]

    def approved(self) -> set[str]:
        """Names of every approved CSR."""
        with self.lock:
            return set(self.approved_at)

    # --- the API, for the handler ---------------------------------------------
    def approve(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.approval_puts += 1
            cur = self.csrs.get(name)
            if cur is None:
                return 404, status(404, "NotFound", f'certificatesigningrequests.certificates.k8s.io '
                                                    f'"{name}" not found')
            if self.conflicts_to_inject > 0:
                self.conflicts_to_inject -= 1
                self._bump(cur, "MODIFIED")
            if body.get("metadata", {}).get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", "Operation cannot be fulfilled on certificatesigning"
                                   f'requests.certificates.k8s.io "{name}": the object has been modified;'
                                   " please apply your changes to the latest version and try again")
            conds = list(body.get("status", {}).get("conditions") or [])
            types = [c.get("type") for c in conds]
            if len(types) != len(set(types)) or {"Approved", "Denied"} <= set(types):
                return 422, status(422, "Invalid", f'CertificateSigningRequest "{name}" is invalid: '
                                   "status.conditions: duplicate or conflicting conditions")
            for c in conds:
                c.setdefault("lastUpdateTime", _now())
                c.setdefault("lastTransitionTime", c["lastUpdateTime"])
            cur["status"]["conditions"] = conds
            if "Approved" in types and name not in self.approved_at:
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            self._bump(cur, "MODIFIED")
            return 200, cur


def _kubeconfig(url: str, ca_pem: bytes, admin: Any) -> dict[str, Any]:
    """The shape of openshift-install's auth/kubeconfig: embedded CA and admin client cert."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake", "cluster": {"server": url,
                                                      "certificate-authority-data": b64(ca_pem)}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": b64(admin.cert_pem),
                                                 "client-key-data": b64(admin.key_pem)}}],
            "contexts": [{"name": "admin", "context": {"cluster": "fake", "user": "admin"}}],
            "current-context": "admin"}


def _table(items: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    """CSRs as a meta.k8s.io/v1 Table, the form `kubectl get` asks for."""
    def condition(o: dict[str, Any]) -> str:
        types = [c["type"] for c in o["status"].get("conditions", [])]
        out = ",".join(types) or "Pending"
        return out + (",Issued" if o["status"].get("certificate") else "")
    cols = [("Name", "string"), ("Age", "date"), ("SignerName", "string"), ("Requestor", "string"),
            ("RequestedDuration", "string"), ("Condition", "string")]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": [{"name": n, "type": t, "format": "", "description": "", "priority": 0}
                                  for n, t in cols],
            "rows": [{"cells": [o["metadata"]["name"], "1m", o["spec"]["signerName"],
                                o["spec"]["username"], "<none>", condition(o)],
                      "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": o["metadata"]}} for o in items]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as Go's net/http: no 40 ms delayed-ACK stalls per response

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's signature
        pass

    @property
    def fake(self) -> FakeKube:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def _send(self, code: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authenticated(self) -> bool:
        if self.connection.getpeercert():  # type: ignore[attr-defined]
            return True
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme == "Bearer" and token in self.fake.tokens:
            return True
        self._send(401, status(401, "Unauthorized", "Unauthorized"))
        return False

    def _tampered(self, method: str) -> bool:
        return send_tampered(self, self.fake.tamper, method)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authenticated() or self._tampered("GET"):
            return
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        if path in DISCOVERY:
            self._send(200, DISCOVERY[path])
        elif path == CSR_PATH and q.get("watch") in ("true", "1"):
            self._watch(q)
        elif path in (CSR_PATH, NODE_PATH):
            self._list(path, q)
        elif path.startswith((CSR_PATH + "/", NODE_PATH + "/")):
            self._get(path)
        elif path == "/api/v1/pods":
            self._pods(q)
        elif path.startswith("/api/v1/namespaces/") and "/pods/" in path:
            ns, _, name = path.removeprefix("/api/v1/namespaces/").partition("/pods/")
            with self.fake.lock:
                pod = json.loads(json.dumps(self.fake.pods.get((ns, name))))
            if pod is None:
                self._send(404, status(404, "NotFound", f'pods "{name}" not found'))
            else:
                self._send(200, pod)
        elif path in self.fake.objects:
            with self.fake.lock:
                obj = json.loads(json.dumps(self.fake.objects[path]))
            self._send(200, obj)
        else:
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))

    def _list(self, path: str, q: dict[str, str]) -> None:
        with self.fake.lock:
            store = self.fake.csrs if path == CSR_PATH else self.fake.nodes
            items = json.loads(json.dumps(list(store.values())))
            rv = str(self.fake.rv)
        if path == CSR_PATH and "as=Table" in self.headers.get("Accept", ""):
            self._send(200, _table(items, rv))
            return
        kind = "CertificateSigningRequestList" if path == CSR_PATH else "NodeList"
        api = "certificates.k8s.io/v1" if path == CSR_PATH else "v1"
        self._send(200, {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": rv},
                         "items": items})

    def _pods(self, q: dict[str, str]) -> None:
        field, _, value = q.get("fieldSelector", "").partition("=")
        with self.fake.lock:
            items = [json.loads(json.dumps(p)) for p in self.fake.pods.values()
                     if field != "spec.nodeName" or p["spec"]["nodeName"] == value]
            rv = str(self.fake.rv)
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
                         "items": items})

    def _body(self) -> dict[str, Any]:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")  # type: ignore[no-any-return]

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authenticated() or self._tampered("POST"):
            return
        body = self._body()
        path = urlsplit(self.path).path.rstrip("/")
        rest = path.removeprefix("/api/v1/namespaces/")
        ns, _, tail = rest.partition("/pods/")
        name, _, sub = tail.partition("/")
        if path.startswith("/api/v1/namespaces/") and sub == "eviction":
            if body.get("kind") != "Eviction" or body.get("metadata", {}).get("name") != name:
                self._send(400, status(400, "BadRequest",
                                       "name in URL does not match name in Eviction object"))
                return
            self._send(*self.fake.evict(ns, name))
        else:
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))

    def do_PATCH(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authenticated() or self._tampered("PATCH"):
            return
        body = self._body()
        path = urlsplit(self.path).path.rstrip("/")
        name = path.removeprefix(NODE_PATH + "/")
        if not path.startswith(NODE_PATH + "/") or not self.headers.get("Content-Type", "").startswith(
                "application/merge-patch+json"):
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return
        with self.fake.lock:
            node = self.fake.nodes.get(name)
            if node is not None:
                node["spec"].update(body.get("spec") or {})
                self.fake.rv += 1
                node["metadata"]["resourceVersion"] = str(self.fake.rv)
                node = json.loads(json.dumps(node))
        if node is None:
            self._send(404, status(404, "NotFound", f'nodes "{name}" not found'))
        else:
            self._send(200, node)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authenticated() or self._tampered("DELETE"):
            return
        path = urlsplit(self.path).path.rstrip("/")
        name = path.removeprefix(NODE_PATH + "/")
        with self.fake.lock:
            node = self.fake.nodes.pop(name, None) if path.startswith(NODE_PATH + "/") else None
        if node is None:
            self._send(404, status(404, "NotFound", f'nodes "{name}" not found'))
        else:
            self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    def _get(self, path: str) -> None:
        parts = path.split("/")
        sub = parts[-1] if len(parts) == (7 if path.startswith(CSR_PATH) else 6) else None
        name = parts[-2] if sub else parts[-1]
        with self.fake.lock:
            store = self.fake.csrs if path.startswith(CSR_PATH) else self.fake.nodes
            obj = json.loads(json.dumps(store.get(name))) if sub in (None, "approval") else None
        if obj is None:
            self._send(404, status(404, "NotFound", f'"{name}" not found'))
        else:
            self._send(200, obj)

    def _watch(self, q: dict[str, str]) -> None:
        fake = self.fake
        since = int(q.get("resourceVersion") or 0)
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.lock:
            fake.watches_served += 1
            gen = fake.watch_generation
            if since == 0:  # no version: the current state as ADDED events, then changes
                backlog = [(int(o["metadata"]["resourceVersion"]), "ADDED", o) for o in fake.csrs.values()]
                since = fake.rv
            else:
                backlog = []
        try:
            self._stream(backlog, since, gen, deadline)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return
        self.close_connection = True

    def _stream(self, backlog: list[tuple[int, str, dict[str, Any]]], since: int, gen: int,
                deadline: float) -> None:
        fake = self.fake
        while True:
            for rv, kind, obj in backlog:
                line = (obj["raw"] if kind == "RAW"
                        else json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                since = max(since, rv)
            self.wfile.flush()
            with fake.lock:
                while not ([e for e in fake.events if e[0] > since] or fake.closed
                           or fake.watch_generation != gen or time.monotonic() >= deadline):
                    fake.lock.wait(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
                if fake.closed or fake.watch_generation != gen or time.monotonic() >= deadline:
                    break
                backlog = [e for e in fake.events if e[0] > since]
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authenticated() or self._tampered("PUT"):
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ctype = self.headers.get("Content-Type", "application/json")
        if ctype.startswith("application/vnd.kubernetes.protobuf"):  # what kubectl sends
            body = decode_csr_approval(raw)
        elif ctype.startswith("application/json"):
            body = json.loads(raw or b"{}")
        else:
            self._send(415, status(415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format: {ctype}"))
            return
        parts = urlsplit(self.path).path.rstrip("/").split("/")
        if len(parts) == 7 and "/".join(parts[:5]) == CSR_PATH and parts[6] == "approval":
            code, doc = self.fake.approve(parts[5], body)
            self._send(code, doc)
        else:
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
