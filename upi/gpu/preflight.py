"""Pre-flight: what must hold before NFD and the GPU Operator can work, each with its fix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from upi.errors import ClusterError
from upi.gpu.kube import Kube
from upi.gpu.objects import GPU_PACKAGE, NFD_PACKAGE
from upi.inventory.gpu import BROKEN_VERSIONS, settings
from upi.inventory.model import Inventory

OLM = "operators.coreos.com/v1alpha1"


@dataclass(frozen=True)
class Check:
    """One pre-flight check: its name, whether it passed, what was seen, the one-line fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def cluster_version(kube: Kube) -> str | None:
    """The cluster's OpenShift version (ClusterVersion `version`), if it says."""
    cv = kube.get("config.openshift.io/v1", "ClusterVersion", "version")
    version = ((cv or {}).get("status") or {}).get("desired", {}).get("version")
    return str(version) if version else None


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _api(kube: Kube, inv: Inventory) -> Check:
    version = cluster_version(kube)
    return Check("API reachable", True, f"{kube.conn.server}, OpenShift {version or 'unknown'}")


def _version(kube: Kube, inv: Inventory) -> Check:
    version = cluster_version(kube) or inv.cluster.openshift_version
    if version in BROKEN_VERSIONS:
        return Check(
            "OpenShift version",
            False,
            f"{version}: a crun change breaks every GPU Operator version",
            "update the cluster to another z-stream (oc adm upgrade) before installing GPUs",
        )
    return Check("OpenShift version", True, version)


def _nodes(kube: Kube, inv: Inventory) -> Check:
    bad = []
    for node in inv.nodes:
        if not node.gpu:
            continue
        obj = kube.get("v1", "Node", node.name)
        if obj is None:
            bad.append(f"{node.name} missing")
            continue
        conds = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
        if conds.get("Ready") != "True":
            bad.append(f"{node.name} not Ready")
    names = [n.name for n in inv.nodes if n.gpu]
    if bad:
        return Check(
            "GPU nodes Ready",
            False,
            "; ".join(bad),
            "join and approve the node first: upi approve-csr INVENTORY --once (then oc get nodes)",
        )
    return Check("GPU nodes Ready", True, ", ".join(names))


def _catalogs(kube: Kube, inv: Inventory) -> Check:
    src = settings(inv).catalog_sources
    bad = []
    for name in (src.nfd, src.gpu_operator):
        obj = kube.get(OLM, "CatalogSource", name, src.namespace)
        state = ((obj or {}).get("status") or {}).get("connectionState", {}).get("lastObservedState")
        if obj is None:
            bad.append(f"{src.namespace}/{name} missing")
        elif state != "READY":
            bad.append(f"{src.namespace}/{name} is {state or 'not connected'}")
    if bad:
        return Check(
            "catalog sources",
            False,
            "; ".join(bad),
            "enable the default catalogs (oc patch operatorhub cluster) or set gpu.catalog_sources "
            "to your mirrored ones",
        )
    return Check("catalog sources", True, f"{src.nfd}, {src.gpu_operator} READY")


def _registry(kube: Kube, inv: Inventory) -> Check:
    version = cluster_version(kube) or inv.cluster.openshift_version
    cfg = kube.get("imageregistry.operator.openshift.io/v1", "Config", "cluster")
    spec = (cfg or {}).get("spec") or {}
    state = spec.get("managementState", "")
    missing = not spec.get("storage") or state == "Removed"
    from upi.gpu.precompiled import driver_mode

    if missing and _version_tuple(version) >= (4, 15) and driver_mode(inv) != "precompiled":
        return Check(
            "image registry storage",
            False,
            f"managementState {state or 'unset'}, no storage: the driver toolkit build stalls "
            "(no build-dockercfg secrets)",
            "configure storage: oc patch configs.imageregistry.operator.openshift.io cluster "
            '--type merge -p \'{"spec":{"managementState":"Managed","storage":{"pvc":{}}}}\'',
        )
    seen = (
        f"{state}, storage {', '.join(spec['storage'])}" if not missing else f"none; not needed on {version}"
    )
    return Check("image registry storage", True, seen)


def _driver_toolkit(kube: Kube, inv: Inventory) -> Check:
    from upi.gpu.precompiled import driver_mode

    if driver_mode(inv) == "precompiled":
        return Check("driver-toolkit imagestream", True, "not needed: precompiled driver images")
    if kube.get("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift") is None:
        return Check(
            "driver-toolkit imagestream",
            False,
            "openshift/driver-toolkit is missing",
            "mirror the driver-toolkit image (disconnected) or restore the imagestream in namespace "
            "openshift",
        )
    return Check("driver-toolkit imagestream", True, "openshift/driver-toolkit present")


def _packages(kube: Kube, inv: Inventory) -> Check:
    src = settings(inv).catalog_sources
    missing = [
        p
        for p in (NFD_PACKAGE, GPU_PACKAGE)
        if kube.get("packages.operators.coreos.com/v1", "PackageManifest", p, src.namespace) is None
    ]
    if missing:
        return Check(
            "operator packages",
            False,
            f"{', '.join(missing)} not in any catalog",
            f"check the catalog sources hold the packages (oc get packagemanifests -n {src.namespace})",
        )
    return Check("operator packages", True, f"{NFD_PACKAGE}, {GPU_PACKAGE}")


def _precompiled(kube: Kube, inv: Inventory) -> Check:
    from upi.gpu.precompiled import NodeKernel, driver_mode, missing_tags, os_tag

    if driver_mode(inv) != "precompiled":
        return Check("precompiled driver images", True, "not used (the driver is built on the nodes)")
    nodes = []
    for node in inv.nodes:
        obj = kube.get("v1", "Node", node.name) if node.gpu else None
        kernel = ((obj or {}).get("status") or {}).get("nodeInfo", {}).get("kernelVersion")
        if obj is not None and kernel:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            nodes.append(NodeKernel(node.name, str(kernel), os_tag(inv, labels)))
    problems = missing_tags(inv, nodes)
    if problems:
        return Check("precompiled driver images", False, "; ".join(problems),
                     "push (or mirror) the precompiled driver image for each node's kernel, or set "
                     "gpu.precompiled.version to a driver branch the registry holds (docs/gpu.md)")
    return Check("precompiled driver images", True,
                 ", ".join(f"{n.node}: {n.kernel}" for n in nodes) or "no GPU node reports a kernel yet")


CHECKS: list[tuple[str, Callable[[Kube, Inventory], Check]]] = [
    ("API reachable", _api),
    ("OpenShift version", _version),
    ("GPU nodes Ready", _nodes),
    ("catalog sources", _catalogs),
    ("operator packages", _packages),
    ("image registry storage", _registry),
    ("driver-toolkit imagestream", _driver_toolkit),
    ("precompiled driver images", _precompiled),
]


def preflight(kube: Kube, inv: Inventory) -> list[Check]:
    """Every check; an unreachable API ends the list at the first one."""
    out = []
    for name, check in CHECKS:
        try:
            out.append(check(kube, inv))
        except ClusterError as exc:
            out.append(
                Check(
                    name,
                    False,
                    str(exc),
                    "check the kubeconfig and that the API answers: oc --kubeconfig K get nodes",
                )
            )
            if check is _api:
                break
    return out
