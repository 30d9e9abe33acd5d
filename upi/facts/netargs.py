"""A node's `network:` as dracut network kernel arguments (dracut.cmdline(7), "Network").

RHCOS's initramfs hands these to NetworkManager's nm-initrd-generator, which
turns them into keyfiles (tests/test_netargs_nm.py runs the real one). The
same arguments reach the installed system: coreos-installer's automated
install (the `coreos.inst.*` arguments) forwards the networking ones as
first-boot arguments, and on that first boot the keyfiles made from them are
copied into /etc/NetworkManager/system-connections (docs/networking.md).
"""

from __future__ import annotations

from ipaddress import IPv4Address

from upi.inventory.model import Inventory, Node
from upi.inventory.nodenet import AddressMethod, Bond, NodeNetwork
from upi.inventory.segments import Segment, segment_of


def bond_arg(bond: Bond, mtu: int | None) -> str:
    """`bond=<name>:<members>:<options>[:<mtu>]`, options comma-separated as the kernel names them."""
    options = [f"mode={bond.mode.value}"]
    if bond.lacp_rate is not None:
        options.append(f"lacp_rate={bond.lacp_rate.value}")
    options.append(f"miimon={bond.miimon}")
    arg = f"bond={bond.name}:{','.join(bond.members)}:{','.join(options)}"
    return f"{arg}:{mtu}" if mtu else arg


def device(net: NodeNetwork) -> str:
    """The interface that carries the address: the bond or the NIC, or its VLAN on top."""
    top = net.bond.name if net.bond else net.interface
    assert top is not None  # noqa: S101 - netrules: a bond or an interface
    return f"{top}.{net.vlan}" if net.vlan is not None else top


def host_name(node: Node) -> str:
    """The host name ip= sets: the node's short name, the one its DHCP lease hands out too.

    The kubelet registers under the host name, so a node configured statically
    and one by DHCP join under the same kind of name (upi's approver takes both
    forms; one cluster reads better with one).
    """
    return node.name


def network_args(inv: Inventory, node: Node, segs: list[Segment]) -> tuple[str, ...]:
    """The node's network kernel arguments (empty without `network:`)."""
    net = node.network
    if net is None:
        return ()
    args: list[str] = []
    top = net.bond.name if net.bond else net.interface
    if net.bond is not None:
        args.append(bond_arg(net.bond, net.mtu))
    if net.vlan is not None:
        args.append(f"vlan={device(net)}:{top}")
    mtu = f":{net.mtu}" if net.mtu else ""
    if net.address is AddressMethod.dhcp:
        args.append(f"ip={device(net)}:dhcp{mtu}")
    else:
        seg = segment_of(segs, node.ip)
        assert seg is not None  # noqa: S101 - rules: every node is in a machine network
        args.append(f"ip={node.ip}::{seg.gateway}:{seg.cidr.netmask}:{host_name(node)}:"
                    f"{device(net)}:none{mtu}")
    servers: list[IPv4Address] = list(net.dns) or [inv.provisioner.ip]
    args += [f"nameserver={s}" for s in servers]
    return tuple(args)
