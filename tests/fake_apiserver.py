"""The FAKE Kubernetes API server of every test: any resource kind, the real REST protocol.

No kube-apiserver can run here (reference csr.md), so this speaks what upi's
clients, lightkube and kubectl use, as the real server does: TLS with a
self-made CA, client-certificate authentication from a kubeconfig shaped like
the one openshift-install writes (auth/kubeconfig, tests/kube_tls.py) or a
bearer token from `user_tokens` or `tokens` (kube-apiserver's token authenticators,
"Authorization: Bearer <token>", docs: Authenticating), anything else a 401;
legacy discovery of every served kind and Table output for `kubectl get`
(tests/kube_wire.py); the real URL paths for core and group resources,
cluster-scoped and namespaced kinds, get/list (label selectors)/watch
(chunked JSON events)/create/replace/delete, merge patch, server-side
apply (PATCH application/apply-patch+yaml with fieldManager: fields owned per
manager, 409 on a conflict with another manager unless force, a no-op apply
leaves resourceVersion alone), the /status subresource (writes to the main
resource leave status untouched, and the other way round), pod logs, list
field selectors (spec.nodeName, metadata.name/namespace, status.phase: the
fields pkg/registry/core/pod/strategy.go PodToSelectableFields offers).

CertificateSigningRequests (certificates.k8s.io/v1, cluster-scoped): the
/approval subresource replaces status.conditions only, answers 409 Conflict
when the body's resourceVersion is not the current one (none at all is an
unconditional update, as for every CSR write) and 422 for duplicate
or conflicting conditions (pkg/apis/certificates/validation), and takes the
protobuf body kubectl sends (tests/kube_proto.py). Tests add CSRs and Nodes
in-process (add_csr, add_node) and see what was approved (approved,
approval_order, approval_puts).

An installed cluster for day 2: ClusterVersion `version` with
status.conditions[type=Available] (OpenShift docs, "ClusterVersion
[config.openshift.io/v1]", `oc get clusterversion`'s AVAILABLE column),
Secrets with base64 `data` (Kubernetes API reference, Secret v1 core).
Draining a node (kubernetes.io docs, "API-initiated Eviction" and "Safely
Drain a Node"; pkg/registry/core/pod/storage/eviction.go): POST
.../pods/<name>/eviction with a policy/v1 Eviction answers 429
TooManyRequests while a PodDisruptionBudget whose selector matches the pod
allows no disruption, 500 when more than one matches, else takes one from the
budget's status.disruptionsAllowed and deletes the pod (201); a pod that
Succeeded or Failed goes without asking the budget. Nodes take merge PATCH
(spec.unschedulable, as `kubectl cordon`) and DELETE.

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

Misbehaviour on demand (hostile tests): `tamper(method, path)` returns raw
bytes to send instead of the real answer, `add_raw_event` sends a line as-is
to every watch, `drop_watches` ends every stream as a server restart does,
`conflicts_to_inject` makes the next approvals meet another writer.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from kube_core import core_errors
from kube_proto import decode_csr_approval
from kube_schema import has_schema, schema_errors
from kube_tls import serve_tls
from kube_wire import TABLE_ACCEPT, Tamper, discovery, send_tampered, status, table

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
    short_names: tuple[str, ...] = ()  # what discovery lists, so `kubectl get csr` resolves

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def not_found(self, name: str) -> Obj:
        res = f"{self.plural}.{self.group}" if self.group else self.plural
        return status(404, "NotFound", f'{res} "{name}" not found')


KINDS = [
    Kind("", "v1", "Namespace", "namespaces", False, short_names=("ns",)),
    Kind("", "v1", "Node", "nodes", False, short_names=("no",)),
    Kind("", "v1", "Pod", "pods", True, short_names=("po",)),
    Kind("", "v1", "Secret", "secrets", True, False),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, short_names=("pdb",)),
    Kind("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", False,
         short_names=("csr",)),
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
    # The RDMA bandwidth test's SCC grant (upi.gpu.rdma.test_account_objects; tests/fake_rdma.py reads it).
    Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, False),
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


def _strategic_only(patch: Any) -> bool:
    """Whether a strategic merge patch holds a list or a $-directive (where it is no JSON merge patch)."""
    if isinstance(patch, list):
        return True
    if isinstance(patch, dict):
        return any(str(key).startswith("$") or _strategic_only(val) for key, val in patch.items())
    return False


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


# Fields a list may select on (pkg/registry/core/pod/strategy.go PodToSelectableFields, and
# metadata.name/namespace for every kind: staging/src/k8s.io/apiserver/pkg/registry/generic).
_SELECTABLE = {"metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace"),
               "spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase")}


def _field_terms(selector: str) -> list[tuple[str, bool, str]] | str:
    """(field, equal?, value) per fieldSelector term, or the server's error for a field it cannot select."""
    terms = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        neg = "!=" in term
        field, _, value = term.partition("!=" if neg else "=")
        field, value = field.rstrip("="), value.lstrip("=")
        if field not in _SELECTABLE:
            return f'field label not supported: {field}'
        terms.append((field, not neg, value))
    return terms


