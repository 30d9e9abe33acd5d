"""A FAKE generic Kubernetes API server: any resource kind, the real REST protocol.

No kube-apiserver runs here, so this speaks what lightkube and kubectl use,
as the real server does: TLS with client certificates (the same kubeconfig
shape as tests/fake_kube.py), the real URL paths for core and group
resources, cluster-scoped and namespaced kinds, get/list (label selectors)/
watch (chunked JSON events)/create/replace/delete, merge patch, server-side
apply (PATCH application/apply-patch+yaml with fieldManager: fields owned per
manager, 409 on a conflict with another manager unless force, a no-op apply
leaves resourceVersion alone), the /status subresource (writes to the main
resource leave status untouched, and the other way round), pod logs.

Every object written to a kind that has a CRD in tests/data/ is
validated against the real schema first (tests/kube_schema.py): an unknown
field or a wrong type is a 422 Invalid, as the real server answers, and is
recorded in `schema_violations` so a test can also assert none happened.
Core kinds are held to the server's own rules (tests/kube_core.py): every
object's metadata, a Pod's containers, resources and immutable spec, a
Node's taints; a controller's writes are checked the same way.

A kind whose CRD an operator brings is not served until the operator is
installed (`withhold`, then `serve`): until then its URLs answer 404, as a
real server answers for a resource it does not know.

Controllers (tests/fake_gpu.py) act on the store in-process through
`get`/`put`/`set_status`, and are called after every write.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from fake_kube import Tamper, send_tampered, status
from kube_core import core_errors
from kube_schema import has_schema, schema_errors
from kube_tls import serve_tls

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One resource type the server serves."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def not_found(self, name: str) -> Obj:
        res = f"{self.plural}.{self.group}" if self.group else self.plural
        return status(404, "NotFound", f'{res} "{name}" not found')


KINDS = [
    Kind("", "v1", "Namespace", "namespaces", False),
    Kind("", "v1", "Node", "nodes", False),
    Kind("", "v1", "Pod", "pods", True),
    Kind("", "v1", "Secret", "secrets", True, False),
    Kind("apps", "v1", "DaemonSet", "daemonsets", True),
    Kind("config.openshift.io", "v1", "ClusterVersion", "clusterversions", False),
    Kind("imageregistry.operator.openshift.io", "v1", "Config", "configs", False),
    Kind("image.openshift.io", "v1", "ImageStream", "imagestreams", True),
    Kind("operators.coreos.com", "v1alpha1", "CatalogSource", "catalogsources", True),
    Kind("operators.coreos.com", "v1alpha1", "Subscription", "subscriptions", True),
    Kind("operators.coreos.com", "v1alpha1", "InstallPlan", "installplans", True),
    Kind("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "clusterserviceversions", True),
    Kind("operators.coreos.com", "v1", "OperatorGroup", "operatorgroups", True),
    Kind("packages.operators.coreos.com", "v1", "PackageManifest", "packagemanifests", True),
    Kind("nfd.openshift.io", "v1", "NodeFeatureDiscovery", "nodefeaturediscoveries", True),
    Kind("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", False),
    # The NVIDIA Network Operator's CRDs (tests/data/network/): all cluster-scoped, with /status.
    Kind("mellanox.com", "v1alpha1", "NicClusterPolicy", "nicclusterpolicies", False),
    Kind("mellanox.com", "v1alpha1", "NicNodePolicy", "nicnodepolicies", False),
    Kind("mellanox.com", "v1alpha1", "HostDeviceNetwork", "hostdevicenetworks", False),
    Kind("mellanox.com", "v1alpha1", "IPoIBNetwork", "ipoibnetworks", False),
    Kind("mellanox.com", "v1alpha1", "MacvlanNetwork", "macvlannetworks", False),
    Kind("machineconfiguration.openshift.io", "v1", "MachineConfigPool", "machineconfigpools", False),
    Kind("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs", False, False),
    Kind("machineconfiguration.openshift.io", "v1", "KubeletConfig", "kubeletconfigs", False),
    Kind("performance.openshift.io", "v2", "PerformanceProfile", "performanceprofiles", False),
    Kind("config.openshift.io", "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets", False),
    Kind("config.openshift.io", "v1", "ImageTagMirrorSet", "imagetagmirrorsets", False),
    Kind("config.openshift.io", "v1", "OperatorHub", "operatorhubs", False),
    # The GPU metrics proof (tests/fake_thanos.py): the querier's route, the ingress CA, RBAC, tokens.
    Kind("route.openshift.io", "v1", "Route", "routes", True),
    Kind("", "v1", "ConfigMap", "configmaps", True, False),
    Kind("", "v1", "ServiceAccount", "serviceaccounts", True, False),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, False),
]
_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
_BY_API = {(k.api_version, k.kind): k for k in KINDS}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf of a JSON document by path; lists are atomic (one leaf), as SSA treats them by default."""
    if isinstance(obj, dict) and obj:
        out: dict[tuple[str, ...], Any] = {}
        for key, val in obj.items():
            out.update(_leaves(val, (*prefix, str(key))))
        return out
    return {prefix: obj}


