"""GPUDirect RDMA in the inventory: each DGX's `rdma:` and the cluster's `network_operator:` (docs/rdma.md).

Facts: ../shared/data/network/README.md (NVIDIA Network Operator v26.4.1). The
NIC driver (DOCA/MOFED) reloads the mlx5 modules when it starts; a ConnectX
port that carries the node's own traffic goes down with it and the node drops
out of the cluster, again at every driver restart (network-operator issue
2176). So a fabric interface may be neither the node's own-traffic interface
nor the one it network-boots from. Kept apart from model.py, as gpu.py is.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from upi.inventory.crdfields import carried, expand, misfit_message
from upi.inventory.gpu import K8sName, _image
from upi.inventory.types import IPv4Net, shown

if TYPE_CHECKING:
    from upi.inventory.model import Inventory, Node
    from upi.inventory.rules import Finding

# A PCI address as lspci -D and sysfs write it: domain:bus:device.function.
_PCI = re.compile(r"^([0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# A netdev name (IFNAMSIZ 15, no '/', ':' or whitespace: the kernel's dev_valid_name).
_NETDEV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")
# The failure mode every overlap refusal names, in one line.
ISSUE_2176 = ("the NIC driver (DOCA/MOFED) reloads the mlx5 modules and takes that port down with the "
              "node's traffic: Node NotReady in a loop (network-operator issue 2176)")


def is_pci(value: str) -> bool:
    """Whether an interface is given by PCI address (else a netdev name)."""
    return _PCI.fullmatch(value.lower()) is not None


def canonical(value: str) -> str:
    """An interface as compared: a PCI address lowercase with its domain, a netdev name as written."""
    if is_pci(value):
        low = value.lower()
        return low if low.count(":") == 2 else f"0000:{low}"
    return value


def _interface(value: str) -> str:
    if is_pci(value):
        return canonical(value)
    if not _NETDEV.fullmatch(value):
        raise ValueError(f"{shown(value)} is neither a netdev name (ibp24s0, up to 15 characters) "
                         "nor a PCI address (0000:18:00.0)")
    return value


def _unique(value: list[str]) -> list[str]:
    twice = next((v for v in value if value.count(v) > 1), None)
    if twice is not None:
        raise ValueError(f"{twice!r} is listed twice")
    return value


def _resource(value: str) -> str:
    # The plugin's resourceName becomes `rdma/<name>`: an extended resource name segment.
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?", value):
        raise ValueError(f"{shown(value)} is not a resource name (letters, digits, '_', '-', '.')")
    return value


def _test_namespace(value: str) -> str:
    # OpenShift's default projects admit no pod through an SCC granted by RBAC (openshift-docs
    # modules/security-context-constraints-rbac.adoc): the bandwidth pods would be refused there.
    if value in ("default", "openshift") or value.startswith(("kube-", "openshift-")):
        raise ValueError(f"{shown(value)} is one of OpenShift's own namespaces, where an SCC cannot be "
                         "granted to upi's test account; name a namespace of its own (default upi-rdma-test)")
    return value


Interface = Annotated[str, AfterValidator(_interface)]
Image = Annotated[str, AfterValidator(_image)]
LinkType = Literal["infiniband", "ethernet"]
LINK_TYPES: tuple[LinkType, ...] = ("infiniband", "ethernet")


def _nic_policy(value: dict[str, Any]) -> dict[str, Any]:
    return expand(value, operator_facts()["specFields"], "NicClusterPolicy")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeRdma(_Model):
    """One DGX's fabric: its ConnectX ports for GPUDirect RDMA, and the ports that must stay out of it."""

    # At most 32: a DGX carries 8 compute ConnectX ports and a few storage ones (H100, B200); a list
    # far longer is a mistake, and each entry is one more ifNames selector in the NicClusterPolicy.
    interfaces: Annotated[list[Interface], AfterValidator(_unique)] = Field(min_length=1, max_length=32)
    link_type: LinkType = "infiniband"
    # The port carrying the node's own traffic, when `network:` does not name it already.
    node_interface: Interface | None = None
    # The port the node network-boots from (its `mac`), when not the node_interface.
    provisioning_interface: Interface | None = None


class FabricNetwork(_Model):
    """The secondary network of one fabric: IPoIB on InfiniBand, macvlan on RoCE, whereabouts IPAM."""

    name: K8sName
    cidr: IPv4Net
    # The parent netdev (default: the first fabric interface given by name on a node of this fabric).
    master: Interface | None = None
    exclude: list[IPv4Net] = Field(default_factory=list)
    mtu: StrictInt | None = Field(default=None, ge=576, le=9216)


