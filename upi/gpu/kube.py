"""The cluster as the GPU flow sees it: plain dicts in and out, over the bounded API reader.

Every request goes through `upi.csr.api.Api`, as approve-csr's do: an answer
is read up to its size cap and within an overall deadline, and one that is
too large, too slow or not a Kubernetes object is an error naming the
object. Writes are server-side apply with field manager `upi` (PATCH
application/apply-patch+yaml, the body JSON, which is YAML), merge patches
and creates. Every failure is a ClusterError naming the object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from upi.csr.api import Api, ApiResponseError, ApiStatus
from upi.csr.connect import Connection
from upi.errors import ClusterError

Obj = dict[str, Any]
T = TypeVar("T")
FIELD_MANAGER = "upi"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"

# (apiVersion, kind) -> (plural, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Secret"): ("secrets", True),  # day 2 reads the worker ignition (upi.day2.cluster)
    ("config.openshift.io/v1", "ClusterVersion"): ("clusterversions", False),
    ("imageregistry.operator.openshift.io/v1", "Config"): ("configs", False),
    ("image.openshift.io/v1", "ImageStream"): ("imagestreams", True),
    ("operators.coreos.com/v1alpha1", "CatalogSource"): ("catalogsources", True),
    ("operators.coreos.com/v1alpha1", "Subscription"): ("subscriptions", True),
    ("operators.coreos.com/v1alpha1", "InstallPlan"): ("installplans", True),
    ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"): ("clusterserviceversions", True),
    ("operators.coreos.com/v1", "OperatorGroup"): ("operatorgroups", True),
    ("packages.operators.coreos.com/v1", "PackageManifest"): ("packagemanifests", True),
    ("nfd.openshift.io/v1", "NodeFeatureDiscovery"): ("nodefeaturediscoveries", True),
    ("nvidia.com/v1", "ClusterPolicy"): ("clusterpolicies", False),
    # GPUDirect RDMA (upi.gpu.rdma): the NVIDIA Network Operator's kinds, all cluster-scoped.
    ("mellanox.com/v1alpha1", "NicClusterPolicy"): ("nicclusterpolicies", False),
    ("mellanox.com/v1alpha1", "IPoIBNetwork"): ("ipoibnetworks", False),
    ("mellanox.com/v1alpha1", "MacvlanNetwork"): ("macvlannetworks", False),
    # The GPU pool (upi.gpu.pool): the machine config operator's kinds, the Node Tuning Operator's profile.
    ("machineconfiguration.openshift.io/v1", "MachineConfigPool"): ("machineconfigpools", False),
    ("machineconfiguration.openshift.io/v1", "MachineConfig"): ("machineconfigs", False),
    ("machineconfiguration.openshift.io/v1", "KubeletConfig"): ("kubeletconfigs", False),
    ("performance.openshift.io/v2", "PerformanceProfile"): ("performanceprofiles", False),
    # A disconnected cluster (upi.mirror.day2): oc-mirror's mirror sets, the default sources switch.
    ("config.openshift.io/v1", "ImageDigestMirrorSet"): ("imagedigestmirrorsets", False),
    ("config.openshift.io/v1", "ImageTagMirrorSet"): ("imagetagmirrorsets", False),
    ("config.openshift.io/v1", "OperatorHub"): ("operatorhubs", False),
    # The GPU metrics proof (upi.gpu.metrics): the querier's route, the ingress CA, a token for it.
    ("route.openshift.io/v1", "Route"): ("routes", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
}


def path(api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
         sub: str | None = None) -> str:
    """The REST path of a kind's collection (no name) or of one object (and a subresource)."""
    plural, namespaced = KINDS[(api_version, kind)]
    out = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if namespaced and namespace:
        out += f"/namespaces/{quote(namespace, safe='')}"
    out += f"/{plural}"
    if name is not None:
        out += f"/{quote(name, safe='')}"
    return out + (f"/{sub}" if sub else "")


