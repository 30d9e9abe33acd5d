"""What the provisioner needs before the first `upi push`: packages, services, web server, bridge.

One plan, computed from the inventory, that `provisioner/prepare.sh` (RHEL 9)
formats and docs/prepare.md explains. The load balancer and the hypervisor
are parts of this host only when the inventory puts them here: otherwise
their packages and services belong to the host that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from upi.facts.firewall import http_port
from upi.inventory.model import Firmware, Inventory, Machine, SshTarget

# RHEL 9's web server and where its configuration lives (the httpd package).
WEB_SERVER = "httpd"
HTTPD_MAIN_CONF = "/etc/httpd/conf/httpd.conf"
HTTPD_DROP_IN = "/etc/httpd/conf.d/upi.conf"


@dataclass(frozen=True)
class Service:
    """A systemd unit to enable; `now` also starts it."""

    unit: str
    package: str
    now: bool
    why: str


@dataclass(frozen=True)
class Bridge:
    """The bridge the VMs join, taking over the provisioner's NIC and its address."""

    name: str
    # The NIC enslaved: provisioner.interface; None when that is the bridge itself (dnsmasq
    # serves the bridge), and the NIC is named when the script runs.
    port: str | None
    address: str  # 10.33.3.18/24
    gateway: str
    dns: tuple[str, ...]


@dataclass(frozen=True)
class PreparePlan:
    """Everything prepare.sh does, and what it leaves to other hosts (with why)."""

    domain: str
    ip: str
    packages: tuple[str, ...]
    services: tuple[Service, ...]
    http_port: int
    http_root: str
    http_path: str  # the path of http_base_url ("" or "/ocp"): where http_root is served
    tftp_root: str
    bridge: Bridge | None
    elsewhere: tuple[str, ...]  # one line each: what another host (or the admin) does


def _endpoint(ssh: SshTarget | None, ip: str) -> tuple[str, int]:
    if ssh is not None and ssh.local:
        return ("local", 0)
    return ((ssh.host if ssh and ssh.host else ip), ssh.port if ssh else 22)


def load_balancer_here(inv: Inventory) -> bool:
    """HAProxy runs on the provisioner: same address, or the same host by `upi push`'s reckoning."""
    prov, lb = inv.provisioner, inv.load_balancer
    if lb.ip == prov.ip:
        return True
    return _endpoint(lb.ssh, str(lb.ip)) == _endpoint(prov.ssh, str(prov.ip))


def _hypervisor_host(uri: str) -> str | None:
    """The host a libvirt URI names; None for a local one (qemu:///system)."""
    return urlsplit(uri).hostname or None


def _local_vms(inv: Inventory) -> tuple[list[str], list[str], bool]:
    """Bridges of the VMs that run on the provisioner, the remote hypervisors, any UEFI VM here."""
    here_names = {str(inv.provisioner.ip)}
    if inv.provisioner.ssh and inv.provisioner.ssh.host:
        here_names.add(inv.provisioner.ssh.host)
    bridges: list[str] = []
    remote: list[str] = []
    uefi = False
    for node in inv.nodes:
        hv = inv.hypervisor_of(node)
        if node.machine_kind is not Machine.vm or hv is None:
            continue
        host = _hypervisor_host(hv.uri)
        if host is not None and host not in here_names:
            if host not in remote:
                remote.append(host)
            continue
        if hv.bridge not in bridges:
            bridges.append(hv.bridge)
        uefi = uefi or node.boot_firmware is Firmware.uefi
    return bridges, remote, uefi


def _bridge(inv: Inventory, bridges: list[str]) -> tuple[Bridge | None, list[str]]:
    """The bridge that takes over provisioner.interface, and what is left to the admin."""
    notes: list[str] = []
    if not bridges:
        return None, notes
    prov = inv.provisioner
    # The inventory's own hypervisor first: its bridge is the one named for the VMs.
    top = inv.hypervisor.bridge if inv.hypervisor and inv.hypervisor.bridge in bridges else None
    name = top or bridges[0]
    notes += [f"bridge {b} (per-node hypervisor): create it yourself, it has no NIC named in "
              "the inventory" for b in bridges if b != name]
    prefix = inv.network.machine_cidr.prefixlen
    port = None if name == prov.interface else prov.interface
    return Bridge(name=name, port=port, address=f"{prov.ip}/{prefix}",
                  gateway=str(inv.network.gateway),
                  dns=tuple(str(s) for s in inv.network.upstream_dns)), notes


def prepare_plan(inv: Inventory) -> PreparePlan:
    """Packages, services, web server and bridge of the provisioner, from the inventory."""
    bridges, remote_hv, uefi = _local_vms(inv)
    lb_here = load_balancer_here(inv)
    packages = ["dnsmasq", WEB_SERVER, "policycoreutils-python-utils", "firewalld"]
    services = [
        Service("firewalld.service", "firewalld", True,
                "firewall/provisioner.sh opens DNS, DHCP, TFTP and the HTTP port in it"),
        Service("httpd.service", WEB_SERVER, True,
                f"serves {inv.provisioner.http_root} at {inv.provisioner.http_base_url}"),
        # Not started here: it would run on the stock configuration alone (and a dnsmasq bound to
        # every address fails beside libvirt's); `upi push` (re)starts it with the rendered dnsmasq/.
        Service("dnsmasq.service", "dnsmasq", False,
                "started by upi push with the rendered dnsmasq/ configuration"),
    ]
    elsewhere: list[str] = []
    if lb_here:
        packages.append("haproxy")
        # Started: `upi push` reloads HAProxy, which needs it running.
        services.append(Service("haproxy.service", "haproxy", True,
                                "the load balancer; upi push reloads it with haproxy/haproxy.cfg"))
    else:
        elsewhere.append(f"HAProxy runs on the load balancer {inv.load_balancer.ip}: install and "
                         "enable haproxy there (dnf install -y haproxy; systemctl enable --now "
                         "haproxy) and run firewall/load-balancer.sh there")
    if bridges:
        packages += ["libvirt", "qemu-kvm", "virt-install"]
        if uefi:
            packages.append("edk2-ovmf")
        # RHEL 9's libvirt runs as modular daemons, socket-activated: QEMU and storage.
        services += [
            Service("virtqemud.socket", "libvirt", True, "the QEMU driver of libvirt, for boot-vms"),
            Service("virtstoraged.socket", "libvirt", True,
                    "the storage driver of libvirt, for the VM disks"),
        ]
    elsewhere += [f"the VMs on {h}: install libvirt, qemu-kvm and create their bridge there"
                  for h in remote_hv]
    bridge, notes = _bridge(inv, bridges)
    elsewhere += notes
    prov = inv.provisioner
    url = urlsplit(prov.http_base_url)
    if url.scheme == "https":
        elsewhere.append(f"TLS for {prov.http_base_url}: install mod_ssl and give the virtual host "
                         "SSLEngine on and a certificate (the drop-in serves plain HTTP)")
    return PreparePlan(
        domain=inv.cluster.domain, ip=str(prov.ip), packages=tuple(packages),
        services=tuple(services), http_port=http_port(inv), http_root=prov.http_root,
        http_path=url.path.rstrip("/"),
        tftp_root=prov.tftp_root, bridge=bridge,
        elsewhere=tuple(elsewhere))
