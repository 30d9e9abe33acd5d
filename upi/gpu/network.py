"""The NVIDIA Network Operator's objects for GPUDirect RDMA, built once for `upi render` and `upi gpu`.

Facts: ../shared/data/network/ (Mellanox/network-operator v26.4.1), carried in
upi/inventory/network-operator.json. The NicClusterPolicy starts from the
CSV's alm-examples one (the installed CSV's at `upi gpu` time, the carried
one for render): its NIC driver (`ofedDriver`, the DOCA driver) and RDMA
shared device plugin, the plugin's selectors naming the inventory's fabric
ports, the driver pinned to the RDMA nodes (a ConnectX port elsewhere may
carry a node's traffic: network-operator issue 2176), then the inventory's
overrides. The secondary network is an IPoIBNetwork on InfiniBand, a
MacvlanNetwork on RoCE, with whereabouts IPAM.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from upi.gpu.objects import Obj, Package, namespace, operator_group, own_namespace, subscription
from upi.gpu.pool import pod_tolerations
from upi.inventory.gpu import merge, settings
from upi.inventory.model import Inventory
from upi.inventory.rdma import (
    LINK_TYPES,
    FabricNetwork,
    LinkType,
    canonical,
    fabric_master,
    is_pci,
    operator_facts,
    operator_settings,
    rdma_nodes,
)

PACKAGE = "nvidia-network-operator"
GROUP = "nvidia-network-operator-group"
NIC_POLICY = "nic-cluster-policy"
MELLANOX = "mellanox.com/v1alpha1"
MELLANOX_VENDOR = "15b3"  # PCI vendor id of NVIDIA (Mellanox) ConnectX NICs
HOSTNAME = "kubernetes.io/hostname"


def network_package(inv: Inventory, channel: str | None = None) -> Package:
    """nvidia-network-operator: Manual approval, so only the chosen CSV's InstallPlan is approved."""
    op = operator_settings(inv)
    source = op.catalog_source or settings(inv).catalog_sources.gpu_operator
    return Package(PACKAGE, op.namespace, GROUP, source, channel or op.channel, "Manual")


def links(inv: Inventory) -> list[LinkType]:
    """The fabrics the inventory's RDMA nodes are on, in a fixed order."""
    found = {n.rdma.link_type for n in rdma_nodes(inv) if n.rdma is not None}
    return [link for link in LINK_TYPES if link in found]


def nfd_classes(inv: Inventory) -> tuple[str, ...]:
    """PCI classes NFD must report for the fabrics' NICs to be labelled pci-15b3.present.

    The NIC driver's DaemonSet selects `feature.node.kubernetes.io/pci-15b3.present`
    (Mellanox/network-operator manifests/state-ofed-driver, pkg/nodeinfo); a ConnectX
    port in InfiniBand mode is class 0207, in Ethernet mode 0200.
    """
    return tuple({"infiniband": "0207", "ethernet": "0200"}[link] for link in links(inv))


def pci_names(address: str, link: LinkType) -> list[str]:
    """The netdev names udev's path policy gives a PCI function (systemd.net-naming-scheme(7)).

    The RDMA shared device plugin selects by name only (k8s-rdma-shared-dev-plugin
    pkg/types: vendors, deviceIDs, drivers, ifNames, linkTypes), so a port given
    by PCI address is named as `ib`/`en` + [P<domain>] + p<bus>s<slot> + [f<fn>]
    (mlx5 Ethernet ports add `np<port>`); names that do not exist select nothing.
    """
    domain, bus, rest = canonical(address).split(":")
    slot, fn = rest.split(".")
    base = ("ib" if link == "infiniband" else "en") + (f"P{int(domain, 16)}" if int(domain, 16) else "")
    base += f"p{int(bus, 16)}s{int(slot, 16)}"
    names = [base, f"{base}f{int(fn)}"]
    if link == "ethernet":
        names += [f"{n}np0" for n in names]
    return names


def if_names(inv: Inventory) -> list[str]:
    """Every fabric port of every RDMA node as the device plugin's `ifNames`, in inventory order."""
    out: list[str] = []
    for node in rdma_nodes(inv):
        assert node.rdma is not None  # noqa: S101 - rdma_nodes keeps those with rdma
        for iface in node.rdma.interfaces:
            for name in pci_names(iface, node.rdma.link_type) if is_pci(iface) else [iface]:
                if name not in out:
                    out.append(name)
    return out


def device_plugin_config(inv: Inventory) -> str:
    """The RDMA shared device plugin's config (a JSON string): one resource over the fabric ports."""
    op = operator_settings(inv)
    entry = {"resourceName": op.resource_name, "rdmaHcaMax": op.rdma_hca_max,
             "selectors": {"vendors": [MELLANOX_VENDOR], "ifNames": if_names(inv)}}
    return json.dumps({"configList": [entry]}, indent=2) + "\n"


def _image_parts(ref: str) -> dict[str, str]:
    """`repo/name@sha256:x` or `repo/name:tag` as the NicClusterPolicy's repository/image/version."""
    path, sep, digest = ref.partition("@")
    if not sep:
        path, _, digest = ref.rpartition(":")
    repository, _, image = path.rpartition("/")
    return {"repository": repository, "image": image, "version": digest}


