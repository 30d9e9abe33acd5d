"""The inventory: one typed model of DESIGN.md's contract (`extra="forbid"`).

Field-level rules live here; rules that span fields are in `rules.py` so
that each can name the exact field it is about.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from upi.inventory.gpu import GpuSettings, MigProfile
from upi.inventory.gpupool import GpuPool
from upi.inventory.mirror import MirrorSettings
from upi.inventory.nodenet import NodeNetwork
from upi.inventory.rdma import NetworkOperator, NodeRdma
from upi.inventory.types import (
    AbsPath,
    Artifact,
    ClusterName,
    DevicePath,
    DnsLabel,
    DomainName,
    ExecPath,
    HttpUrl,
    HypervisorUri,
    InterfaceName,
    IPv4,
    IPv4Net,
    KernelArg,
    MacAddress,
    OpenShiftVersion,
    RedfishId,
    RedfishUrl,
    StrictFloat,
    StrictInt,
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Role(StrEnum):
    """What a node is in the cluster."""

    bootstrap = "bootstrap"
    master = "master"
    worker = "worker"


class Machine(StrEnum):
    """Where a node runs: a libvirt VM on the hypervisor, or a bare-metal server."""

    vm = "vm"
    metal = "metal"


class Firmware(StrEnum):
    """How a node network-boots: BIOS (pxelinux) or UEFI (GRUB)."""

    bios = "bios"
    uefi = "uefi"


class NetworkType(StrEnum):
    """The cluster network plugin."""

    OVNKubernetes = "OVNKubernetes"
    OpenShiftSDN = "OpenShiftSDN"


class Proxy(_Model):
    """Cluster-wide egress proxy (install-config `proxy`)."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: list[str] = Field(default_factory=list)


class Mirror(_Model):
    """One image mirror: `source` is served by `mirrors` (imageDigestSources)."""

    source: str
    mirrors: list[str] = Field(min_length=1)


class SshTarget(_Model):
    """How `upi push` reaches a host: `local`, or SSH with a checked host key.

    `reload_command` replaces the default reload of the service whose config
    changed (provisioner: `systemctl restart dnsmasq`, load balancer:
    `systemctl reload haproxy`); it is an argv list, run on that host.
    """

    host: str | None = None
    user: str = "root"
    port: StrictInt = Field(default=22, ge=1, le=65535)
    known_hosts: str | None = None
    identity_file: str | None = None
    local: bool = False
    reload_command: list[str] | None = Field(default=None, min_length=1)
    connect_timeout: StrictFloat = Field(default=10.0, gt=0)
    command_timeout: StrictFloat = Field(default=60.0, gt=0)


class Cluster(_Model):
    """Cluster identity and the secrets the installer needs."""

    name: ClusterName
    base_domain: DomainName
    openshift_version: OpenShiftVersion
    pull_secret_file: str
    ssh_key_file: str
    fips: bool = False
    proxy: Proxy | None = None
    mirrors: list[Mirror] = Field(default_factory=list)
    additional_trust_bundle_file: str | None = None

    @property
    def domain(self) -> str:
        """The cluster's DNS domain, `<name>.<base_domain>`."""
        return f"{self.name}.{self.base_domain}"

    @property
    def version(self) -> tuple[int, int]:
        """(major, minor) of `openshift_version`."""
        major, minor = self.openshift_version.split(".")[:2]
        return int(major), int(minor)


class MachineNetwork(_Model):
    """A further machine network: a rack's L3 segment whose leaf relays DHCP to the provisioner.

    `relay` is the address the leaf's relay agent puts in giaddr (default: the
    gateway, the leaf's own address on the segment); dnsmasq picks the
    segment's range and router by it. `name` tags the segment in dnsmasq.
    """

    cidr: IPv4Net
    gateway: IPv4
    relay: IPv4 | None = None
    name: DnsLabel | None = None

    @property
    def relay_address(self) -> ipaddress.IPv4Address:
        """`relay`, defaulted to the gateway."""
        return self.relay or self.gateway


