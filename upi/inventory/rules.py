"""Rules that span fields of the inventory; each names the field it is about."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from typing import Any

from upi.errors import UpiError
from upi.inventory.gpu import gpu_rules, gpu_warnings
from upi.inventory.installer_rules import (
    fips_ssh_key,
    installer_rules,
    installer_warnings,
    masquerade_overlap,
)
from upi.inventory.mirror import mirror_files, mirror_rules
from upi.inventory.model import Firmware, Inventory, Machine, NetworkType, Node, Role
from upi.inventory.netrules import network_rules, network_warnings
from upi.inventory.pullsecret import MAX_PULL_SECRET, pull_secret_problems
from upi.inventory.rdma import rdma_rules, rdma_warnings
from upi.inventory.safety import safety_rules, safety_warnings, trust_bundle
from upi.inventory.sanity import sanity_rules, sanity_warnings
from upi.inventory.segments import describe, segment_of, segments
from upi.safefs import read_named_file

Finding = tuple[tuple[str | int, ...], str]

# OVN-Kubernetes reserves these for its join and transit switches (and, in
# installer_rules, 169.254.0.0/17 for masquerading).
OVN_INTERNAL = (
    ("internal", ipaddress.IPv4Network("100.64.0.0/16")),  # the join switch
    ("transit", ipaddress.IPv4Network("100.88.0.0/16")),
)
# The installer's words when two of its networks overlap (pkg/types/validation).
OVERLAP_REASONS = {
    ("machine_cidr", "cluster_network"): "cluster network must not overlap with any of the machine networks",
    ("machine_cidr", "service_network"): "service network must not overlap with any of the machine networks",
    ("cluster_network", "service_network"): "cluster network must not overlap with service network 0",
}
# Files the inventory names are read whole: none of them is anywhere near this.
MAX_NAMED_FILE = 4 << 20
# Names the cluster's own DNS records use: a node may not take them.
RESERVED_NAMES = {"api", "api-int", "apps", "console", "oauth"}


def check_rules(inv: Inventory, *, check_files: bool = True) -> list[Finding]:
    """Every cross-field problem of a parsed inventory (empty when valid)."""
    findings: list[Finding] = []
    for rule in (_roles, _names, _addresses, _networks, _network_type, _rhcos, _machines, _bmcs,
                 gpu_rules, safety_rules, sanity_rules, installer_rules, network_rules,
                 mirror_rules, rdma_rules):
        findings.extend(rule(inv))
    if check_files:
        findings.extend(_files(inv))
    return findings


def warnings(inv: Inventory) -> list[str]:
    """Things that work but that an admin probably wants to know."""
    out = []
    if not inv.network.upstream_dns:
        out.append("network.upstream_dns is empty: the nodes resolve only cluster names")
    if inv.cluster.version < (4, 12):
        out.append(f"OpenShift {inv.cluster.openshift_version} is past end of life")
    if inv.compact:
        out.append("no workers: a 3-node compact cluster; masters run ingress and workloads")
    elif len(inv.workers) == 1:
        out.append(
            f"1 worker ({inv.workers[0].name}): the ingress controller runs two routers on distinct "
            "nodes, so the masters are made schedulable (mastersSchedulable: true through upi "
            "ignition) and the 80/443 pools hold the masters and the worker"
        )
    return (out + gpu_warnings(inv) + safety_warnings(inv) + sanity_warnings(inv) + installer_warnings(inv)
            + network_warnings(inv) + rdma_warnings(inv))


def _roles(inv: Inventory) -> Iterator[Finding]:
    boot, masters, _ = (len(inv.by_role(r)) for r in Role)
    if boot != 1:
        yield ("nodes",), f"exactly one bootstrap node is needed; found {boot}"
    if masters != 3:
        yield ("nodes",), f"exactly 3 master nodes are needed; found {masters}"


def _names(inv: Inventory) -> Iterator[Finding]:
    seen: dict[str, int] = {}
    for i, node in enumerate(inv.nodes):
        if node.name in seen:
            yield ("nodes", i, "name"), f"{node.name!r} is already the name of nodes[{seen[node.name]}]"
        seen.setdefault(node.name, i)
        if node.name in RESERVED_NAMES or node.name.startswith("etcd-"):
            yield ("nodes", i, "name"), f"{node.name!r} is a name the cluster's DNS records use"
    if inv.load_balancer.hostname and inv.load_balancer.hostname in seen:
        yield ("load_balancer", "hostname"), f"{inv.load_balancer.hostname!r} is also a node name"


def _addresses(inv: Inventory) -> Iterator[Finding]:
    net = inv.network.machine_cidr
    gw = inv.network.gateway
    if gw not in net or gw in (net.network_address, net.broadcast_address):
        yield ("network", "gateway"), f"{gw} is not a host address of machine_cidr {net}"
    if inv.provisioner.ip not in net:
        yield ("provisioner", "ip"), f"{inv.provisioner.ip} is outside machine_cidr {net}"
    if inv.provisioner.ip in inv.network.upstream_dns:
        yield ("network", "upstream_dns"), "must not name the provisioner itself (a DNS loop)"
    taken = {gw: "the gateway", inv.load_balancer.ip: "the load balancer",
             inv.provisioner.ip: "the provisioner"}
    segs = segments(inv)
    for rack in segs[1:]:
        taken.setdefault(rack.gateway, f"the gateway of {rack.where}")
        if rack.relay is not None:
            taken.setdefault(rack.relay, f"the relay of {rack.where}")
    macs: dict[str, str] = {}
    ips: dict[Any, str] = {}
    for i, node in enumerate(inv.nodes):
        if node.mac in macs:
            yield ("nodes", i, "mac"), f"{node.mac} is already the MAC of {macs[node.mac]}"
        macs.setdefault(node.mac, node.name)
        ip = node.ip
        seg = segment_of(segs, ip)
        if seg is None:
            yield ("nodes", i, "ip"), f"{ip} is outside {describe(segs)}"
        elif ip in (seg.cidr.network_address, seg.cidr.broadcast_address):
            yield ("nodes", i, "ip"), f"{ip} is the network or broadcast address of {seg.cidr}"
        elif ip in taken:
            yield ("nodes", i, "ip"), f"{ip} is the address of {taken[ip]}"
        elif ip in ips:
            yield ("nodes", i, "ip"), f"{ip} is already the address of {ips[ip]}"
        ips.setdefault(ip, node.name)
    yield from _dhcp_range(inv, ips)


def _dhcp_range(inv: Inventory, ips: dict[Any, str]) -> Iterator[Finding]:
    rng = inv.provisioner.dhcp_range
    if rng is None:
        return
    net = inv.network.machine_cidr
    loc = ("provisioner", "dhcp_range")
    if rng.start not in net or rng.end not in net:
        yield loc, f"{rng.start}-{rng.end} is not inside machine_cidr {net}"
    elif rng.start > rng.end:
        yield loc, f"start {rng.start} is after end {rng.end}"
    else:
        inside = sorted(name for ip, name in ips.items() if rng.start <= ip <= rng.end)
        if inside:
            yield loc, f"the dynamic range holds node addresses ({', '.join(inside)})"


def _networks(inv: Inventory) -> Iterator[Finding]:
    n = inv.network
    named = [("machine_cidr", n.machine_cidr), ("cluster_network", n.cluster_network),
             ("service_network", n.service_network)]
    for i, (a_name, a) in enumerate(named):
        for b_name, b in named[i + 1:]:
            if a.overlaps(b):
                yield ("network", b_name), (
                    f"{b} overlaps {a_name} {a} (openshift-install: {OVERLAP_REASONS[a_name, b_name]})"
                )
    if n.host_prefix < n.cluster_network.prefixlen or n.host_prefix > 30:
        smaller = n.host_prefix < n.cluster_network.prefixlen
        yield ("network", "host_prefix"), (
            f"/{n.host_prefix} must be between the cluster_network prefix "
            f"/{n.cluster_network.prefixlen} and /30"
            + (" (openshift-install: cluster network host subnetwork prefix must not be larger size "
               f"than CIDR {n.cluster_network})" if smaller else "")
        )
    else:
        # Every node but the bootstrap takes one /host_prefix out of cluster_network.
        room = 2 ** (n.host_prefix - n.cluster_network.prefixlen)
        nodes = len(inv.masters) + len(inv.workers)
        if nodes > room:
            yield ("network", "host_prefix"), (
                f"cluster_network {n.cluster_network} cut into /{n.host_prefix} pod subnets has "
                f"room for {room} nodes; the inventory has {nodes}: widen cluster_network or "
                "raise host_prefix"
            )
    yield from _relayed_walls(inv, named)


def _relayed_walls(inv: Inventory, named: list[tuple[str, Any]]) -> Iterator[Finding]:
    """Relayed machine networks meet machine_cidr's walls (netrules: among themselves); OVN's for all."""
    n = inv.network
    for i, m in enumerate(n.machine_networks):
        for b_name, b in named[1:]:
            if m.cidr.overlaps(b):
                yield ("network", "machine_networks", i, "cidr"), (
                    f"{m.cidr} overlaps {b_name} {b} "
                    f"(openshift-install: {OVERLAP_REASONS['machine_cidr', b_name]})")
    if inv.network_type is not NetworkType.OVNKubernetes:
        return
    located: list[tuple[tuple[str | int, ...], Any]] = [(("network", name), net) for name, net in named]
    located += [(("network", "machine_networks", i, "cidr"), m.cidr)
                for i, m in enumerate(n.machine_networks)]
    for loc, net in located:
        for what, internal in OVN_INTERNAL:
            if net.overlaps(internal):
                yield loc, (
                    f"{net} overlaps OVN-Kubernetes' internal {internal} (openshift-install: "
                    f"must not overlap with OVNKubernetes default {what} subnet {internal})"
                )
        masquerade = masquerade_overlap(net)
        if masquerade:
            yield loc, masquerade


def _network_type(inv: Inventory) -> Iterator[Finding]:
    chosen = inv.network.network_type
    v = inv.cluster.version
    loc = ("network", "network_type")
    if chosen is NetworkType.OpenShiftSDN and v >= (4, 15):
        yield loc, (
            f"OpenShiftSDN is not supported for new installs of {inv.cluster.openshift_version}; "
            "use OVNKubernetes (openshift-install: networkType OpenShiftSDN is not supported, "
            "please use OVNKubernetes)"
        )
    if chosen is NetworkType.OVNKubernetes and v < (4, 6):
        yield loc, f"OVNKubernetes needs OpenShift 4.6 or later (this is {inv.cluster.openshift_version})"


def _rhcos(inv: Inventory) -> Iterator[Finding]:
    r = inv.rhcos
    ver = inv.cluster.openshift_version
    if inv.live_rootfs:
        if not r.rootfs:
            yield ("rhcos", "rootfs"), f"OpenShift {ver} boots the live rootfs: name rhcos.rootfs"
        if r.image:
            yield ("rhcos", "image"), f"OpenShift {ver} boots the live rootfs; image is for 4.1-4.5"
    else:
        if not r.image:
            yield ("rhcos", "image"), f"OpenShift {ver} installs a metal image: name rhcos.image"
        if r.rootfs:
            yield ("rhcos", "rootfs"), f"OpenShift {ver} has no live rootfs (from 4.6): use image"


def _machines(inv: Inventory) -> Iterator[Finding]:
    for i, node in enumerate(inv.nodes):
        if node.machine_kind is Machine.vm and inv.hypervisor_of(node) is None:
            yield ("nodes", i, "machine"), (
                f"{node.name} is a VM but there is no hypervisor (add a top-level hypervisor:)"
            )
        if node.machine_kind is Machine.metal and node.vm is not None:
            yield ("nodes", i, "vm"), f"{node.name} is bare metal: vm sizes apply only to VMs"
        if node.gpu and node.machine_kind is Machine.metal and node.boot_firmware is Firmware.bios:
            yield ("nodes", i, "firmware"), (
                f"{node.name} is a DGX (gpu: true): DGX systems network-boot only with UEFI"
            )
        yield from _secure_boot(i, node)


def _secure_boot(i: int, node: Node) -> Iterator[Finding]:
    """Secure Boot is a UEFI feature of a bare-metal node; auto needs a BMC to ask."""
    if node.secure_boot is None or node.secure_boot is False:
        return
    if node.machine_kind is not Machine.metal:
        yield ("nodes", i, "secure_boot"), (
            f"{node.name} is a VM: secure_boot is for bare-metal nodes (libvirt boots VMs)")
    elif node.boot_firmware is Firmware.bios:
        yield ("nodes", i, "secure_boot"), (
            f"{node.name} boots with BIOS: Secure Boot needs firmware: uefi")
    elif node.secure_boot == "auto" and node.bmc is None:
        yield ("nodes", i, "secure_boot"), (
            f"{node.name} has no bmc section to ask: write secure_boot: true or false")


def _files(inv: Inventory) -> Iterator[Finding]:
    yield from _pull_secret(inv)
    yield from _ssh_key(inv)
    bundle = inv.cluster.additional_trust_bundle_file
    if bundle:
        text, why = _read(inv, bundle)
        if text is None:
            yield ("cluster", "additional_trust_bundle_file"), why
        else:
            yield from trust_bundle(inv, text)
    yield from bmc_files(inv)
    yield from _ssh_files(inv)
    yield from mirror_files(inv)


def _ssh_files(inv: Inventory) -> Iterator[Finding]:
    """`push` hands identity_file to paramiko: a plain file (a FIFO would hang it).

    known_hosts is checked where it is parsed (remote.hostkeys.load_known_hosts).
    """
    for section in ("provisioner", "load_balancer"):
        ssh = getattr(inv, section).ssh
        if ssh and ssh.identity_file and not ssh.local:
            text, why = _read(inv, ssh.identity_file)
            if text is None:
                yield (section, "ssh", "identity_file"), why


def _bmcs(inv: Inventory) -> Iterator[Finding]:
    seen: dict[tuple[str, str | None], str] = {}
    for i, node in enumerate(inv.nodes):
        if node.bmc is None:
            continue
        if node.machine_kind is not Machine.metal:
            yield ("nodes", i, "bmc"), f"{node.name} is a VM (libvirt boots it): bmc is for bare metal"
        key = (node.bmc.address.lower(), node.bmc.system_id)
        if key in seen:
            yield ("nodes", i, "bmc", "address"), (
                f"{node.bmc.address} is already the BMC of {seen[key]}"
                + ("" if node.bmc.system_id else "; name each node's bmc.system_id"))
        seen.setdefault(key, node.name)


def bmc_files(inv: Inventory, names: Iterable[str] | None = None) -> Iterator[Finding]:
    """The BMC credentials (owner-only, well formed) and CA files of the nodes `names` (default: all)."""
    wanted = None if names is None else set(names)
    chosen = [(i, node) for i, node in enumerate(inv.nodes)
              if node.bmc is not None and (wanted is None or node.name in wanted)]
    if not chosen:
        return  # and the Redfish client is not imported: most renders have no BMC
    from upi.bmc.credentials import CredentialsError, read_credentials

    for i, node in chosen:
        assert node.bmc is not None  # noqa: S101 - chosen above
        try:
            read_credentials(inv.resolve(node.bmc.credentials_file))
        except CredentialsError as exc:
            yield ("nodes", i, "bmc", "credentials_file"), str(exc)
        ca = node.bmc.verify_tls
        if isinstance(ca, str) and _read(inv, ca)[0] is None:
            yield ("nodes", i, "bmc", "verify_tls"), f"cannot read the CA file {ca}"


def _read(inv: Inventory, name: str, limit: int = MAX_NAMED_FILE) -> tuple[str | None, str]:
    """(text, "") of a file the inventory names, or (None, why not): never hangs on a FIFO."""
    where = "(relative paths start at the inventory's folder)"
    try:
        return read_named_file(inv.resolve(name), limit).decode("utf-8"), ""
    except UpiError as exc:
        return None, f"cannot read {name}: {exc}"
    except OSError as exc:
        return None, f"cannot read {name} {where}: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return None, f"cannot read {name}: it is not UTF-8 text"


def _pull_secret(inv: Inventory) -> Iterator[Finding]:
    name = inv.cluster.pull_secret_file
    loc = ("cluster", "pull_secret_file")
    text, why = _read(inv, name, MAX_PULL_SECRET)
    if text is None:
        yield loc, why
        return
    # Never echo the content: it is a secret.
    for problem in pull_secret_problems(name, text):
        yield loc, problem


def _ssh_key(inv: Inventory) -> Iterator[Finding]:
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    name = inv.cluster.ssh_key_file
    loc = ("cluster", "ssh_key_file")
    text, why = _read(inv, name)
    if text is None:
        yield loc, why
        return
    if "PRIVATE KEY" in text:
        yield loc, f"{name} is a private key: name the .pub file"
        return
    try:
        load_ssh_public_key(text.strip().encode())
    except (ValueError, TypeError, Exception):  # noqa: BLE001 - any parse failure means "not a key"
        yield loc, f"{name} is not an OpenSSH public key (ssh-ed25519/ssh-rsa/ecdsa-... AAAA...)"
        return
    yield from fips_ssh_key(inv, text)
