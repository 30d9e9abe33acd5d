"""The inventory's JSON Schema (`upi schema`): the model's, with a description for every key.

Editors (yaml-language-server) show the descriptions, complete the enums and
check the patterns as the admin types. Types carry their own pattern
(types.py); the words for each key live here, next to each other, so that
they read as one reference (docs/inventory.md says the same at length).
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from upi.inventory.model import Inventory

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# "Model.key": what the key means to the admin (its type's rule is appended).
DESCRIPTIONS = {
    "Inventory.cluster": "Cluster identity and the secrets the installer needs.",
    "Inventory.network": "Machine, cluster and service networks, and the upstream resolvers.",
    "Inventory.provisioner": "The x86 server running dnsmasq (DNS, DHCP, TFTP) and the HTTP server.",
    "Inventory.rhcos": "RHCOS boot artifacts: paths under provisioner.http_base_url, or full URLs.",
    "Inventory.load_balancer": "The layer-4 load balancer (HAProxy) in front of API and ingress.",
    "Inventory.hypervisor": "The libvirt host of the VM nodes; required when a node is a VM.",
    "Inventory.nodes": "Every machine: exactly one bootstrap, 3 masters, any number of workers.",
    "Inventory.gpu": "GPU day 2 (upi gpu): NFD and the NVIDIA GPU Operator through OLM.",
    "Inventory.gpu_pool": "The GPU nodes as their own pool (upi gpu): taint, tuning, diagnosis, metrics.",
    "GpuPool.name": "Pool name: the node role node-role.kubernetes.io/<name> and its MachineConfigPool.",
    "GpuPool.taint": "Taint of the GPU nodes so only GPU work lands there; none: no taint.",
    "GpuPool.tuning": "Kubelet tuning of the pool (KubeletConfig), or a PerformanceProfile in full.",
    "GpuPool.max_unavailable": "Nodes rebooting at once in the pool's rollout: a count or a percentage.",
    "GpuPool.diagnosis_level": "DCGM diagnostics level per node (dcgmi diag -r N, 1-4); 0: skip.",
    "GpuPool.metrics": "GPU metrics to the cluster's monitoring (DCGM exporter ServiceMonitor).",
    "Taint.key": "Taint key.",
    "Taint.value": "Taint value (may be empty).",
    "Taint.effect": "Taint effect.",
    "Tuning.cpu_manager": "Kubelet CPU manager policy; static gives Guaranteed pods whole cores.",
    "Tuning.reserved_cpus": "CPUs kept for the system and kubelet (reservedSystemCPUs).",
    "Tuning.topology_manager": "Kubelet topology manager policy (NUMA alignment of CPUs and GPUs).",
    "Tuning.hugepages": "Hugepages reserved at boot, by size.",
    "Tuning.performance_profile": "A PerformanceProfile spec (performance.openshift.io/v2) used instead; "
                                  "dotted keys nest.",
    "Hugepages.size": "Page size.",
    "Hugepages.count": "Number of pages per node.",
    "Inventory.csr_approver": "The rendered CSR approver units (csr/) on the host that runs them.",
    "Inventory.mirror": "The mirror registry of a disconnected site (oc-mirror v2; docs/disconnected.md).",
    "MirrorSettings.registry": "The mirror registry, host[:port]; it must serve cluster.mirrors. Credentials "
                               "from the pull secret, CA from cluster.additional_trust_bundle_file.",
    "MirrorSettings.catalogs": "Operator indexes mirrored (default: the Red Hat and certified indexes "
                               "of the release).",
    "MirrorSettings.cluster_resources": "oc-mirror's generated cluster-resources directory "
                                        "(relative to the inventory).",
    "MirroredCatalog.catalog": "The source index image "
                               "(registry.redhat.io/redhat/redhat-operator-index:v4.16).",
    "MirroredCatalog.name": "Its CatalogSource name on the cluster (default: oc-mirror's, "
                            "cs-redhat-operator-index-v4-16).",
    "CsrApprover.upi": "The upi the units and crontab run (default: the upi that rendered them).",
    "Cluster.name": "Cluster name; the DNS domain is <name>.<base_domain>.",
    "Cluster.base_domain": "Base DNS domain of the cluster.",
    "Cluster.openshift_version": "OpenShift release; drives PXE arguments, SRV records and network type.",
    "Cluster.pull_secret_file": "JSON pull secret with an \"auths\" object (relative to the inventory).",
    "Cluster.ssh_key_file": "OpenSSH public key for the core user (relative to the inventory).",
    "Cluster.fips": "Install in FIPS mode.",
    "Cluster.proxy": "Cluster-wide egress proxy.",
    "Cluster.mirrors": "Image mirrors: imageDigestSources (4.14+) or imageContentSources.",
    "Cluster.additional_trust_bundle_file": "PEM CA certificates trusted cluster-wide (a mirror's CA).",
    "Proxy.http_proxy": "Proxy for http:// requests.",
    "Proxy.https_proxy": "Proxy for https:// requests.",
    "Proxy.no_proxy": "Names, domains and CIDRs reached directly.",
    "Mirror.source": "The repository the release names (quay.io/openshift-release-dev/ocp-release).",
    "Mirror.mirrors": "Registries serving the same images.",
    "Network.machine_cidr": "IPv4 network of the nodes.",
    "Network.gateway": "Default gateway: a host address inside machine_cidr.",
    "Network.machine_networks": "Further machine networks (racks), each behind a DHCP relay; "
                                "a node belongs to the one its ip is in.",
    "MachineNetwork.cidr": "IPv4 network of the rack; overlaps no other network.",
    "MachineNetwork.gateway": "The rack's default gateway: a host address inside cidr.",
    "MachineNetwork.relay": "The leaf relay's address (giaddr) inside cidr (default: the gateway).",
    "MachineNetwork.name": "Tag of the rack in dnsmasq's config (default: machine<n>).",
    "Network.cluster_network": "IPv4 network the pod subnets are cut from.",
    "Network.host_prefix": "Prefix of each node's pod subnet: between cluster_network's and /30.",
    "Network.service_network": "IPv4 network of services.",
    "Network.upstream_dns": "Resolvers dnsmasq forwards other names to (never the provisioner itself).",
    "Network.network_type": "Network plugin (default by version: OVNKubernetes from 4.12).",
    "DhcpRange.start": "First address of the dynamic pool.",
    "DhcpRange.end": "Last address of the dynamic pool.",
    "Provisioner.ip": "The provisioner's address; the DNS server DHCP hands out.",
    "Provisioner.interface": "NIC dnsmasq serves DHCP on.",
    "Provisioner.http_base_url": "Base URL of RHCOS artifacts and ignition/<role>.ign.",
    "Provisioner.tftp_root": "TFTP root of dnsmasq.",
    "Provisioner.http_root": "Directory the HTTP server serves http_base_url from.",
    "Provisioner.dnsmasq_dir": "Directory of dnsmasq's drop-in configs.",
    "Provisioner.dnsmasq_log": "File dnsmasq logs DHCP and TFTP to (log-facility); upi status reads it.",
    "Provisioner.http_access_log": "The HTTP server's access log (common/combined format), for upi status.",
    "Provisioner.dhcp_range": "A dynamic pool for hosts the inventory does not name "
                              "(default: static leases only).",
    "Provisioner.ssh": "How upi push, status and wait reach the provisioner (none: SSH as root to its ip).",
    "SshTarget.host": "Host to SSH to (default: the section's ip).",
    "SshTarget.user": "SSH user.",
    "SshTarget.port": "SSH port.",
    "SshTarget.known_hosts": "known_hosts file holding the host's key (host keys are checked).",
    "SshTarget.identity_file": "Private key file to log in with.",
    "SshTarget.local": "The host is this machine: copy files without SSH.",
    "SshTarget.reload_command": "argv run after a config changed "
                                "(default: restart dnsmasq / reload haproxy).",
    "SshTarget.connect_timeout": "Seconds to wait for the SSH connection.",
    "SshTarget.command_timeout": "Seconds a remote command may take.",
    "Rhcos.kernel": "Live kernel (4.6+) or installer kernel (4.1-4.5).",
    "Rhcos.initramfs": "Live or installer initramfs.",
    "Rhcos.rootfs": "Live rootfs (coreos.live.rootfs_url): 4.6 and later.",
    "Rhcos.image": "Metal raw image (coreos.inst.image_url): 4.1-4.5 only.",
    "LoadBalancer.ip": "Where api, api-int and *.apps point.",
    "LoadBalancer.hostname": "A name for the load balancer (gets an A record).",
    "LoadBalancer.ssh": "How upi push and wait reach the load balancer (none: SSH as root to its ip).",
    "LoadBalancer.config_path": "Where upi push puts haproxy.cfg.",
    "Hypervisor.uri": "libvirt URI of the host running the VMs.",
    "Hypervisor.bridge": "Bridge the VMs' NIC joins (bridged, not NAT).",
    "Hypervisor.image_dir": "Directory of the VM disks (<cluster>-<node>.qcow2).",
    "Hypervisor.uefi_loader": "Firmware of UEFI VMs.",
    "VmSize.vcpus": "Virtual CPUs.",
    "VmSize.memory_mib": "Memory in MiB.",
    "VmSize.disk_gib": "Disk in GiB.",
    "Bmc.address": "Redfish address of the BMC.",
    "Bmc.credentials_file": "0600 file with the BMC user and password (relative to the inventory).",
    "Bmc.system_id": "Redfish system id (default: the only system).",
    "Bmc.verify_tls": "true (the system's CAs), false (not verified; warned), or a CA file for this BMC.",
    "Bmc.timeout": "Seconds to connect and for each read; a whole Redfish request gets twice this.",
    "Node.name": "Host name, unique; not a name the cluster's DNS uses (api, apps, ...).",
    "Node.role": "bootstrap, master or worker.",
    "Node.mac": "MAC the node network-boots from (its static DHCP lease).",
    "Node.ip": "The node's address inside machine_cidr, unique.",
    "Node.machine": "vm or metal (default: vm for bootstrap/master, metal for workers).",
    "Node.firmware": "bios (pxelinux) or uefi (GRUB) (default: bios for bootstrap/master, uefi for workers).",
    "Node.install_disk": "Disk RHCOS installs to (default: /dev/vda on a VM, /dev/sda on metal).",
    "Node.gpu": "A DGX / GPU node: upi gpu verifies it (must boot uefi).",
    "Node.gpus": "GPUs the node must show as allocatable nvidia.com/gpu (only with gpu: true).",
    "Node.mig_config": "MIG profile for the nvidia.com/mig.config label (only with gpu: true).",
    "Node.vm": "Size of a VM node (default: 4 vCPU, 16384 MiB, 100 GiB).",
    "Node.bmc": "Redfish BMC of a bare-metal node.",
    "Node.secure_boot": "UEFI Secure Boot on this bare-metal node: true (handed shim + the signed "
                        "GRUB), false, or auto (asked from the BMC) (default: auto with a bmc, "
                        "else false; on/off read as true/false).",
    "Node.rdma": "GPUDirect RDMA on this DGX (upi gpu installs the NVIDIA Network Operator): its fabric "
                 "ports; never the port of its own traffic or its network boot (docs/rdma.md).",
    "NodeRdma.interfaces": "The ConnectX fabric ports, as netdev names (ibp24s0) or PCI addresses "
                           "(0000:18:00.0); the RDMA device plugin selects them.",
    "NodeRdma.link_type": "infiniband (IPoIB secondary network) or ethernet (RoCE, macvlan network).",
    "NodeRdma.node_interface": "The port of the node's own traffic, when network: does not name it; "
                               "no fabric port may be it (network-operator issue 2176).",
    "NodeRdma.provisioning_interface": "The port the node network-boots from (its mac), when not "
                                       "node_interface; no fabric port may be it.",
    "Inventory.network_operator": "The NVIDIA Network Operator for GPUDirect RDMA (upi gpu, when a node "
                                  "has rdma:): OLM, NicClusterPolicy, fabric networks, bandwidth test.",
    "NetworkOperator.channel": "Channel of nvidia-network-operator (default: the package's default "
                               "channel, read from the cluster's PackageManifest).",
    "NetworkOperator.catalog_source": "Catalog source of the operator (default: the GPU Operator's, "
                                      "certified-operators).",
    "NetworkOperator.namespace": "Namespace of the Network Operator (the CSV's suggested one).",
    "NetworkOperator.resource_name": "The RDMA shared device plugin's resource: pods ask for "
                                     "rdma/<resource_name>.",
    "NetworkOperator.rdma_hca_max": "Pods that may share one RDMA device at once (rdmaHcaMax).",
    "NetworkOperator.nic_cluster_policy": "Merged onto the CSV's default NicClusterPolicy spec; dotted "
                                          "keys nest; a field the CRD lacks is refused.",
    "NetworkOperator.secondary_network": "The fabric networks pods attach to: IPoIB for InfiniBand, "
                                         "macvlan for RoCE.",
    "NetworkOperator.bandwidth": "The per-pair GPUDirect bandwidth test (ib_write_bw, CUDA memory).",
    "SecondaryNetwork.namespace": "Namespace of the networks' NetworkAttachmentDefinitions "
                                  "(networkNamespace).",
    "SecondaryNetwork.infiniband": "The InfiniBand fabric's network (an IPoIBNetwork).",
    "SecondaryNetwork.ethernet": "The RoCE fabric's network (a MacvlanNetwork).",
    "FabricNetwork.name": "Name of the network object and of its NetworkAttachmentDefinition.",
    "FabricNetwork.cidr": "IPv4 range whereabouts hands to pods on the fabric.",
    "FabricNetwork.master": "Parent netdev (default: the first fabric port given by name on a node "
                            "of this fabric).",
    "FabricNetwork.exclude": "Ranges whereabouts never hands out.",
    "FabricNetwork.mtu": "MTU of the macvlan interfaces (RoCE only; default: the parent's).",
    "Bandwidth.image": "Image with ib_write_bw built with CUDA (perftest --use_cuda).",
    "Bandwidth.min_gbps": "Minimum GPUDirect bandwidth per link, in Gb/s (BW average of ib_write_bw).",
    "Bandwidth.namespace": ("Namespace upi creates for the bandwidth test pods, their ServiceAccount bound "
                            "to the privileged SCC (IPC_LOCK, root); not default, kube-* or openshift-*."),
    "Node.hypervisor": "This node's own libvirt host (default: the top-level hypervisor).",
    "Node.kernel_args": "Extra kernel arguments, one per item (not ip=, bond=, vlan=, nameserver= "
                        "when network: is given).",
    "Node.network": "In-band networking of the installer and the installed system: bond, VLAN, "
                    "address, DNS, MTU.",
    "NodeNetwork.interface": "The one NIC that carries the address (instead of a bond).",
    "NodeNetwork.bond": "A bond of NICs that carries the address (instead of interface).",
    "NodeNetwork.vlan": "VLAN id on top of the bond or interface (1-4094).",
    "NodeNetwork.address": "static: the node's ip with its network's gateway; dhcp: from DHCP.",
    "NodeNetwork.dns": "DNS servers (default: the provisioner, the cluster's DNS).",
    "NodeNetwork.mtu": "MTU of the bond or interface and its VLAN (576-9216).",
    "Bond.name": "Bond interface name.",
    "Bond.members": "NICs enslaved to the bond.",
    "Bond.mode": "Bonding mode (default 802.3ad: LACP).",
    "Bond.lacp_rate": "LACPDU rate asked of the switch: slow or fast (802.3ad only).",
    "Bond.miimon": "Link monitoring interval in ms (0: off).",
    "GpuSettings.operator_channel": "GPU Operator channel (default: the package's default channel).",
    "GpuSettings.driver": "The NVIDIA driver: precompiled (signed images per kernel, for Secure Boot), build "
    "(built on the node by the Driver Toolkit), or auto: precompiled when a GPU node boots with Secure Boot.",
    "GpuSettings.precompiled": "Where the precompiled driver images are (ClusterPolicy driver.repository, "
    "image, version).",
    "Precompiled.repository": "Registry and path of the precompiled driver images.",
    "Precompiled.image": "Image name; tags are <version>-<kernel>-<os> per node kernel.",
    "Precompiled.version": "The driver branch (580) or a full driver version.",
    "Precompiled.os": "The tag's OS part (default: rhcos<X.Y> of the cluster, or the node's NFD os-release).",
    "GpuSettings.nfd_channel": "Node Feature Discovery channel.",
    "GpuSettings.operator_namespace": "Namespace of the GPU Operator.",
    "GpuSettings.catalog_sources": "OLM catalog sources; rename them for a mirrored catalog.",
    "GpuSettings.nfd_image": "NFD operand image (default: by OpenShift version).",
    "GpuSettings.cluster_policy": "Merged onto the CSV's default ClusterPolicy; dotted keys nest; a "
                                  "field the CRD lacks is refused.",
    "GpuSettings.validation": "The pod run on every GPU node to prove it works.",
    "CatalogSources.nfd": "Catalog source of the NFD operator.",
    "CatalogSources.gpu_operator": "Catalog source of the GPU Operator.",
    "CatalogSources.namespace": "Namespace of the catalog sources.",
    "Validation.image": "Image of the validation pod.",
    "Validation.success_log": "Log line that means success.",
    "Validation.command": "argv replacing the image's entrypoint.",
}


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `model`'s fields, by class name (as $defs names them)."""
    seen[model.__name__] = model
    for info in model.model_fields.values():
        stack: list[Any] = [info.annotation]
        while stack:
            kind = stack.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                if kind.__name__ not in seen:
                    _models(kind, seen)
            else:
                stack.extend(get_args(kind))
    return seen