def _ib_default() -> FabricNetwork:
    return FabricNetwork(name="rdma-ipoib", cidr=ipaddress.IPv4Network("192.168.100.0/24"))


def _eth_default() -> FabricNetwork:
    return FabricNetwork(name="rdma-macvlan", cidr=ipaddress.IPv4Network("192.168.101.0/24"))


class SecondaryNetwork(_Model):
    """The fabric networks pods attach to (Multus), in one namespace."""

    namespace: K8sName = "default"
    infiniband: FabricNetwork = Field(default_factory=_ib_default)
    ethernet: FabricNetwork = Field(default_factory=_eth_default)


class Bandwidth(_Model):
    """The per-pair GPUDirect bandwidth test (ib_write_bw with CUDA memory)."""

    image: Image = "docker.io/mellanox/cuda-perftest:latest"
    min_gbps: StrictFloat | StrictInt = Field(default=350, gt=0, le=3200)
    # Not `default` (the secondary network's): OpenShift refuses to let an SCC admit pods there.
    namespace: Annotated[K8sName, AfterValidator(_test_namespace)] = "upi-rdma-test"


class NetworkOperator(_Model):
    """The NVIDIA Network Operator through OLM, its NicClusterPolicy and the fabric networks."""

    channel: K8sName | None = None  # default: the package's default channel (PackageManifest)
    catalog_source: K8sName | None = None  # default: the GPU Operator's (certified-operators)
    namespace: K8sName = "nvidia-network-operator"
    resource_name: Annotated[str, AfterValidator(_resource)] = "rdma_shared_device_a"
    rdma_hca_max: StrictInt = Field(default=63, ge=1, le=1000)
    nic_cluster_policy: Annotated[dict[str, Any], AfterValidator(_nic_policy)] = Field(default_factory=dict)
    secondary_network: SecondaryNetwork = SecondaryNetwork()
    bandwidth: Bandwidth = Bandwidth()


DEFAULT = NetworkOperator()


def operator_facts() -> dict[str, Any]:
    """The Network Operator facts upi carries (network-operator.json, rebuilt by tests/carried_facts.py).

    From Mellanox/network-operator v26.4.1 (Apache-2.0): the CSV's default
    NicClusterPolicy, its related images, the package's default channel and the
    NicClusterPolicy spec's field names from its CRD. Render needs them without a
    cluster; validate checks the overrides against the field names (crdfields.py).
    """
    return carried("network-operator.json")


def operator_settings(inv: Inventory) -> NetworkOperator:
    """The inventory's `network_operator:` section, or every default."""
    return inv.network_operator or DEFAULT


def rdma_nodes(inv: Inventory) -> list[Node]:
    """The nodes with an `rdma:` section, in inventory order."""
    return [n for n in inv.nodes if n.rdma is not None]


def own_interfaces(node: Node) -> dict[str, str]:
    """The ports that carry the node's own traffic or boot it: interface -> the key that names it."""
    out: dict[str, str] = {}
    net = node.network
    if net is not None and net.interface:
        out[net.interface] = "network.interface"
    if net is not None and net.bond is not None:
        out[net.bond.name] = "network.bond.name"
        for i, member in enumerate(net.bond.members):
            out[member] = f"network.bond.members[{i}]"
    if node.rdma is not None:
        for key in ("node_interface", "provisioning_interface"):
            value = getattr(node.rdma, key)
            if value:
                out.setdefault(canonical(value), f"rdma.{key}")
    return out


def fabric_master(inv: Inventory, link: LinkType) -> str | None:
    """The secondary network's parent netdev of a fabric: the inventory's, else the first one named."""
    net = getattr(operator_settings(inv).secondary_network, link)
    if net.master:
        return str(net.master)
    for node in rdma_nodes(inv):
        assert node.rdma is not None  # noqa: S101 - rdma_nodes keeps those with rdma
        if node.rdma.link_type == link:
            named = next((i for i in node.rdma.interfaces if not is_pci(i)), None)
            if named:
                return named
    return None