class Network(_Model):
    """Machine, cluster and service networks, and the upstream resolvers.

    `machine_cidr`/`gateway` are the provisioner's own segment; `machine_networks`
    add relayed segments (racks), each node belonging to the one its IP is in.
    """

    machine_cidr: IPv4Net
    gateway: IPv4
    machine_networks: list[MachineNetwork] = Field(default_factory=list)
    cluster_network: IPv4Net = ipaddress.IPv4Network("10.128.0.0/14")
    host_prefix: StrictInt = Field(default=23, ge=1, le=32)
    service_network: IPv4Net = ipaddress.IPv4Network("172.30.0.0/16")
    upstream_dns: list[IPv4] = Field(default_factory=list)
    network_type: NetworkType | None = None


class DhcpRange(_Model):
    """A dynamic pool for hosts the inventory does not name (nodes get static leases)."""

    start: IPv4
    end: IPv4


class Provisioner(_Model):
    """The x86 server that runs dnsmasq (DNS, DHCP, TFTP) and the HTTP server."""

    ip: IPv4
    interface: InterfaceName
    http_base_url: HttpUrl
    tftp_root: AbsPath = "/var/lib/tftpboot"
    http_root: AbsPath = "/var/www/html"
    dnsmasq_dir: AbsPath = "/etc/dnsmasq.d"
    # Where dnsmasq writes its DHCP and TFTP log (`log-facility`): `upi status` reads it.
    dnsmasq_log: AbsPath = "/var/log/dnsmasq-upi.log"
    # The HTTP server's access log (common/combined format: nginx, httpd), for `upi status`.
    http_access_log: AbsPath | None = None
    dhcp_range: DhcpRange | None = None
    ssh: SshTarget | None = None


class Rhcos(_Model):
    """RHCOS boot artifacts: paths relative to http_base_url, or full URLs."""

    kernel: Artifact
    initramfs: Artifact
    rootfs: Artifact | None = None
    image: Artifact | None = None


class LoadBalancer(_Model):
    """The layer-4 load balancer (HAProxy) in front of API and ingress."""

    ip: IPv4
    hostname: DnsLabel | None = None
    ssh: SshTarget | None = None
    config_path: AbsPath = "/etc/haproxy/haproxy.cfg"


class Hypervisor(_Model):
    """The libvirt host that runs the VM nodes."""

    uri: HypervisorUri
    bridge: InterfaceName
    image_dir: AbsPath = "/var/lib/libvirt/images"
    uefi_loader: AbsPath = "/usr/share/OVMF/OVMF_CODE.fd"


class VmSize(_Model):
    """CPU, memory and disk of one VM node."""

    vcpus: StrictInt = Field(default=4, ge=1, le=512)
    # Upper bounds keep libvirt's KiB and byte counts inside 64 bits.
    memory_mib: StrictInt = Field(default=16384, ge=1024, le=2**24)
    disk_gib: StrictInt = Field(default=100, ge=10, le=2**20)


