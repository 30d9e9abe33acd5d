"""What an admin expects upi to notice: sizes, versions, libvirt's NAT bridge, port clashes.

Each finding says why it matters. Errors are things that cannot work;
warnings are things that work badly or only by luck.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from ipaddress import IPv4Address
from urllib.parse import urlsplit

from upi.inventory.model import Inventory, Machine, Role

Finding = tuple[tuple[str | int, ...], str]

# OpenShift's documented minimum resources per role (vCPU, RAM MiB, disk GiB).
MINIMUMS = {
    Role.bootstrap: (4, 16384, 100),
    Role.master: (4, 16384, 100),
    Role.worker: (2, 8192, 100),
}
LIBVIRT_NAT_BRIDGE = "virbr0"
# What the load balancer listens on: API, machine-config server, ingress.
LB_PORTS = {6443: "the API", 22623: "the machine-config server", 80: "ingress HTTP",
            443: "ingress HTTPS"}
# rhcos-4.16.3-x86_64-live-kernel-x86_64 (4.6-4.12 style, and 4.3's installer-kernel)
_RELEASE_NAME = re.compile(r"^rhcos-(\d+)\.(\d+)\.\d+-x86_64-")
# rhcos-418.94.202410090804-0-live-kernel-x86_64: the build's first number is 4 and the minor
_BUILD_NAME = re.compile(r"^rhcos-(\d)(\d{1,2})\.\d+\.\d{12}-\d+-")


def rhcos_version_of(path: str) -> tuple[int, int] | None:
    """The OpenShift (major, minor) an RHCOS file name says it is for, when it says one.

    RHEL-numbered builds (rhcos-9.6.20250402-0-..., 4.19 and later) name no
    OpenShift version: only the installer's stream can tell (`upi images`).
    """
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for pattern in (_RELEASE_NAME, _BUILD_NAME):
        found = pattern.match(name)
        if found and found.group(1) == "4":
            return 4, int(found.group(2))
    return None


def sanity_rules(inv: Inventory) -> Iterator[Finding]:
    """Errors: a layout that cannot work."""
    yield from _lb_vs_http(inv)


def sanity_warnings(inv: Inventory) -> list[str]:
    """Warnings: what works badly, or only by luck."""
    out = [*_small_vms(inv), *_rhcos_versions(inv)]
    named = [("hypervisor.bridge", inv.hypervisor)]
    named += [(f"{n.name}: hypervisor.bridge", n.hypervisor) for n in inv.nodes]
    metal = [n.name for n in inv.nodes if n.machine_kind is Machine.metal]
    for where, hyp in named:
        if hyp is None or hyp.bridge != LIBVIRT_NAT_BRIDGE:
            continue
        outside = f"the bare-metal nodes ({', '.join(metal)})" if metal else "machines outside this host"
        out.append(f"{where} is {LIBVIRT_NAT_BRIDGE}, libvirt's NAT network: {outside} cannot reach "
                   "the VMs behind it, and libvirt's own DHCP answers there; use a bridge that "
                   "enslaves the provisioning NIC (br0)")
    return out


def _small_vms(inv: Inventory) -> Iterator[str]:
    for node in inv.nodes:
        if node.machine_kind is not Machine.vm:
            continue
        cpus, mem, disk = MINIMUMS[node.role]
        size = node.size
        short = [f"{what} {have} < {need}" for what, have, need in
                 (("vcpus", size.vcpus, cpus), ("memory_mib", size.memory_mib, mem),
                  ("disk_gib", size.disk_gib, disk)) if have < need]
        if short:
            yield (f"{node.name}: vm {', '.join(short)}: below the documented minimum for a "
                   f"{node.role.value} ({cpus} vCPU, {mem} MiB, {disk} GiB); the install may "
                   "stall or the node be evicted under load")


def _rhcos_versions(inv: Inventory) -> Iterator[str]:
    want = inv.cluster.version
    files = [(k, getattr(inv.rhcos, k)) for k in ("kernel", "initramfs", "rootfs", "image")]
    for key, path in files:
        found = rhcos_version_of(path) if path else None
        if found and found != want:
            yield (f"rhcos.{key} is RHCOS for {found[0]}.{found[1]} but cluster.openshift_version "
                   f"is {inv.cluster.openshift_version}: boot the RHCOS the installer was built for "
                   "(`upi images` reads it from openshift-install); another one may not read the "
                   "installer's Ignition or must update itself first")


def _lb_vs_http(inv: Inventory) -> Iterator[Finding]:
    url = urlsplit(inv.provisioner.http_base_url)
    try:
        host = IPv4Address(url.hostname or "")
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return  # a host name (or a bad port the URL check reports): nothing to compare
    if host == inv.load_balancer.ip and port in LB_PORTS:
        yield ("provisioner", "http_base_url"), (
            f"{host}:{port} is where the load balancer serves {LB_PORTS[port]}: the HTTP server "
            "cannot listen there too; give it its own port (http://...:8080) or address")