def _merge(base: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for key, val in patch.items():
        if val is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), val)
    return out


def _remove(obj: Obj, path: tuple[str, ...]) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _selects(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, val = term.split("!=", 1)
            if labels.get(key) == val:
                return False
        elif "=" in term:
            key, val = term.split("=", 1)
            if labels.get(key.rstrip("=")) != val:
                return False
        elif labels.get(term) is None:
            return False
    return True


class SchemaRejected(Exception):
    """The object breaks its kind's CRD schema (the server's 422)."""


class FakeApiServer:
    """The store, the server and its kubeconfig; `controllers` run after every write."""

    def __init__(self, workdir: Path) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1
        self.objects: dict[tuple[Kind, str, str], Obj] = {}
        # fieldManager -> leaf path -> value it applied, per object
        self.owners: dict[tuple[Kind, str, str], dict[str, dict[tuple[str, ...], Any]]] = {}
        self.events: list[tuple[int, Kind, str, Obj]] = []
        self.pod_logs: dict[tuple[str, str, str], str] = {}
        self.schema_violations: list[str] = []
        self.controller_errors: list[str] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, content type)
        self.tokens: dict[str, tuple[str, str]] = {}  # TokenRequest tokens issued -> (namespace, account)
        self.controllers: list[Callable[[], None]] = []
        self.unserved: set[Kind] = set()  # CRD kinds not installed yet: their URLs are 404
        # Misbehaviour on demand, as in tests/fake_kube.py: raw bytes instead of the answer.
        self.tamper: Tamper | None = None
        self.closed = False
        self._in_controllers = False
        # Every request must carry the admin client certificate, as the real server demands.
        tls = serve_tls(workdir, _Handler, self, verify=ssl.CERT_REQUIRED)
        self.httpd, self.url, self.kubeconfig, _ = tls
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._ticker = threading.Thread(target=self._tick_forever, daemon=True)

    def start(self) -> FakeApiServer:
        self._thread.start()
        self._ticker.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _tick_forever(self) -> None:
        # Controllers also act on time (a CSV takes a few ticks to succeed).
        while not self.closed:
            self.run_controllers()
            time.sleep(0.05)

    def run_controllers(self) -> None:
        with self.lock:
            if self._in_controllers or self.closed:
                return
            self._in_controllers = True
            try:
                for controller in self.controllers:
                    try:
                        controller()
                    except Exception as exc:  # noqa: BLE001 - a test asserts there were none
                        self.controller_errors.append(f"{controller.__name__}: {exc!r}")
            finally:
                self._in_controllers = False

    def withhold(self, api_version: str, kind: str) -> None:
        """Stop serving a kind (its CRD is not installed yet)."""
        self.unserved.add(self.kind(api_version, kind))

    def serve(self, group: str, plural: str) -> bool:
        """Serve the kind of the CRD `<plural>.<group>` once installed; whether the kind is one of ours."""
        found = [k for k in KINDS if (k.group, k.plural) == (group, plural)]
        with self.lock:
            self.unserved.difference_update(found)
        return bool(found)

    # --- the store (controllers and tests) ----------------------------------------
    @staticmethod
    def kind(api_version: str, kind: str) -> Kind:
        return _BY_API[(api_version, kind)]

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Obj | None:
        with self.lock:
            obj = self.objects.get((self.kind(api_version, kind), namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        k = self.kind(api_version, kind)
        with self.lock:
            return [
                copy.deepcopy(o)
                for (kk, ns, _), o in sorted(self.objects.items(), key=lambda i: i[0][1:])
                if kk == k and (namespace is None or ns == namespace)
            ]

    def put(self, obj: Obj, *, manager: str = "fake-controller") -> Obj:
        """Create or replace an object as a controller does (status included)."""
        k = self.kind(obj["apiVersion"], obj["kind"])
        meta = obj.setdefault("metadata", {})
        key = (k, meta.get("namespace", "") if k.namespaced else "", meta["name"])
        with self.lock:
            old = self.objects.get(key)
            self._validate(k, obj, old)
            self._store(key, obj, old, manager)
            return copy.deepcopy(self.objects[key])

    def set_status(self, api_version: str, kind: str, name: str, namespace: str, st: Obj) -> None:
        """Replace an object's status (what its operator does through /status)."""
        with self.lock:
            key = (self.kind(api_version, kind), namespace, name)
            obj = copy.deepcopy(self.objects[key])
            obj["status"] = st
            self._validate(key[0], obj, self.objects[key])  # an operator's status must fit the schema too
            self._store(key, obj, self.objects[key], "fake-controller")

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        with self.lock:
            key = (self.kind(api_version, kind), namespace, name)
            obj = self.objects.pop(key, None)
            self.owners.pop(key, None)
            if obj is not None:
                self._event(key[0], "DELETED", obj)

    def _validate(self, k: Kind, obj: Obj, old: Obj | None = None) -> None:
        errors = core_errors(k.kind, obj, old)
        if has_schema(k.api_version, k.kind):
            errors += schema_errors(obj)
        if errors:
            what = f"{k.kind}.{k.group}" if k.group else k.kind
            text = f'{what} "{obj["metadata"].get("name")}" is invalid: ' + "; ".join(errors)
            self.schema_violations.append(text)
            raise SchemaRejected(text)

    def _store(self, key: tuple[Kind, str, str], obj: Obj, old: Obj | None, manager: str) -> bool:
        meta = obj["metadata"]
        if old is not None:
            for field in ("uid", "creationTimestamp"):
                meta[field] = old["metadata"][field]
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            meta.setdefault("generation", old["metadata"].get("generation", 1))
            if json.dumps(obj, sort_keys=True) == json.dumps(old, sort_keys=True):
                return False  # nothing changed: the real server keeps the resourceVersion
            if obj.get("spec") != old.get("spec"):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
        else:
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            if key[0].namespaced:
                meta["namespace"] = key[1]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self._event(key[0], "MODIFIED" if old is not None else "ADDED", obj)
        return True

    def _event(self, k: Kind, kind: str, obj: Obj) -> None:
        self.events.append((self.rv, k, kind, copy.deepcopy(obj)))
        self.changed.notify_all()

    # --- the API verbs (the handler) -------------------------------------------------
    def create(self, k: Kind, ns: str, body: Obj) -> tuple[int, Obj]:
        name = body.get("metadata", {}).get("name")
        if not name and body.get("metadata", {}).get("generateName"):
            name = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
            body["metadata"]["name"] = name
        if k.namespaced and not self._namespace_exists(ns):
            return 404, status(404, "NotFound", f'namespaces "{ns}" not found')
        key = (k, ns, name)
        with self.lock:
            if key in self.objects:
                return 409, status(409, "AlreadyExists", f'{k.plural} "{name}" already exists')
            try:
                self._validate(k, body)
            except SchemaRejected as exc:
                return 422, status(422, "Invalid", str(exc))
            self._store(key, body, None, "create")
            out = copy.deepcopy(self.objects[key])
        self.run_controllers()
        return 201, out

    def token_request(self, ns: str, name: str, body: Obj) -> tuple[int, Obj]:
        """POST serviceaccounts/<name>/token: a bound token of the account (authentication.k8s.io/v1).

        After kubernetes pkg/registry/core/serviceaccount/storage/token.go and the
        TokenRequest reference (kubernetes.io/docs/reference/kubernetes-api/
        authentication-resources/token-request-v1): 201 with the request echoed and
        status.token / status.expirationTimestamp; the account must exist; a
        lifetime under 10 minutes is Invalid.
        """
        with self.lock:
            if (self.kind("v1", "ServiceAccount"), ns, name) not in self.objects:
                return 404, status(404, "NotFound", f'serviceaccounts "{name}" not found')
            seconds = (body.get("spec") or {}).get("expirationSeconds", 3600)
            if not isinstance(seconds, int) or seconds < 600:
                return 422, status(422, "Invalid", f"spec.expirationSeconds: Invalid value: {seconds}: may "
                                   "not specify a duration less than 10 minutes")
            token = "eyJhbGciOiJSUzI1NiJ9." + uuid.uuid4().hex + uuid.uuid4().hex
            self.tokens[token] = (ns, name)
        expires = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 201, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "metadata": {"name": name, "namespace": ns},
                     "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": seconds},
                     "status": {"token": token, "expirationTimestamp": expires}}

    def _namespace_exists(self, ns: str) -> bool:
        return (self.kind("v1", "Namespace"), "", ns) in self.objects

    def patch(
        self, k: Kind, ns: str, name: str, sub: str | None, body: bytes, ctype: str, q: dict[str, str]
    ) -> tuple[int, Obj]:
        key = (k, ns, name)
        with self.lock:
            old = self.objects.get(key)
            if ctype.startswith("application/apply-patch"):
                manager = q.get("fieldManager")
                if not manager:
                    return 400, status(400, "BadRequest", "PATCH with apply requires a fieldManager")
                code, out = self._apply(
                    k, key, old, yaml.safe_load(body) or {}, manager, q.get("force") == "true", sub
                )
            elif ctype.startswith("application/merge-patch+json"):
                if old is None:
                    return 404, k.not_found(name)
                new = _merge(old, json.loads(body or b"{}"))
                code, out = self._write(k, key, old, new, sub, q.get("fieldManager") or "unknown")
            else:
                return 415, status(415, "UnsupportedMediaType", f"the body was in an unknown format: {ctype}")
        if code < 300:
            self.run_controllers()
        return code, out

    def _apply(
        self,
        k: Kind,
        key: tuple[Kind, str, str],
        old: Obj | None,
        cfg: Obj,
        manager: str,
        force: bool,
        sub: str | None,
    ) -> tuple[int, Obj]:
        if cfg.get("apiVersion") != k.api_version or cfg.get("kind") != k.kind:
            return 400, status(
                400,
                "BadRequest",
                f"apply: apiVersion/kind {cfg.get('apiVersion')}/"
                f"{cfg.get('kind')} does not match the URL ({k.api_version}/{k.kind})",
            )
        if k.namespaced and old is None and not self._namespace_exists(key[1]):
            return 404, status(404, "NotFound", f'namespaces "{key[1]}" not found')
        if old is None:
            cfg.setdefault("metadata", {})["name"] = key[2]
        applied = _applied_fields(k, cfg, sub)
        owners = self.owners.setdefault(key, {})
        conflicts = _conflicts(owners, manager, applied, old)
        if conflicts and not force:
            what = "; ".join(f'conflict with "{m}": .{p}' for p, m in conflicts)
            return 409, status(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {what}")
        new = (
            copy.deepcopy(old)
            if old is not None
            else {"apiVersion": k.api_version, "kind": k.kind, "metadata": {"name": key[2]}}
        )
        if k.namespaced:
            new["metadata"]["namespace"] = key[1]
        for path in owners.get(manager, {}):
            if path not in applied:
                _remove(new, path)  # a field this manager applied before and no longer does
        code, out = self._write(k, key, old, _merge(new, cfg), sub, manager, check_status=False)
        if code < 300:
            # Forced (or equal-valued) fields move to this manager.
            for m in owners:
                owners[m] = {p: v for p, v in owners[m].items() if p not in applied}
            owners[manager] = applied
            out.setdefault("metadata", {})["managedFields"] = [
                {
                    "manager": m,
                    "operation": "Apply" if m == manager else "Update",
                    "apiVersion": k.api_version,
                }
                for m in owners
            ]
        return code, out

    def _write(
        self,
        k: Kind,
        key: tuple[Kind, str, str],
        old: Obj | None,
        new: Obj,
        sub: str | None,
        manager: str,
        check_status: bool = True,
    ) -> tuple[int, Obj]:
        if k.status_subresource and old is not None:
            if sub == "status":
                new = {**copy.deepcopy(old), "status": new.get("status", {})}
            else:
                new["status"] = copy.deepcopy(old.get("status", {}))
                if not new["status"]:
                    new.pop("status")
        elif k.status_subresource and old is None and sub != "status":
            new.pop("status", None)
        try:
            self._validate(k, new, old)
        except SchemaRejected as exc:
            return 422, status(422, "Invalid", str(exc))
        self._store(key, new, old, manager)
        if manager and old is not None:
            # A non-apply write takes ownership of the leaves it changed.
            owners = self.owners.setdefault(key, {})
            before, after = _leaves(old), _leaves(new)
            changed = {p: v for p, v in after.items() if before.get(p) != v}
            if changed and manager not in owners:
                owners[manager] = {}
            for p, v in changed.items():
                for m in owners:
                    owners[m].pop(p, None)
                owners.setdefault(manager, {})[p] = v
        return (201 if old is None else 200), copy.deepcopy(self.objects[key])


def _applied_fields(k: Kind, cfg: Obj, sub: str | None) -> dict[tuple[str, ...], Any]:
    """The leaves an apply configuration sets (identity fields and, off /status, status excluded)."""
    return {
        p: v
        for p, v in _leaves(cfg).items()
        if p[0] not in ("apiVersion", "kind")
        and p[:2] not in (("metadata", "name"), ("metadata", "namespace"))
        and not (k.status_subresource and sub != "status" and p[0] == "status")
    }


def _conflicts(
    owners: dict[str, dict[tuple[str, ...], Any]],
    manager: str,
    applied: dict[tuple[str, ...], Any],
    old: Obj | None,
) -> list[tuple[str, str]]:
    """(field, other manager) where an apply would change a value another manager owns."""
    current = _leaves(old) if old is not None else {}
    return [
        (".".join(p), m)
        for m, fields in owners.items()
        if m != manager
        for p in fields
        if p in applied and current.get(p) != applied[p]
    ]


def _fresh(fake: FakeApiServer, k: Kind, ns: str, since: int) -> list[tuple[int, str, Obj]]:
    """Events of one kind (and namespace) after resourceVersion `since`."""
    return [
        (rv, kind, o)
        for rv, kk, kind, o in fake.events
        if rv > since and kk == k and (not ns or o["metadata"].get("namespace", "") == ns)
    ]


def _parse_path(path: str) -> tuple[Kind, str, str | None, str | None] | None:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    ns = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    elif len(rest) == 2 and rest[0] == "namespaces":
        rest = ["namespaces", rest[1]]
    if not rest:
        return None
    k = _BY_PATH.get((group, version, rest[0]))
    if k is None:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return k, ns, name, sub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    unknown = False  # the last request named a kind that is not served

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's signature
        pass

    @property
    def fake(self) -> FakeApiServer:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def _send(self, code: int, doc: Obj | str) -> None:
        body = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(doc, str) else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _tampered(self) -> bool:
        return send_tampered(self, self.fake.tamper, self.command)

    def _route(self) -> tuple[tuple[Kind, str, str | None, str | None] | None, dict[str, str]]:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.fake.lock:
            self.fake.requests.append((self.command, url.path, self.headers.get("Content-Type", "")))
            route = _parse_path(url.path)
            self.unknown = route is not None and route[0] in self.fake.unserved
        return (None if self.unknown else route), q

    def _not_served(self) -> bool:
        """A kind whose CRD is not installed: 404 for every verb, as the real server answers."""
        if self.unknown:
            self._body()  # read it, or the next request on this connection starts inside it
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return True
        return False

    def _named(self) -> tuple[tuple[Kind, str, str, str | None] | None, dict[str, str]]:
        """The route of a request that must name an object; None (404 or 405 sent) when it does not."""
        route, q = self._route()
        if self._not_served():
            return None, q
        if route is None or route[2] is None:
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return None, q
        k, ns, name, sub = route
        return (k, ns, name, sub), q

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, q = self._route()
        if urlsplit(self.path).path == "/version":
            self._send(200, {"major": "1", "minor": "29", "gitVersion": "v1.29.6+fake"})
            return
        if route is None:
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        k, ns, name, sub = route
        if name is None and q.get("watch") in ("true", "1"):
            self._watch(k, ns, q)
        elif name is None:
            with self.fake.lock:
                items = [
                    copy.deepcopy(o)
                    for (kk, n, _), o in self.fake.objects.items()
                    if kk == k
                    and (not ns or n == ns)
                    and _selects(q.get("labelSelector", ""), o["metadata"].get("labels") or {})
                ]
                rv = str(self.fake.rv)
            self._send(
                200,
                {
                    "apiVersion": k.api_version,
                    "kind": f"{k.kind}List",
                    "metadata": {"resourceVersion": rv},
                    "items": items,
                },
            )
        elif sub == "log" and k.kind == "Pod":
            self._log(ns, name, q)
        else:
            with self.fake.lock:
                obj = copy.deepcopy(self.fake.objects.get((k, ns, name)))
            self._send(200, obj) if obj is not None else self._send(404, k.not_found(name))

    def _log(self, ns: str, name: str, q: dict[str, str]) -> None:
        with self.fake.lock:
            pod = self.fake.objects.get((self.fake.kind("v1", "Pod"), ns, name))
            if pod is None:
                self._send(404, status(404, "NotFound", f'pods "{name}" not found'))
                return
            containers = [c["name"] for c in pod["spec"].get("containers", [])]
            container = q.get("container") or (containers[0] if len(containers) == 1 else "")
            if not container:
                self._send(
                    400,
                    status(
                        400,
                        "BadRequest",
                        f"a container name must be specified for pod {name}, choose one of: {containers}",
                    ),
                )
                return
            text = self.fake.pod_logs.get((ns, name, container))
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            waiting = next((((s.get("state") or {}).get("waiting") or {}).get("reason")
                            for s in statuses if s.get("name") == container), None)
        if text is None:
            # kubelet's words (pkg/kubelet/kubelet_pods.go validateContainerLogStatus).
            why = ("trying and failing to pull image" if waiting in ("ErrImagePull", "ImagePullBackOff")
                   else "ContainerCreating")
            said = f'container "{container}" in pod "{name}" is waiting to start: {why}'
            self._send(400, status(400, "BadRequest", said))
            return
        lines = text.splitlines(keepends=True)
        if q.get("tailLines"):
            lines = lines[-int(q["tailLines"]) :]
        self._send(200, "".join(lines))

    def _watch(self, k: Kind, ns: str, q: dict[str, str]) -> None:
        fake = self.fake
        since = int(q.get("resourceVersion") or 0)
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.lock:
            if since == 0:
                backlog = [
                    (int(o["metadata"]["resourceVersion"]), "ADDED", o)
                    for (kk, n, _), o in fake.objects.items()
                    if kk == k and (not ns or n == ns)
                ]
                since = fake.rv
            else:
                backlog = []
        try:
            while True:
                for rv, kind, obj in backlog:
                    line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    since = max(since, rv)
                self.wfile.flush()
                with fake.lock:
                    while not (_fresh(fake, k, ns, since) or fake.closed or time.monotonic() >= deadline):
                        fake.changed.wait(timeout=0.5)
                    if fake.closed or time.monotonic() >= deadline:
                        break
                    backlog = _fresh(fake, k, ns, since)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, _ = self._route()
        if self._not_served():
            return
        if route is not None and route[0].kind == "ServiceAccount" and route[2] and route[3] == "token":
            self._send(*self.fake.token_request(route[1], route[2], json.loads(self._body() or b"{}")))
            return
        if route is None or route[2] is not None:
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return
        k, ns, _, _ = route
        code, doc = self.fake.create(k, ns, json.loads(self._body() or b"{}"))
        self._send(code, doc)

    def do_PATCH(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, q = self._named()
        if route is None:
            return
        k, ns, name, sub = route
        code, doc = self.fake.patch(k, ns, name, sub, self._body(), self.headers.get("Content-Type", ""), q)
        self._send(code, doc)

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, q = self._named()
        if route is None:
            return
        k, ns, name, sub = route
        with self.fake.lock:
            old = self.fake.objects.get((k, ns, name))
            if old is None:
                self._send(404, k.not_found(name))
                return
            body = json.loads(self._body() or b"{}")
            if body.get("metadata", {}).get("resourceVersion") not in (
                None,
                old["metadata"]["resourceVersion"],
            ):
                self._send(
                    409,
                    status(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {k.plural} "{name}": '
                        "the object has been modified; please apply your changes to the "
                        "latest version and try again",
                    ),
                )
                return
            code, doc = self.fake._write(k, (k, ns, name), old, body, sub, q.get("fieldManager") or "unknown")
        self.fake.run_controllers()
        self._send(code, doc)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, _ = self._named()
        if route is None:
            return
        k, ns, name, _ = route
        with self.fake.lock:
            obj = self.fake.objects.get((k, ns, name))
            if obj is None:
                self._send(404, k.not_found(name))
                return
            self.fake.delete(k.api_version, k.kind, name, ns)
        self._send(200, obj)