class Bmc(_Model):
    """Redfish BMC of a bare-metal node; credentials live in a file only its owner can read.

    `verify_tls`: true (the system's CAs), the path of a CA file for this BMC,
    or false (not verified; upi warns at every use). `system_id` names the
    system when the BMC serves several. `timeout`: seconds to connect and per read
    (a whole request, answer included, gets twice that).
    """

    address: RedfishUrl
    credentials_file: str
    system_id: RedfishId | None = None
    verify_tls: bool | str = True
    timeout: StrictFloat = Field(default=20.0, gt=0, le=600)

    @field_validator("verify_tls")
    @classmethod
    def _ca_file_named(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not value.strip():
            raise ValueError("name a CA file, or write true (system CAs) or false (not verified)")
        return value


class Node(_Model):
    """One cluster machine: bootstrap, master or worker."""

    name: DnsLabel
    role: Role
    mac: MacAddress
    ip: IPv4
    machine: Machine | None = None
    firmware: Firmware | None = None
    install_disk: DevicePath | None = None
    gpu: bool = False
    gpus: StrictInt | None = Field(default=None, ge=1, le=64)
    mig_config: MigProfile | None = None
    vm: VmSize | None = None
    bmc: Bmc | None = None
    hypervisor: Hypervisor | None = None
    kernel_args: list[KernelArg] = Field(default_factory=list)
    network: NodeNetwork | None = None
    # true, false, or auto (asked from the BMC); unset: auto with a bmc section, else false.
    # YAML 1.1 reads on/off as true/false.
    secure_boot: bool | Literal["auto"] | None = None
    rdma: NodeRdma | None = None  # GPUDirect RDMA fabric ports (upi.inventory.rdma)

    @property
    def is_control_plane(self) -> bool:
        """Bootstrap and masters: the VMs of the control plane by default."""
        return self.role in (Role.bootstrap, Role.master)

    @property
    def machine_kind(self) -> Machine:
        """`machine`, defaulted by role (control plane: vm, workers: metal)."""
        return self.machine or (Machine.vm if self.is_control_plane else Machine.metal)

    @property
    def boot_firmware(self) -> Firmware:
        """`firmware`, defaulted by role (control plane: bios, workers: uefi)."""
        return self.firmware or (Firmware.bios if self.is_control_plane else Firmware.uefi)

    @property
    def secure_boot_mode(self) -> bool | Literal["auto"]:
        """`secure_boot`, defaulted: auto where a BMC can be asked, else off."""
        if self.secure_boot is not None:
            return self.secure_boot
        return "auto" if self.bmc is not None else False

    @property
    def disk(self) -> str:
        """`install_disk`, defaulted by machine kind (vm: /dev/vda, metal: /dev/sda)."""
        if self.install_disk:
            return self.install_disk
        return "/dev/vda" if self.machine_kind is Machine.vm else "/dev/sda"

    @property
    def size(self) -> VmSize:
        """VM size, defaulted to the documented control-plane minimums."""
        return self.vm or VmSize()


class CsrApprover(_Model):
    """The rendered CSR approver (csr/ units and crontab) on the host that runs it."""

    upi: ExecPath | None = None


class Inventory(_Model):
    """A whole UPI cluster: the one input of every upi command."""

    cluster: Cluster
    network: Network
    provisioner: Provisioner
    rhcos: Rhcos
    load_balancer: LoadBalancer
    hypervisor: Hypervisor | None = None
    nodes: list[Node] = Field(min_length=1)
    gpu: GpuSettings | None = None
    gpu_pool: GpuPool | None = None
    csr_approver: CsrApprover | None = None
    mirror: MirrorSettings | None = None
    network_operator: NetworkOperator | None = None

    # Set by the loader: where the inventory file is, for relative paths.
    source: Path = Field(default=Path("inventory.yaml"), exclude=True)

    @property
    def base_dir(self) -> Path:
        """Directory that relative paths inside the inventory are read from."""
        return self.source.parent

    def resolve(self, relative: str) -> Path:
        """A path from the inventory, relative to the inventory file."""
        path = Path(relative).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def by_role(self, role: Role) -> list[Node]:
        """Nodes of one role, in inventory order."""
        return [n for n in self.nodes if n.role is role]

    @property
    def bootstrap(self) -> Node:
        """The bootstrap node (rules guarantee exactly one)."""
        return self.by_role(Role.bootstrap)[0]

    @property
    def masters(self) -> list[Node]:
        """Control-plane nodes."""
        return self.by_role(Role.master)

    @property
    def workers(self) -> list[Node]:
        """Compute nodes."""
        return self.by_role(Role.worker)

    @property
    def compact(self) -> bool:
        """3-node compact cluster: no workers, masters run ingress and workloads."""
        return not self.workers

    @property
    def masters_schedulable(self) -> bool:
        """Masters take workloads and the ingress routers: compact, or a single worker.

        The ingress controller runs two router replicas on distinct nodes; one
        worker alone cannot hold both, so the masters share the load.
        """
        return len(self.workers) < 2

    @property
    def network_type(self) -> NetworkType:
        """`network.network_type`, defaulted by version (OVN from 4.12)."""
        if self.network.network_type:
            return self.network.network_type
        if self.cluster.version >= (4, 12):
            return NetworkType.OVNKubernetes
        return NetworkType.OpenShiftSDN

    @property
    def live_rootfs(self) -> bool:
        """4.6+ boots the live kernel/initramfs/rootfs; before, a metal image."""
        return self.cluster.version >= (4, 6)

    def hypervisor_of(self, node: Node) -> Hypervisor | None:
        """The hypervisor a VM node runs on (its own, else the inventory's)."""
        return node.hypervisor or self.hypervisor