def _factory_defaults(model: type[BaseModel], properties: dict[str, Any]) -> None:
    """`default` for keys whose default is made by a factory (`[]`, `{}`): pydantic leaves it out."""
    for key, info in model.model_fields.items():
        if key in properties and "default" not in properties[key] and info.default_factory is not None:
            properties[key]["default"] = to_jsonable_python(info.get_default(call_default_factory=True))


def _describe(model: str, properties: dict[str, Any]) -> None:
    for key, prop in properties.items():
        words = DESCRIPTIONS.get(f"{model}.{key}")
        if words is None:
            continue
        rule = prop.get("description") or _inner_description(prop)
        prop["description"] = f"{words} {rule}" if rule and rule not in words else words


def _inner_description(prop: dict[str, Any]) -> str | None:
    for choice in prop.get("anyOf", []):
        if "description" in choice:
            return str(choice["description"])
    return None


def inventory_schema() -> dict[str, Any]:
    """The inventory's JSON Schema as a dict (draft 2020-12)."""
    doc = Inventory.model_json_schema(mode="validation")
    doc["properties"].pop("source", None)
    models = _models(Inventory, {})
    _describe("Inventory", doc["properties"])
    _factory_defaults(Inventory, doc["properties"])
    for name, definition in doc.get("$defs", {}).items():
        _describe(name, definition.get("properties", {}))
        if name in models:
            _factory_defaults(models[name], definition.get("properties", {}))
    _taint_none(doc)
    return {"$schema": SCHEMA_DIALECT, "title": "upi inventory", **doc}


def _taint_none(doc: dict[str, Any]) -> None:
    """`gpu_pool.taint` takes the word none for no taint, and refuses an empty value (gpupool._none)."""
    taint = doc.get("$defs", {}).get("GpuPool", {}).get("properties", {}).get("taint")
    if taint is not None:
        taint["anyOf"] = [{"const": "none"} if c == {"type": "null"} else c for c in taint.get("anyOf", [])]


def undescribed(doc: dict[str, Any]) -> list[str]:
    """Keys of `doc` without a description (a test keeps this empty)."""
    missing = [f"Inventory.{k}" for k, p in doc["properties"].items() if "description" not in p]
    for name, definition in doc.get("$defs", {}).items():
        missing += [f"{name}.{k}" for k, p in definition.get("properties", {}).items()
                    if "description" not in p]
    return missing
