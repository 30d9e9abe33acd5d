"""Rules of the machine networks (racks behind relays) and of each node's `network:`.

Each finding names the field it is about, like rules.py; docs/networking.md
says why each layout is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING

from upi.inventory.model import Inventory
from upi.inventory.nodenet import BondMode
from upi.inventory.segments import LOCAL_TAG, segment_tag

if TYPE_CHECKING:
    from upi.inventory.rules import Finding

# Kernel arguments upi writes from `network:` (dracut.cmdline(7), "Network"): a node that
# has `network:` may not carry them in kernel_args too, they would contradict each other.
NETWORK_KARGS = ("ip", "bond", "vlan", "nameserver", "team", "bridge", "bootdev", "rd.peerdns")
# Linux interface names: at most 15 bytes (IFNAMSIZ 16 with the NUL).
IFNAMSIZ = 15


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
        tags.setdefault(tag, i)


def _node_network(inv: Inventory, i: int) -> Iterator[Finding]:
    node = inv.nodes[i]
    net = node.network
    loc = ("nodes", i, "network")
    if net is None:
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
    if net.bond is None:
        return
    bond = net.bond
    seen: set[str] = set()
    for k, member in enumerate(bond.members):
        if member in seen:
            yield (*loc, "bond", "members", k), f"{member} is listed twice"
        elif member == bond.name:
            yield (*loc, "bond", "members", k), f"{member} is the bond itself"
        seen.add(member)
    if bond.lacp_rate is not None and bond.mode is not BondMode.lacp:
        yield (*loc, "bond", "lacp_rate"), (
            f"lacp_rate applies only to mode 802.3ad (LACP); this bond is {bond.mode.value}")
