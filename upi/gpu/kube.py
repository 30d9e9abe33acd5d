"""The cluster as the GPU flow sees it: plain dicts in and out, over lightkube.

Every kind is a lightkube generic resource, so the flow handles CRD objects
(Subscription, ClusterPolicy, ...) and core ones alike; writes go through
server-side apply with field manager `upi`. API errors become ClusterError
naming the object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from upi.csr.connect import Connection
from upi.errors import ClusterError

Obj = dict[str, Any]
T = TypeVar("T")
FIELD_MANAGER = "upi"

# (apiVersion, kind) -> (plural, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
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
}


@functools.cache
def resource(api_version: str, kind: str) -> Any:
    """The lightkube generic resource class of a kind upi uses."""
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    plural, namespaced = KINDS[(api_version, kind)]
    group, _, version = api_version.rpartition("/")
    make = create_namespaced_resource if namespaced else create_global_resource
    return make(group, version, kind, plural)


def describe(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    """`Kind ns/name`, the way a diagnosis names an object."""
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


@dataclass(frozen=True)
class Applied:
    """One server-side apply: the object as stored, and whether it changed."""

    obj: Obj
    changed: bool
    created: bool


class Kube:
    """Reads and writes the cluster as plain dicts; every failure is a ClusterError."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _call(self, fn: Callable[[], T], what: str, *, missing_ok: bool = False) -> T | None:
        import httpx2
        from lightkube import ApiError

        try:
            return fn()
        except ApiError as exc:
            if missing_ok and exc.status.code == 404:
                return None
            raise self._error(exc, what) from None
        except (httpx2.HTTPError, OSError) as exc:
            raise ClusterError(f"cannot reach the API at {self.conn.server}: {exc}") from None
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            # Garbage, truncated or absurdly nested JSON (msgspec's errors are ValueErrors).
            why = str(exc)[:200] or type(exc).__name__
            raise ClusterError(f"{what}: the API at {self.conn.server} answered something that is "
                               f"not a Kubernetes object ({why})") from None

    def _error(self, exc: Exception, what: str) -> ClusterError:
        status = getattr(exc, "status", None)
        message = getattr(status, "message", None) or str(exc)
        return ClusterError(f"{what}: {message}")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it does not exist."""
        res = resource(api_version, kind)
        obj = self._call(
            lambda: _plain(self.conn.api.get(res, name, namespace=namespace)),
            describe(api_version, kind, name, namespace),
            missing_ok=True,
        )
        return obj

    def find(
        self, api_version: str, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[Obj]:
        """Every object of a kind (in a namespace, matching labels)."""
        res = resource(api_version, kind)
        found = self._call(
            lambda: [_plain(o) for o in self.conn.api.list(res, namespace=namespace, labels=labels)],
            f"list {kind}",
        )
        return found or []

    def apply(self, obj: Obj) -> Applied:
        """Server-side apply as field manager `upi`; `changed` says whether anything moved."""
        from lightkube.codecs import from_dict

        meta = obj["metadata"]
        what = describe(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        before = self.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        resource(obj["apiVersion"], obj["kind"])  # registers the kind for from_dict
        out = self._call(
            lambda: _plain(self.conn.api.apply(from_dict(obj), field_manager=FIELD_MANAGER)), f"apply {what}"
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        old_rv = (before or {}).get("metadata", {}).get("resourceVersion")
        return Applied(out, changed=old_rv != out["metadata"].get("resourceVersion"), created=before is None)

    def merge_patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: Obj,
                    *, manager: str = FIELD_MANAGER) -> Obj:
        """A JSON merge patch (InstallPlan approval: one field, owned by whoever approves)."""
        from lightkube.types import PatchType

        res = resource(api_version, kind)
        out = self._call(
            lambda: _plain(self.conn.api.patch(
                res, name, patch, namespace=namespace, patch_type=PatchType.MERGE,
                field_manager=manager)),
            f"patch {describe(api_version, kind, name, namespace)}",
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        return out

    def create(self, obj: Obj) -> Obj:
        """Create an object (the validation pods: each run gets a fresh one)."""
        from lightkube.codecs import from_dict

        resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        what = describe(
            obj["apiVersion"],
            obj["kind"],
            meta.get("name") or meta.get("generateName", ""),
            meta.get("namespace"),
        )
        out = self._call(
            lambda: _plain(self.conn.api.create(from_dict(obj), field_manager=FIELD_MANAGER)),
            f"create {what}",
        )
        assert out is not None  # noqa: S101 - only missing_ok calls return None
        return out

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object; gone already is fine."""
        res = resource(api_version, kind)
        self._call(
            lambda: self.conn.api.delete(res, name, namespace=namespace),
            f"delete {describe(api_version, kind, name, namespace)}",
            missing_ok=True,
        )

    def logs(self, pod: str, namespace: str, container: str | None = None, tail: int = 20) -> list[str]:
        """The last lines of a container's log ([] when it has none yet)."""
        from lightkube import ApiError

        try:
            return list(
                self.conn.api.log(
                    pod, namespace=namespace, container=container, tail_lines=tail, newlines=False
                )
            )
        except ApiError:
            return []


def _plain(obj: Any) -> Obj:
    to_dict = getattr(obj, "to_dict", None)
    out: Obj = to_dict() if to_dict is not None else dict(obj)
    if not isinstance(out.get("metadata", {}), dict):
        raise TypeError("metadata is not an object")
    return out