def describe(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    """`Kind ns/name`, the way a diagnosis names an object."""
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


@dataclass(frozen=True)
class Applied:
    """One server-side apply: the object as stored, and whether it changed."""

    obj: Obj
    changed: bool
    created: bool


# The digest of the object upi applied, carried by the object: what the next run compares with.
APPLIED = "upi.openshift.io/applied"


def stamped(obj: Obj) -> Obj:
    """The object with the digest of its own content (without the digest) as an annotation."""
    meta = dict(obj["metadata"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED}
    bare = {**obj, "metadata": {**meta, "annotations": annotations} if annotations else
            {k: v for k, v in meta.items() if k != "annotations"}}
    digest = hashlib.sha256(json.dumps(bare, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return {**obj, "metadata": {**meta, "annotations": {**annotations, APPLIED: digest[:32]}}}


def holds(live: Any, want: Any) -> bool:
    """Whether the live object has every field of `want` with the same value (lists equal as a whole)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(k in live and holds(live[k], v) for k, v in want.items())
    return bool(live == want)


class Kube:
    """Reads and writes the cluster as plain dicts; every failure is a ClusterError."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.api = Api(conn.http)

    def _call(self, fn: Callable[[], T], what: str, *, missing_ok: bool = False) -> T | None:
        import httpx2

        try:
            return fn()
        except ApiStatus as exc:
            if missing_ok and exc.code == 404:
                return None
            raise ClusterError(f"{what}: {exc.message or f'HTTP {exc.code}'}") from None
        except ApiResponseError as exc:
            # Too large, too slow, not JSON: the reader's reason, after the object it was about.
            raise ClusterError(f"{what}: the API at {self.conn.server} answered badly: {exc}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise ClusterError(f"cannot reach the API at {self.conn.server}: {exc}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            why = str(exc)[:200] or type(exc).__name__
            raise ClusterError(f"{what}: the API at {self.conn.server} answered something that is "
                               f"not a Kubernetes object ({why})") from None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it does not exist."""
        url = path(api_version, kind, namespace, name)
        return self._call(lambda: _plain(self.api.request("GET", url)),
                          describe(api_version, kind, name, namespace), missing_ok=True)

    def find(
        self, api_version: str, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[Obj]:
        """Every object of a kind (in a namespace, matching labels), read page by page."""
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())} if labels else None
        url = path(api_version, kind, namespace)
        found = self._call(lambda: [_plain(o) for o in self.api.list(url, params=params)[1]], f"list {kind}")
        return found or []

    def apply(self, obj: Obj) -> Applied:
        """Server-side apply as field manager `upi`; `changed` says whether anything moved.

        An object that already holds what upi applied last (the digest it carries) with every
        value still in place is not sent again: a second run writes nothing. A digest that
        differs (upi now applies other fields) goes through the apply, which also drops the
        fields upi applied before and no longer does.
        """
        meta = obj["metadata"]
        api_version, kind, name, ns = obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
        obj = stamped(obj)
        before = self.get(api_version, kind, name, ns)
        if before is not None and holds(before, obj):
            return Applied(before, changed=False, created=False)
        out = self._call(
            lambda: _plain(self.api.request("PATCH", path(api_version, kind, ns, name), body=obj,
                                            params={"fieldManager": FIELD_MANAGER}, content_type=APPLY)),
            f"apply {describe(api_version, kind, name, ns)}",
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        old_rv = (before or {}).get("metadata", {}).get("resourceVersion")
        return Applied(out, changed=old_rv != out["metadata"].get("resourceVersion"), created=before is None)

    def merge_patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: Obj,
                    *, manager: str = FIELD_MANAGER) -> Obj:
        """A JSON merge patch (InstallPlan approval: one field, owned by whoever approves)."""
        out = self._call(
            lambda: _plain(self.api.request("PATCH", path(api_version, kind, namespace, name), body=patch,
                                            params={"fieldManager": manager}, content_type=MERGE)),
            f"patch {describe(api_version, kind, name, namespace)}",
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        return out

    def create(self, obj: Obj) -> Obj:
        """Create an object (the validation pods: each run gets a fresh one)."""
        meta = obj["metadata"]
        ns = meta.get("namespace")
        what = describe(obj["apiVersion"], obj["kind"], meta.get("name") or meta.get("generateName", ""), ns)
        out = self._call(
            lambda: _plain(self.api.request("POST", path(obj["apiVersion"], obj["kind"], ns), body=obj,
                                            params={"fieldManager": FIELD_MANAGER})),
            f"create {what}",
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        return out

    def create_sub(self, api_version: str, kind: str, name: str, namespace: str | None, sub: str,
                   body: Obj) -> Obj:
        """POST to an object's subresource (a ServiceAccount's `token`: a TokenRequest); the answer."""
        what = f"{sub} of {describe(api_version, kind, name, namespace)}"
        out = self._call(
            lambda: _plain_answer(self.api.request("POST", path(api_version, kind, namespace, name, sub),
                                                   body=body)),
            what,
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        return out

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object; gone already is fine."""
        self._call(lambda: self.api.request("DELETE", path(api_version, kind, namespace, name)),
                   f"delete {describe(api_version, kind, name, namespace)}", missing_ok=True)

    def logs(self, pod: str, namespace: str, container: str | None = None, tail: int = 20) -> list[str]:
        """The last lines of a container's log ([] when it has none yet, or it cannot be read)."""
        import httpx2

        params = {"tailLines": str(tail), **({"container": container} if container else {})}
        try:
            raw = self.api.raw("GET", path("v1", "Pod", namespace, pod, "log"), params=params)
        except (ClusterError, httpx2.HTTPError, OSError):  # a diagnosis without its log is still one
            return []
        return raw.decode(errors="replace").splitlines()


def _plain_answer(obj: Any) -> Obj:
    """A subresource's answer: a JSON object (a TokenRequest has metadata, but need not)."""
    if not isinstance(obj, dict):
        raise TypeError("not a JSON object")
    return obj


def _plain(obj: Any) -> Obj:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise TypeError("not an object with metadata")
    return obj