def _field_selects(terms: list[tuple[str, bool, str]], obj: Obj) -> bool:
    for field, equal, value in terms:
        section, key = _SELECTABLE[field]
        if ((obj.get(section) or {}).get(key, "") == value) != equal:
            return False
    return True


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels; an empty one selects all."""
    if not (selector.get("matchLabels") or {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
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
        self.events: list[tuple[int, Kind | None, str, Obj]] = []  # None: a raw line for every watch
        self.pod_logs: dict[tuple[str, str, str], str] = {}
        self.schema_violations: list[str] = []
        self.controller_errors: list[str] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, content type)
        self.tokens: dict[str, tuple[str, str]] = {}  # TokenRequest tokens issued -> (namespace, account)
        self.controllers: list[Callable[[], None]] = []
        # Admission plugins a fake adds (OpenShift's SCC admission: tests/fake_rdma.py): given the kind,
        # namespace and body of a create, an error answer (code, Status) refuses it; None admits it.
        self.admission: list[Callable[[Kind, str, Obj], tuple[int, Obj] | None]] = []
        self.unserved: set[Kind] = set()  # CRD kinds not installed yet: their URLs are 404
        # Misbehaviour on demand: raw bytes instead of the answer (see the module's docstring).
        self.tamper: Tamper | None = None
        # Users' bearer tokens the API accepts beside the admin client certificate (ServiceAccount
        # tokens issued by token_request, in `tokens`, are accepted too, as the real server does).
        self.user_tokens: set[str] = set()
        # CSRs: when each was created and approved (monotonic), the approvals' order, PUTs seen.
        self.created_at: dict[str, float] = {}
        self.approved_at: dict[str, float] = {}
        self.approval_order: list[str] = []
        self.approval_puts = 0
        self.conflicts_to_inject = 0
        self.evictions: list[tuple[str, str, int]] = []  # (namespace, pod, HTTP status answered)
        self.watch_generation = 0
        self.watches_served = 0
        self.closed = False
        self._in_controllers = False
        # A client without the admin certificate may still bring a bearer token; with neither it gets 401.
        tls = serve_tls(workdir, _Handler, self, verify=ssl.CERT_OPTIONAL)
        self.httpd, self.url, self.kubeconfig, self.ca_pem = tls
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
            found = [(key[1:], o) for key, o in self.objects.items()
                     if key[0] == k and (namespace is None or key[1] == namespace)]
            return [copy.deepcopy(o) for _, o in sorted(found, key=lambda i: i[0])]

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
                self.rv += 1  # a deletion is a change of its own, as watchers resuming from a version see it
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

    def _event(self, k: Kind | None, kind: str, obj: Obj) -> None:
        self.events.append((self.rv, k, kind, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _touch(self, key: tuple[Kind, str, str]) -> None:
        """Another writer changed the object: its resourceVersion moves on (a MODIFIED event)."""
        self.rv += 1
        self.objects[key]["metadata"]["resourceVersion"] = str(self.rv)
        self._event(key[0], "MODIFIED", self.objects[key])

    # --- CSRs, Nodes and an installed cluster, for tests ----------------------------
    @property
    def csrs(self) -> dict[str, Obj]:
        """CSRs by name (the stored objects)."""
        k = self.kind("certificates.k8s.io/v1", "CertificateSigningRequest")
        with self.lock:  # the server's threads write to the store meanwhile
            return {name: o for (kk, _, name), o in self.objects.items() if kk == k}

    @property
    def nodes(self) -> dict[str, Obj]:
        """Nodes by name (the stored objects)."""
        k = self.kind("v1", "Node")
        with self.lock:
            return {name: o for (kk, _, name), o in self.objects.items() if kk == k}

    @property
    def pods(self) -> dict[tuple[str, str], Obj]:
        """Pods by (namespace, name) (the stored objects)."""
        k = self.kind("v1", "Pod")
        with self.lock:
            return {(ns, name): o for (kk, ns, name), o in self.objects.items() if kk == k}

    def add_csr(self, name: str, request_pem: bytes, *, signer: str, username: str,
                groups: Sequence[str], usages: Sequence[str]) -> None:
        """Create a pending CSR as the kubelet (or an attacker) would."""
        with self.lock:
            self.put({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                      "metadata": {"name": name},
                      "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": signer,
                               "username": username, "groups": [*groups], "usages": [*usages], "uid": "1"},
                      "status": {}}, manager="kube-apiserver")
            self.created_at[name] = time.monotonic()

    def add_node(self, name: str, *, ready: bool | None = None, labels: dict[str, str] | None = None) -> None:
        """Register a Node (what a kubelet does once its client CSR is approved).

        `ready` sets its Ready condition as the kubelet reports it (None: no conditions yet).
        """
        st: Obj = {}
        if ready is not None:
            st["conditions"] = [{
                "type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready else "container runtime "
                "network not ready", "lastHeartbeatTime": now(), "lastTransitionTime": now()}]
        self.put({"apiVersion": "v1", "kind": "Node",
                  "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                  "spec": {}, "status": st}, manager="kubelet")

    def set_cluster_version(self, *, available: bool, version: str = "4.16.3") -> None:
        """ClusterVersion `version` as the CVO reports it: Available True once installed.

        An existing ClusterVersion (a GPU cluster's) keeps its other fields.
        """
        cond = {"type": "Available", "status": "True" if available else "False",
                "lastTransitionTime": now(),
                "message": f"Done applying {version}" if available else "Working towards " + version}
        with self.lock:
            cv = self.get("config.openshift.io/v1", "ClusterVersion", "version") or {
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"clusterID": "00000000-0000-4000-8000-000000000001"}}
            st = cv.setdefault("status", {})
            st["conditions"] = [c for c in st.get("conditions", []) if c.get("type") != "Available"] + [cond]
            st["desired"] = {**st.get("desired", {}), "version": version}
            self.put(cv, manager="cluster-version-operator")

    def add_secret(self, namespace: str, name: str, data: dict[str, bytes]) -> None:
        """A Secret as the API returns it: each value base64 in `data`."""
        self.put({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": name, "namespace": namespace},
                  "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})

    def add_pod(self, namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None,
                owner: str | None = None, empty_dir: bool = False) -> None:
        """A running Pod bound to `node`; `owner` the kind of its controller (ReplicaSet, DaemonSet)."""
        meta: Obj = {"name": name, "namespace": namespace, "labels": labels or {}}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                        "uid": f"uid-{name}-owner", "controller": True}]
        volumes = [{"name": "scratch", "emptyDir": {}}] if empty_dir else []
        mounts = [{"name": "scratch", "mountPath": "/scratch"}] if empty_dir else []
        self.put({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                  "spec": {"nodeName": node, "volumes": volumes,
                           "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                           "volumeMounts": mounts}]},
                  "status": {"phase": "Running"}})

    def add_pdb(self, namespace: str, name: str, match_labels: dict[str, str], *,
                disruptions_allowed: int) -> None:
        """A PodDisruptionBudget as the disruption controller keeps it (status.disruptionsAllowed)."""
        self.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": name, "namespace": namespace},
                  "spec": {"selector": {"matchLabels": match_labels}},
                  "status": {"disruptionsAllowed": disruptions_allowed}})

    def add_raw_event(self, line: bytes) -> None:
        """Send `line` as-is to every watch, as one event line (a malformed event, for tests)."""
        with self.lock:
            self.rv += 1
            self._event(None, "RAW", {"raw": line})

    def decide_directly(self, name: str, condition: str = "Approved") -> None:
        """Approve (or deny) a CSR as another approver, an admin or an earlier run did."""
        with self.lock:
            cur = copy.deepcopy(self.csrs[name])
            cur["status"]["conditions"] = [{"type": condition, "status": "True", "reason": "Other",
                                            "lastUpdateTime": now(), "lastTransitionTime": now()}]
            if condition == "Approved":
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            self.put(cur, manager="other-approver")

    def touch_csr(self, name: str) -> None:
        """Another writer changed the CSR: its resourceVersion moves on."""
        with self.lock:
            self._touch((self.kind("certificates.k8s.io/v1", "CertificateSigningRequest"), "", name))

    def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart does."""
        with self.lock:
            self.watch_generation += 1
            self.changed.notify_all()

    def conditions(self, name: str) -> Sequence[str]:
        """The condition types of one CSR."""
        with self.lock:
            return [c["type"] for c in self.csrs[name]["status"].get("conditions", [])]

    def approved(self) -> set[str]:
        """Names of every approved CSR."""
        with self.lock:
            return set(self.approved_at)

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
            for plugin in self.admission:
                refused = plugin(k, ns, body)
                if refused is not None:
                    return refused
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
    def approve(self, name: str, body: Obj) -> tuple[int, Obj]:
        """PUT .../certificatesigningrequests/<name>/approval: status.conditions replaced, nothing else."""
        k = self.kind("certificates.k8s.io/v1", "CertificateSigningRequest")
        with self.lock:
            self.approval_puts += 1
            old = self.objects.get((k, "", name))
            if old is None:
                return 404, k.not_found(name)
            if self.conflicts_to_inject > 0:
                self.conflicts_to_inject -= 1
                self._touch((k, "", name))
            # No resourceVersion is an unconditional update (pkg/registry/certificates/certificates/
            # strategy.go: AllowUnconditionalUpdate is true); a stale one is a conflict.
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent and sent != old["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", "Operation cannot be fulfilled on certificatesigning"
                                   f'requests.certificates.k8s.io "{name}": the object has been modified;'
                                   " please apply your changes to the latest version and try again")
            conds = list(body.get("status", {}).get("conditions") or [])
            types = [c.get("type") for c in conds]
            if len(types) != len(set(types)) or {"Approved", "Denied"} <= set(types):
                return 422, status(422, "Invalid", f'CertificateSigningRequest.certificates.k8s.io "{name}" '
                                   "is invalid: status.conditions: duplicate or conflicting conditions")
            for c in conds:
                c.setdefault("lastUpdateTime", now())
                c.setdefault("lastTransitionTime", c["lastUpdateTime"])
            new = copy.deepcopy(old)
            new["status"]["conditions"] = conds
            self._store((k, "", name), new, old, "kube-apiserver")
            if "Approved" in types and name not in self.approved_at:
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            out = copy.deepcopy(self.objects[(k, "", name)])
        self.run_controllers()
        return 200, out

    def evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        """The Eviction subresource (pkg/registry/core/pod/storage/eviction.go), answered and recorded."""
        with self.lock:
            code, doc = self._evict(namespace, name)
            self.evictions.append((namespace, name, code))
        self.run_controllers()
        return code, doc

    def _evict(self, namespace: str, name: str) -> tuple[int, Obj]:
        pod = self.get("v1", "Pod", name, namespace)
        if pod is None:
            return 404, self.kind("v1", "Pod").not_found(name)
        budgets = [] if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") else [
            b for b in self.list("policy/v1", "PodDisruptionBudget", namespace)
            if _matches(b["spec"].get("selector") or {}, pod["metadata"].get("labels") or {})]
        if len(budgets) > 1:
            return 500, status(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                               "which the eviction subresource does not support.")
        if budgets:
            budget = budgets[0]
            allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
            if allowed < 1:
                return 429, status(429, "TooManyRequests", "Cannot evict pod as it would violate "
                                   "the pod's disruption budget.")
            self.set_status("policy/v1", "PodDisruptionBudget", budget["metadata"]["name"], namespace,
                            {**budget["status"], "disruptionsAllowed": allowed - 1})
        self.delete("v1", "Pod", name, namespace)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

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
            elif ctype.startswith(("application/merge-patch+json", "application/strategic-merge-patch+json")):
                if old is None:
                    return 404, k.not_found(name)
                patch = json.loads(body or b"{}")
                if ctype.startswith("application/strategic-merge-patch") and _strategic_only(patch):
                    # Without lists or $-directives a strategic merge patch is a JSON merge patch
                    # (kubernetes.io, "Update API Objects in Place Using kubectl patch"): `kubectl
                    # cordon`'s is. Merge keys are not modelled: refuse rather than merge wrongly.
                    return 415, status(415, "UnsupportedMediaType", "this fake applies a strategic merge "
                                       "patch only without lists or $-directives")
                new = _merge(old, patch)
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
    """Events of one kind (and namespace) after resourceVersion `since`, and raw lines for every watch."""
    return [
        (rv, kind, o)
        for rv, kk, kind, o in fake.events
        if rv > since and (kk is None or (kk == k and (not ns or o["metadata"].get("namespace", "") == ns)))
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
        """A request without credentials gets 401; a test's tamper answers instead of the server."""
        return not self._authenticated() or send_tampered(self, self.fake.tamper, self.command)

    def _authenticated(self) -> bool:
        if self.connection.getpeercert():  # type: ignore[attr-defined]
            return True
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme == "Bearer" and (token in self.fake.user_tokens or token in self.fake.tokens):
            return True
        self._body()
        self._send(401, status(401, "Unauthorized", "Unauthorized"))
        return False

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
            self._body()
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
        path = urlsplit(self.path).path
        if path == "/version":
            self._send(200, {"major": "1", "minor": "29", "gitVersion": "v1.29.6+fake"})
            return
        with self.fake.lock:
            doc = discovery(path, [k for k in KINDS if k not in self.fake.unserved])
        if doc is not None:
            self._send(200, doc)
            return
        if route is None:
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        k, ns, name, sub = route
        if name is None and q.get("watch") in ("true", "1"):
            self._watch(k, ns, q)
        elif name is None:
            self._list(k, ns, q)
        elif sub == "log" and k.kind == "Pod":
            self._log(ns, name, q)
        else:
            with self.fake.lock:
                obj = copy.deepcopy(self.fake.objects.get((k, ns, name)))
                rv = str(self.fake.rv)
            if obj is None:
                self._send(404, k.not_found(name))
            elif TABLE_ACCEPT in self.headers.get("Accept", ""):
                self._send(200, table(k.kind, [obj], rv))
            else:
                self._send(200, obj)

    def _list(self, k: Kind, ns: str, q: dict[str, str]) -> None:
        terms = _field_terms(q.get("fieldSelector", ""))
        if isinstance(terms, str):
            self._send(400, status(400, "BadRequest", terms))
            return
        with self.fake.lock:
            items = [
                copy.deepcopy(o)
                for (kk, n, _), o in self.fake.objects.items()
                if kk == k
                and (not ns or n == ns)
                and _selects(q.get("labelSelector", ""), o["metadata"].get("labels") or {})
                and _field_selects(terms, o)
            ]
            rv = str(self.fake.rv)
        if TABLE_ACCEPT in self.headers.get("Accept", ""):
            self._send(200, table(k.kind, items, rv))
            return
        self._send(200, {"apiVersion": k.api_version, "kind": f"{k.kind}List",
                         "metadata": {"resourceVersion": rv}, "items": items})

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
            fake.watches_served += 1
            gen = fake.watch_generation
            if since == 0:  # no version: the current state as ADDED events, then changes
                backlog = [
                    (int(o["metadata"]["resourceVersion"]), "ADDED", copy.deepcopy(o))
                    for (kk, n, _), o in fake.objects.items()
                    if kk == k and (not ns or n == ns)
                ]
                since = fake.rv
            else:
                backlog = []

        def over() -> bool:
            return fake.closed or fake.watch_generation != gen or time.monotonic() >= deadline

        try:
            while True:
                for rv, kind, obj in backlog:
                    line = (obj["raw"] if kind == "RAW"
                            else json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    since = max(since, rv)
                self.wfile.flush()
                with fake.lock:
                    while not (_fresh(fake, k, ns, since) or over()):
                        fake.changed.wait(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
                    if over():
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
        if route is not None and route[0].kind == "Pod" and route[2] is not None and route[3] == "eviction":
            self._eviction(route[1], route[2])
            return
        if route is None or route[2] is not None:
            self._body()
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return
        k, ns, _, _ = route
        code, doc = self.fake.create(k, ns, json.loads(self._body() or b"{}"))
        self._send(code, doc)

    def _eviction(self, ns: str, name: str) -> None:
        body = json.loads(self._body() or b"{}")
        if body.get("kind") != "Eviction" or body.get("apiVersion") not in ("policy/v1", "policy/v1beta1"):
            self._send(400, status(400, "BadRequest", f"not a policy/v1 Eviction: {body.get('kind')}"))
        elif body.get("metadata", {}).get("name") != name:
            self._send(400, status(400, "BadRequest", "name in URL does not match name in Eviction object"))
        else:
            self._send(*self.fake.evict(ns, name))

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
        raw, ctype = self._body(), self.headers.get("Content-Type", "application/json")
        if ctype.startswith("application/vnd.kubernetes.protobuf") and sub == "approval":
            body = decode_csr_approval(raw)  # what kubectl sends for `certificate approve`
        elif ctype.startswith("application/json"):
            body = json.loads(raw or b"{}")
        else:
            self._send(415, status(415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format: {ctype}"))
            return
        if k.kind == "CertificateSigningRequest" and sub == "approval":
            self._send(*self.fake.approve(name, body))
            return
        with self.fake.lock:
            old = self.fake.objects.get((k, ns, name))
            if old is None:
                self._send(404, k.not_found(name))
                return
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
        self._body()  # DeleteOptions (kubectl sends them): read, or the next request starts inside them
        k, ns, name, _ = route
        with self.fake.lock:
            obj = self.fake.objects.get((k, ns, name))
            if obj is None:
                self._send(404, k.not_found(name))
                return
            self.fake.delete(k.api_version, k.kind, name, ns)
        self._send(200, obj)