def rdma_rules(inv: Inventory) -> Iterator[Finding]:
    """Every finding about `rdma:` and `network_operator:` (none for a sound inventory)."""
    for i, node in enumerate(inv.nodes):
        if node.rdma is None:
            continue
        if node.role.value != "worker":
            yield ("nodes", i, "rdma"), (
                f"{node.name} is a {node.role.value}: rdma: is for the DGX workers (the NIC driver's reload "
                "would take the control plane's port down with it, and the GPU pool holds workers only)")
        elif not node.gpu:
            yield ("nodes", i, "rdma"), f"{node.name} sets rdma but not gpu: true (RDMA is for the DGXs)"
        own = own_interfaces(node)
        for j, iface in enumerate(node.rdma.interfaces):
            if iface in own:
                yield ("nodes", i, "rdma", "interfaces", j), (
                    f"{iface} is also {node.name}'s {own[iface]}, the port of its own traffic or its "
                    f"network boot: {ISSUE_2176}; list only the fabric ports")
    yield from _all_or_no_dgx(inv)
    yield from _multus_reach(inv)
    links = {n.rdma.link_type for n in rdma_nodes(inv) if n.rdma is not None}
    for link in LINK_TYPES:
        if link in links and fabric_master(inv, link) is None:
            yield ("network_operator", "secondary_network", link, "master"), (
                f"no {link} fabric interface is given by name: name the parent netdev of the "
                f"{link} secondary network ({'ibp24s0' if link == 'infiniband' else 'ens1f0np0'})")
    yield from _policy_overrides(inv)
    for link in LINK_TYPES:
        if link in links:
            yield from _fabric_network(inv, link)
    net = operator_settings(inv).secondary_network
    if {"infiniband", "ethernet"} <= links and net.infiniband.name == net.ethernet.name:
        yield ("network_operator", "secondary_network", "ethernet", "name"), (
            f"{net.ethernet.name!r} is also the infiniband network's name: both become a "
            f"NetworkAttachmentDefinition in {net.namespace}")


# Networks a pod's fabric address may not share: OVN-Kubernetes' own (rules.OVN_INTERNAL and the
# masquerade subnet) and the ones no interface can route (RFC 6890 special-purpose blocks).
_RESERVED = (("the loopback range", ipaddress.IPv4Network("127.0.0.0/8")),
             ("the link-local range (OVN's masquerade subnet)", ipaddress.IPv4Network("169.254.0.0/16")),
             ("the multicast range", ipaddress.IPv4Network("224.0.0.0/4")),
             ("the reserved range", ipaddress.IPv4Network("240.0.0.0/4")),
             ("the 'this network' range", ipaddress.IPv4Network("0.0.0.0/8")),
             ("OVN-Kubernetes' join switch", ipaddress.IPv4Network("100.64.0.0/16")),
             ("OVN-Kubernetes' transit switch", ipaddress.IPv4Network("100.88.0.0/16")))


def _cluster_networks(inv: Inventory) -> list[tuple[str, ipaddress.IPv4Network]]:
    """The cluster's own networks, each with the key that names it."""
    net = inv.network
    named = [("network.machine_cidr", net.machine_cidr)]
    named += [(f"network.machine_networks[{i}].cidr", m.cidr) for i, m in enumerate(net.machine_networks)]
    return [*named, ("network.cluster_network", net.cluster_network),
            ("network.service_network", net.service_network)]


def _fabric_network(inv: Inventory, link: LinkType) -> Iterator[Finding]:
    """The secondary network of a fabric in use: its own addresses, its parent a fabric port by name."""
    net: FabricNetwork = getattr(operator_settings(inv).secondary_network, link)
    loc = ("network_operator", "secondary_network", link)
    others = [*_cluster_networks(inv), *_RESERVED]
    if link == "ethernet" and "infiniband" in {n.rdma.link_type for n in rdma_nodes(inv) if n.rdma}:
        ib = operator_settings(inv).secondary_network.infiniband.cidr
        others.append(("network_operator.secondary_network.infiniband.cidr", ib))
    for key, other in others:
        if net.cidr.overlaps(other):
            where = f"{key} {other}" if key.startswith("the") or "'" in key else f"the {key} {other}"
            yield (*loc, "cidr"), (
                f"{net.cidr} overlaps {where}: each address must belong to one network; give the "
                f"{link} fabric a range of its own")
            break
    else:
        # whereabouts hands out neither the network nor the broadcast address; each node of the
        # fabric runs at most one bandwidth-test pod at a time, and a pair needs two.
        need = max(2, sum(1 for n in rdma_nodes(inv) if n.rdma is not None and n.rdma.link_type == link))
        free = net.cidr.num_addresses - 2 - sum(x.num_addresses for x in net.exclude if x.subnet_of(net.cidr))
        if free < need:
            yield (*loc, "cidr"), (
                f"{net.cidr} leaves {max(free, 0)} pod address{'' if free == 1 else 'es'} (whereabouts skips "
                f"the network and broadcast addresses{', and exclude' if net.exclude else ''}): the "
                f"{need} {link} DGXs' bandwidth-test pods need {need}")
    if link == "infiniband" and net.mtu is not None:
        # IPoIBNetwork's spec has no mtu (its CRD: networkNamespace, master, ipam): dropped unseen.
        yield (*loc, "mtu"), (
            f"{net.mtu}: the IPoIBNetwork has no MTU (an IPoIB interface takes its parent port's); "
            "set the MTU on the port, or drop the key (mtu is for the ethernet network)")
    for k, excluded in enumerate(net.exclude):
        if not excluded.subnet_of(net.cidr):
            yield (*loc, "exclude", k), f"{excluded} is not inside cidr {net.cidr}: it excludes nothing"
    if net.master is not None:
        if is_pci(net.master):
            yield (*loc, "master"), (
                f"{net.master} is a PCI address: the {link} network's parent is a netdev name "
                f"({'ibp24s0' if link == 'infiniband' else 'ens1f0np0'}), as the CNI plugin looks it up")
        else:
            for node in rdma_nodes(inv):
                own = own_interfaces(node)
                if net.master in own:
                    yield (*loc, "master"), (
                        f"{net.master} is {node.name}'s {own[net.master]}, the port of its own traffic: "
                        "the fabric network's parent must be a fabric port")
                    break


