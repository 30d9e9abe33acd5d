"""The Kubernetes objects of GPU day 2, built once for `upi render` and `upi gpu`.

Facts: ../shared/reference/gpu-day2.md. The NodeFeatureDiscovery and the
ClusterPolicy start from the operators' own CSV `alm-examples` when a cluster
is there to read them from; render, which has no cluster, builds the
NodeFeatureDiscovery from what the inventory alone says.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

from upi.inventory.gpu import GpuSettings, merge, settings
from upi.inventory.model import Inventory

Obj = dict[str, Any]

NFD_NAMESPACE = "openshift-nfd"
NFD_PACKAGE = "nfd"
NFD_INSTANCE = "nfd-instance"
GPU_PACKAGE = "gpu-operator-certified"
GPU_OPERATOR_GROUP = "nvidia-gpu-operator-group"
CLUSTER_POLICY = "gpu-cluster-policy"
MONITORING_LABEL = "openshift.io/cluster-monitoring"
# NFD's label for an NVIDIA PCI device, by deviceLabelFields: [vendor] gives the
# first, [class, vendor] one of the others. The GPU Operator accepts all three.
PCI_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
# PCI classes NFD reports: network (0200), display incl. 3D controllers (03), accelerators (12).
PCI_CLASSES = ["0200", "03", "12"]
LABEL_FIELDS = ["vendor"]


@dataclass(frozen=True)
class Package:
    """One operator installed through OLM."""

    name: str
    namespace: str
    group: str
    source: str
    channel: str | None
    approval: str


def packages(gpu: GpuSettings, operator_channel: str | None = None) -> tuple[Package, Package]:
    """NFD (automatic upgrades, as its docs say) then the GPU Operator (manual: deliberate)."""
    src = gpu.catalog_sources
    return (
        Package(NFD_PACKAGE, NFD_NAMESPACE, f"{NFD_NAMESPACE}-group", src.nfd, gpu.nfd_channel, "Automatic"),
        Package(GPU_PACKAGE, gpu.operator_namespace, GPU_OPERATOR_GROUP, src.gpu_operator,
                operator_channel or gpu.operator_channel, "Manual"),
    )


MANAGED_BY = {"app.kubernetes.io/managed-by": "upi"}  # on what upi creates for its own use


def own_namespace(name: str) -> Obj:
    """A namespace upi creates for its own objects (the RDMA test's, the fabric networks')."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED_BY)}}


def namespace(name: str) -> Obj:
    """A namespace OpenShift's cluster monitoring scrapes (both operators need it)."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {MONITORING_LABEL: "true"}}}


def operator_group(pkg: Package) -> Obj:
    """OperatorGroup targeting the package's own namespace (OwnNamespace install mode)."""
    return {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": pkg.group, "namespace": pkg.namespace},
            "spec": {"targetNamespaces": [pkg.namespace]}}


def subscription(pkg: Package, catalog_namespace: str, starting_csv: str | None = None) -> Obj:
    """The Subscription of a package whose channel is known."""
    if pkg.channel is None:
        raise ValueError(f"{pkg.name}: no channel to subscribe to")
    spec: Obj = {"channel": pkg.channel, "installPlanApproval": pkg.approval, "name": pkg.name,
                 "source": pkg.source, "sourceNamespace": catalog_namespace}
    if starting_csv:
        spec["startingCSV"] = starting_csv
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": pkg.name, "namespace": pkg.namespace}, "spec": spec}


def nfd_operand_image(inv: Inventory) -> str:
    """The NFD operand image of the cluster's release (-rhel9 from 4.13)."""
    gpu = settings(inv)
    if gpu.nfd_image:
        return gpu.nfd_image
    major, minor = inv.cluster.version
    name = "ose-node-feature-discovery-rhel9" if (major, minor) >= (4, 13) else "ose-node-feature-discovery"
    return f"registry.redhat.io/openshift4/{name}:v{major}.{minor}"


