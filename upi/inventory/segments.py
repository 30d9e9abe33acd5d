"""The machine networks as dnsmasq serves them: the provisioner's own segment, then relayed ones.

One list, computed once: the DHCP config gives each segment its range and
router, install-config lists every CIDR, `upi check` and `upi status` ask
which segment an address is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

from upi.inventory.model import Inventory

# dnsmasq's tag for the provisioner's own segment once there are relayed ones.
LOCAL_TAG = "machine"


@dataclass(frozen=True)
class Segment:
    """One machine network: where `where` names it in the inventory, for messages."""

    tag: str | None  # dnsmasq tag; None when the provisioner's segment is the only one
    cidr: IPv4Network
    gateway: IPv4Address
    relay: IPv4Address | None  # giaddr of the leaf's relay; None: on provisioner.interface
    where: str  # "machine_cidr" or "machine_networks[2]"

    @property
    def relayed(self) -> bool:
        """DHCP reaches the provisioner through a relay agent on this segment."""
        return self.relay is not None


def segment_tag(index: int, name: str | None) -> str:
    """The dnsmasq tag of machine_networks[index]: its name, else machine<index+1>."""
    return name or f"{LOCAL_TAG}{index + 1}"


def segments(inv: Inventory) -> list[Segment]:
    """The provisioner's segment first, then machine_networks in inventory order."""
    n = inv.network
    extra = n.machine_networks
    out = [Segment(LOCAL_TAG if extra else None, n.machine_cidr, n.gateway, None, "machine_cidr")]
    out += [Segment(segment_tag(i, m.name), m.cidr, m.gateway, m.relay_address, f"machine_networks[{i}]")
            for i, m in enumerate(extra)]
    return out


def segment_of(segs: list[Segment], ip: IPv4Address) -> Segment | None:
    """The segment `ip` is in, or None (the rules refuse a node outside every one)."""
    return next((s for s in segs if ip in s.cidr), None)


def describe(segs: list[Segment]) -> str:
    """`machine_cidr 10.33.3.0/24` or `every machine network (10.33.3.0/24, 10.34.1.0/24)`."""
    if len(segs) == 1:
        return f"machine_cidr {segs[0].cidr}"
    return "every machine network (" + ", ".join(str(s.cidr) for s in segs) + ")"