# Where OpenShift's Multus lets a pod of any namespace find a NetworkAttachmentDefinition: the
# cluster-network-operator sets namespaceIsolation with these globalNamespaces (multus-cni's
# GetNetworkDelegates refuses any other namespace than the pod's own).
MULTUS_GLOBAL = ("default", "openshift-multus", "openshift-sriov-network-operator")


def _multus_reach(inv: Inventory) -> Iterator[Finding]:
    """The bandwidth test pods must be allowed to attach the fabric networks they measure."""
    op = operator_settings(inv)
    ns, test_ns = op.secondary_network.namespace, op.bandwidth.namespace
    if rdma_nodes(inv) and ns not in MULTUS_GLOBAL and ns != test_ns:
        yield ("network_operator", "secondary_network", "namespace"), (
            f"the fabric networks in {ns!r} cannot be attached by the bandwidth test pods in {test_ns!r}: "
            f"OpenShift's Multus isolates namespaces, so a pod attaches a NetworkAttachmentDefinition of "
            f"its own namespace or of {', '.join(MULTUS_GLOBAL)}; keep the networks in default (any "
            f"workload namespace can use them), or set network_operator.bandwidth.namespace: {ns}")


def _all_or_no_dgx(inv: Inventory) -> Iterator[Finding]:
    """GPUDirect is cluster-wide: with one DGX on the fabric, every GPU node needs rdma:."""
    with_rdma = rdma_nodes(inv)
    if not with_rdma:
        return
    for i, node in enumerate(inv.nodes):
        if node.gpu and node.rdma is None:
            yield ("nodes", i, "gpu"), (
                f"{node.name} is a GPU node without rdma: while {with_rdma[0].name} has it: "
                "driver.rdma.enabled is cluster-wide, so every GPU node's driver pod runs "
                "nvidia-peermem-ctr, which waits for a NIC driver upi installs only on rdma: nodes; "
                "give every GPU node rdma: (or none)")
            return


def _policy_overrides(inv: Inventory) -> Iterator[Finding]:
    """An override the NicClusterPolicy CRD lacks: the API server would drop it or refuse the object."""
    if inv.network_operator is None:
        return
    bad = misfit_message("NicClusterPolicy", operator_facts(), inv.network_operator.nic_cluster_policy)
    if bad is not None:
        yield ("network_operator", "nic_cluster_policy"), bad


def rdma_warnings(inv: Inventory) -> list[str]:
    """A fabric whose node's own-traffic port upi cannot know: the 2176 check could not run."""
    out = [f"{n.name}: neither network: nor rdma.node_interface names the port of its own traffic; "
           "upi cannot check that no fabric interface is that port (set rdma.node_interface)"
           for n in rdma_nodes(inv) if not own_interfaces(n)]
    if inv.network_operator is not None and not rdma_nodes(inv):
        out.append("network_operator is set but no node has rdma:, so upi gpu installs no Network Operator "
                   "and the section is not used: give the DGXs their rdma: fabric ports")
    rdma = ((inv.gpu.cluster_policy if inv.gpu else {}).get("driver") or {}).get("rdma") or {}
    if isinstance(rdma, dict) and rdma.get("enabled") is True and rdma.get("useHostMofed") is not True \
            and not rdma_nodes(inv):
        # The GPU driver's peermem container waits for the NIC driver's ready flag (gpu-driver-container
        # reload_nvidia_peermem): with no NIC driver the GPU driver pods never get ready.
        out.append("gpu.cluster_policy sets driver.rdma.enabled but no node has rdma:, so nothing installs "
                   "the NIC driver and the GPU driver pods wait for it (network-operator issue 2471): add "
                   "rdma: to the DGXs, or driver.rdma.useHostMofed: true for a driver on the hosts")
    return out