def nfd_worker_config(config_data: str | None, nic_classes: tuple[str, ...] = ()) -> str:
    """NFD worker config whose PCI source labels NVIDIA devices `pci-10de`.

    Starts from `config_data` (the CSV example's, comments dropped) and sets
    `sources.pci.deviceLabelFields: [vendor]`, keeping display controllers
    (class 03) in the whitelist so a GPU is reported at all.
    """
    loaded = yaml.safe_load(config_data) if config_data else None
    config: Obj = loaded if isinstance(loaded, dict) else {}
    sources = config.setdefault("sources", {}) or {}
    config["sources"] = sources
    pci = sources.setdefault("pci", {}) or {}
    sources["pci"] = pci
    classes = [str(c) for c in pci.get("deviceClassWhitelist") or PCI_CLASSES]
    if not any(c in ("03", "0302", "0300") for c in classes):
        classes.append("03")
    # The fabric's ConnectX class (0207 InfiniBand, 0200 Ethernet) gives pci-15b3.present, which the
    # Network Operator's NIC driver DaemonSet selects nodes by (upi.gpu.network.nfd_classes).
    classes += [c for c in nic_classes if not any(c.startswith(have) for have in classes)]
    pci["deviceClassWhitelist"] = classes
    pci["deviceLabelFields"] = list(LABEL_FIELDS)
    return yaml.safe_dump(config, sort_keys=False)


def nfd_instance(inv: Inventory, example: Obj | None = None) -> Obj:
    """The NodeFeatureDiscovery `nfd-instance`: the CSV's example (if given) made to label pci-10de."""
    spec: Obj = copy.deepcopy(example.get("spec") or {}) if example else {}
    operand = spec.setdefault("operand", {})
    operand.setdefault("image", nfd_operand_image(inv))
    worker = spec.setdefault("workerConfig", {})
    from upi.gpu.network import nfd_classes

    worker["configData"] = nfd_worker_config(worker.get("configData"), nfd_classes(inv))
    return {"apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
            "metadata": {"name": NFD_INSTANCE, "namespace": NFD_NAMESPACE}, "spec": spec}


def cluster_policy(inv: Inventory, example: Obj) -> Obj:
    """The ClusterPolicy: the CSV's example (never `spec: {}`), the driver mode, the inventory's overrides."""
    from upi.gpu.precompiled import policy_driver

    # GPUDirect RDMA (nvidia-peermem) on the DGXs with rdma:; upi gpu applies it once the NIC driver is ready.
    rdma: Obj = {"driver": {"rdma": {"enabled": True}}} if any(n.rdma for n in inv.nodes) else {}
    spec = merge(merge(merge(copy.deepcopy(example.get("spec") or {}), policy_driver(inv)), rdma),
                 settings(inv).cluster_policy)
    return {"apiVersion": example.get("apiVersion", "nvidia.com/v1"), "kind": "ClusterPolicy",
            "metadata": {"name": CLUSTER_POLICY}, "spec": spec}


def gpu_nodes(inv: Inventory) -> list[str]:
    """Names of the nodes the inventory marks `gpu: true`."""
    return [n.name for n in inv.nodes if n.gpu]


def render_files(inv: Inventory) -> list[tuple[str, str]]:
    """`gpu/` of the render layout: what is known without a cluster, in apply order.

    The GPU pool's MachineConfigPool and tuning first (`00-pool-*`); the node
    role labels and taints are `upi gpu`'s, after the pool's rollout.

    The GPU Operator's Subscription only when `gpu.operator_channel` pins it
    (otherwise the channel is the catalog's default, read at `upi gpu` time);
    the ClusterPolicy never (it comes from the installed CSV).
    """
    if not gpu_nodes(inv) and inv.gpu is None:
        return []
    gpu = settings(inv)
    nfd, operator = packages(gpu)
    cat_ns = gpu.catalog_sources.namespace
    objs: list[tuple[str, Obj]] = [
        ("10-nfd-namespace", namespace(nfd.namespace)),
        ("11-nfd-operatorgroup", operator_group(nfd)),
        ("12-nfd-subscription", subscription(nfd, cat_ns)),
        ("13-nfd-instance", nfd_instance(inv)),
        ("20-gpu-operator-namespace", namespace(operator.namespace)),
        ("21-gpu-operator-operatorgroup", operator_group(operator)),
    ]
    if operator.channel:
        objs.append(("22-gpu-operator-subscription", subscription(operator, cat_ns)))
    if gpu_nodes(inv):  # the GPU pool and its tuning go first (upi.gpu.pool)
        from upi.gpu.pool import pool_objects

        objs[:0] = [(f"0{i}-pool-{obj['kind'].lower()}", obj) for i, obj in enumerate(pool_objects(inv))]
    from upi.gpu.network import render_objects  # the Network Operator when a DGX has rdma: (docs/rdma.md)

    objs += render_objects(inv)
    return [(f"gpu/{name}.yaml", dump(obj)) for name, obj in objs]


class _Dumper(yaml.SafeDumper):
    """Safe YAML that writes multi-line strings (NFD's configData) as `|` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Obj) -> str:
    """One object as YAML, keys in the order built (apiVersion, kind, metadata, spec)."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
