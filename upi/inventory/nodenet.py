"""A node's in-band networking: bond, VLAN, address, DNS, MTU (docs/networking.md).

The model only; the kernel arguments it becomes are worked out in
upi/facts/netargs.py, and the rules that span it and the rest of the
inventory are in upi/inventory/netrules.py.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from upi.inventory.types import InterfaceName, IPv4, StrictInt


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BondMode(StrEnum):
    """Linux bonding modes, by the names the kernel and dracut's `bond=` take."""

    balance_rr = "balance-rr"
    active_backup = "active-backup"
    balance_xor = "balance-xor"
    broadcast = "broadcast"
    lacp = "802.3ad"
    balance_tlb = "balance-tlb"
    balance_alb = "balance-alb"


class LacpRate(StrEnum):
    """How often an 802.3ad partner is asked for LACPDUs (bonding's lacp_rate)."""

    slow = "slow"
    fast = "fast"


class Bond(_Model):
    """A bond of the node's in-band ports (dracut `bond=`)."""

    name: InterfaceName = "bond0"
    members: list[InterfaceName] = Field(min_length=1)
    mode: BondMode = BondMode.lacp
    lacp_rate: LacpRate | None = None
    miimon: StrictInt = Field(default=100, ge=0, le=60000)


class AddressMethod(StrEnum):
    """How the node's interface gets its address: `ip` written in (static) or DHCP."""

    static = "static"
    dhcp = "dhcp"


class NodeNetwork(_Model):
    """The node's in-band networking for the installer and the installed system.

    Either a `bond` or a single `interface`; an optional `vlan` id on top;
    the node's `ip` written statically (with its network's gateway) or taken
    by DHCP; `dns` defaults to the provisioner (the cluster's DNS).
    """

    interface: InterfaceName | None = None
    bond: Bond | None = None
    vlan: StrictInt | None = Field(default=None, ge=1, le=4094)
    address: AddressMethod = AddressMethod.static
    dns: list[IPv4] = Field(default_factory=list, max_length=3)
    mtu: StrictInt | None = Field(default=None, ge=576, le=9216)
