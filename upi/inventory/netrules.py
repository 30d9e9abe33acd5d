"""Rules of the machine networks (racks behind relays) and of each node's `network:`.

Each finding names the field it is about, like rules.py; docs/networking.md
says why each layout is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING

from upi.inventory.kargs import karg_problem
from upi.inventory.model import Inventory
from upi.inventory.nodenet import Bond, BondMode
from upi.inventory.segments import LOCAL_TAG, segment_tag

if TYPE_CHECKING:
    from upi.inventory.rules import Finding

# Kernel arguments upi writes from `network:` (dracut.cmdline(7), "Network"): a node that
# has `network:` may not carry them in kernel_args too, they would contradict each other.
NETWORK_KARGS = ("ip", "bond", "vlan", "nameserver", "team", "bridge", "bootdev", "rd.peerdns")
# Linux interface names: at most 15 bytes (IFNAMSIZ 16 with the NUL).
IFNAMSIZ = 15
# Tags dnsmasq sets itself (dnsmasq(8): "known", "known-othernet", "bootp", and the name of
# the interface a request came in on) and upi's own: a rack named so would take them over.
DNSMASQ_TAGS = ("known", "known-othernet", "bootp", "efi-x86_64")


def network_rules(inv: Inventory) -> Iterator[Finding]:
    """Every finding about machine networks and node networking (none for a sound inventory)."""
    yield from _machine_networks(inv)
    for i in range(len(inv.nodes)):
        yield from _node_network(inv, i)


def _host_address(ip: IPv4Address, net: IPv4Network) -> bool:
    return ip in net and ip not in (net.network_address, net.broadcast_address)


def _machine_networks(inv: Inventory) -> Iterator[Finding]:
    extra = inv.network.machine_networks
    if not extra:
        return
    if inv.cluster.version < (4, 2):
        yield ("network", "machine_networks"), (
            f"OpenShift {inv.cluster.openshift_version} takes one machineCIDR: several machine "
            "networks need 4.2 or later")
    named: list[tuple[str, IPv4Network]] = [("machine_cidr", inv.network.machine_cidr)]
    tags: dict[str, int] = {}
    for i, m in enumerate(extra):
        loc = ("network", "machine_networks", i)
        if not _host_address(m.gateway, m.cidr):
            yield (*loc, "gateway"), f"{m.gateway} is not a host address of {m.cidr}"
        if m.relay is not None and not _host_address(m.relay, m.cidr):
            yield (*loc, "relay"), (
                f"{m.relay} is not a host address of {m.cidr}: the relay agent's address (giaddr) "
                "is how dnsmasq picks this network's range, so it must be inside it")
        for other, net in named:
            if m.cidr.overlaps(net):
                yield (*loc, "cidr"), (
                    f"{m.cidr} overlaps {other} {net}: each address must belong to one network")
                break
        named.append((f"machine_networks[{i}]", m.cidr))
        tag = segment_tag(i, m.name)
        if tag == LOCAL_TAG or tag in tags:
            other_name = "the provisioner's network" if tag == LOCAL_TAG else f"machine_networks[{tags[tag]}]"
            yield (*loc, "name"), f"{tag!r} is already the name of {other_name}"
        elif tag in (*DNSMASQ_TAGS, inv.provisioner.interface):
            yield (*loc, "name"), (
                f"{tag!r} is a tag dnsmasq sets itself (known, known-othernet, bootp, the interface "
                "name) or upi's efi-x86_64: every request would get this rack's router; rename it")
        tags.setdefault(tag, i)


def network_warnings(inv: Inventory) -> list[str]:
    """A node whose `network.dns` leaves out the cluster's DNS (the provisioner)."""
    return [f"{n.name}: network.dns does not list the provisioner {inv.provisioner.ip}: the node "
            "resolves api-int and the other cluster names only if these servers forward "
            f"{inv.cluster.domain} to it" for n in inv.nodes
            if n.network and n.network.dns and inv.provisioner.ip not in n.network.dns]


def _node_network(inv: Inventory, i: int) -> Iterator[Finding]:
    node = inv.nodes[i]
    net = node.network
    loc = ("nodes", i, "network")
    if net is None:
        yield from _raw_kargs(inv, i)
        return
    for j, arg in enumerate(node.kernel_args):
        key = arg.split("=", 1)[0]
        if key in NETWORK_KARGS:
            yield ("nodes", i, "kernel_args", j), (
                f"{arg!r} conflicts with network: (upi writes {key}= from it); "
                "say it in network: or drop network:")
    if (net.bond is None) == (net.interface is None):
        yield loc, "name either a bond (bond: {members: [...]}) or one interface, not both"
        return
    top = net.bond.name if net.bond else net.interface
    assert top is not None  # noqa: S101 - one of the two, checked above
    if net.vlan is not None and len(f"{top}.{net.vlan}") > IFNAMSIZ:
        yield (*loc, "vlan"), (
            f"the VLAN interface {top}.{net.vlan} would be longer than {IFNAMSIZ} characters "
            "(Linux's limit): shorten the bond or interface name")
    if net.bond is not None:
        yield from _bond(net.bond, (*loc, "bond"))


def _raw_kargs(inv: Inventory, i: int) -> Iterator[Finding]:
    """Network arguments written by hand in kernel_args, read as dracut will (kargs.py)."""
    for j, arg in enumerate(inv.nodes[i].kernel_args):
        problem = karg_problem(arg)
        if problem:
            yield ("nodes", i, "kernel_args", j), problem


def _bond(bond: Bond, loc: tuple[str | int, ...]) -> Iterator[Finding]:
    seen: set[str] = set()
    for k, member in enumerate(bond.members):
        if member in seen:
            yield (*loc, "members", k), f"{member} is listed twice"
        elif member == bond.name:
            yield (*loc, "members", k), f"{member} is the bond itself"
        seen.add(member)
    if bond.lacp_rate is not None and bond.mode is not BondMode.lacp:
        yield (*loc, "lacp_rate"), (
            f"lacp_rate applies only to mode 802.3ad (LACP); this bond is {bond.mode.value}")