def nic_cluster_policy(inv: Inventory, example: Obj | None = None,
                       related: dict[str, str] | None = None) -> Obj:
    """The NicClusterPolicy: the CSV's example, the plugin's selectors, the RDMA nodes, the overrides.

    `example`/`related`: the installed CSV's alm-examples NicClusterPolicy and related
    images; without them (render), the ones upi carries from v26.4.1.
    """
    facts = operator_facts()
    base = example if example is not None else facts["nicClusterPolicy"]
    images = related if related is not None else facts["relatedImages"]
    spec: Obj = copy.deepcopy(base.get("spec") or {})
    spec.setdefault("rdmaSharedDevicePlugin", {})["config"] = device_plugin_config(inv)
    if "infiniband" in links(inv) and "ipoib-cni" in images:  # the IPoIB CNI the IPoIBNetwork needs
        ipoib = spec.setdefault("secondaryNetwork", {}).setdefault("ipoib", {})
        for key, value in _image_parts(images["ipoib-cni"]).items():
            ipoib.setdefault(key, value)
    spec["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In",
                               "values": [n.name for n in rdma_nodes(inv)]}]}]}}
    have = list(spec.get("tolerations") or [])
    spec["tolerations"] = have + [t for t in pod_tolerations(inv) if t not in have]
    spec = merge(spec, operator_settings(inv).nic_cluster_policy)
    return {"apiVersion": base.get("apiVersion", MELLANOX), "kind": "NicClusterPolicy",
            "metadata": {"name": NIC_POLICY}, "spec": spec}


def _ipam(net: FabricNetwork) -> str:
    doc: dict[str, Any] = {"type": "whereabouts", "range": str(net.cidr)}
    if net.exclude:
        doc["exclude"] = [str(e) for e in net.exclude]
    return json.dumps(doc, indent=2) + "\n"


def secondary_networks(inv: Inventory) -> list[Obj]:
    """One network per fabric: IPoIBNetwork (InfiniBand), MacvlanNetwork (RoCE)."""
    sec = operator_settings(inv).secondary_network
    out: list[Obj] = []
    for link in links(inv):
        net: FabricNetwork = getattr(sec, link)
        spec: Obj = {"networkNamespace": sec.namespace, "master": fabric_master(inv, link),
                     "ipam": _ipam(net)}
        if link == "infiniband":
            out.append({"apiVersion": MELLANOX, "kind": "IPoIBNetwork", "metadata": {"name": net.name},
                        "spec": spec})
        else:
            spec["mode"] = "bridge"
            if net.mtu:
                spec["mtu"] = net.mtu
            out.append({"apiVersion": MELLANOX, "kind": "MacvlanNetwork", "metadata": {"name": net.name},
                        "spec": spec})
    return out


def fabric_namespace(inv: Inventory) -> list[Obj]:
    """The fabric networks' namespace, unless it exists before them ([] for `default`).

    The Network Operator writes each network's NetworkAttachmentDefinition into
    `networkNamespace`; a namespace that does not exist leaves the network
    without one, and the bandwidth pods that name it never start. When it is
    also the bandwidth test's namespace, this is the same object as the test's
    (upi.gpu.rdma.test_account_objects, both `own_namespace`), applied earlier:
    before the networks.
    """
    op = operator_settings(inv)
    ns = op.secondary_network.namespace
    if ns in ("default", "openshift-multus", op.namespace):  # OpenShift's own, or the operator's
        return []
    return [own_namespace(ns)]


def render_objects(inv: Inventory) -> list[tuple[str, Obj]]:
    """`gpu/3x-network-*`: what render writes for RDMA ([] without an `rdma:` node).

    The Subscription names the channel the inventory pins, else the package's
    default channel upi carries (the cluster's PackageManifest decides at `upi gpu`).
    """
    if not rdma_nodes(inv):
        return []
    facts = operator_facts()
    pkg = network_package(inv, None)
    chosen = Package(pkg.name, pkg.namespace, pkg.group, pkg.source, pkg.channel or facts["defaultChannel"],
                     pkg.approval)
    cat_ns = settings(inv).catalog_sources.namespace
    objs: list[tuple[str, Obj]] = [
        ("30-network-operator-namespace", namespace(pkg.namespace)),
        ("31-network-operator-operatorgroup", operator_group(pkg)),
        ("32-network-operator-subscription", subscription(chosen, cat_ns)),
        ("33-nic-cluster-policy", nic_cluster_policy(inv)),
    ]
    objs += [(f"34-fabric-namespace-{ns['metadata']['name']}", ns) for ns in fabric_namespace(inv)]
    for net in secondary_networks(inv):
        objs.append((f"34-{net['kind'].lower()}-{net['metadata']['name']}", net))
    from upi.gpu.rdma import test_account_objects  # the bandwidth test's account and SCC binding

    names = ("35-rdma-test-namespace", "36-rdma-test-serviceaccount", "37-rdma-test-scc-rolebinding")
    objs += list(zip(names, test_account_objects(inv), strict=True))
    return objs
