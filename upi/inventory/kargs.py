"""Network kernel arguments written by hand in `kernel_args`, read as dracut and NetworkManager will.

Without `network:`, an admin may still write `ip=`, `bond=` or `vlan=` in
`kernel_args`; a typo there is otherwise found when the node never comes up
(nm-initrd-generator drops what it cannot read, with a warning nobody sees).
The forms are dracut.cmdline(7)'s "Network" section; bond options are the
bonding driver's parameters (the kernel's Documentation/networking/bonding.rst),
which NetworkManager's bond setting takes by the same names.
"""

from __future__ import annotations

import ipaddress
import re

from upi.inventory.nodenet import BondMode

BOND_OPTIONS = frozenset({
    "ad_actor_sys_prio", "ad_actor_system", "ad_select", "ad_user_port_key", "all_slaves_active",
    "arp_all_targets", "arp_interval", "arp_ip_target", "arp_missed_max", "arp_validate",
    "downdelay", "fail_over_mac", "lacp_active", "lacp_rate", "lp_interval", "miimon", "min_links",
    "mode", "ns_ip6_target", "num_grat_arp", "num_unsol_na", "packets_per_slave", "peer_notif_delay",
    "primary", "primary_reselect", "resend_igmp", "tlb_dynamic_lb", "updelay", "use_carrier",
    "xmit_hash_policy"})
# The kernel takes a mode by name or by number.
BOND_MODES = frozenset({m.value for m in BondMode} | {str(n) for n in range(7)})
LACP_RATES = frozenset({"slow", "fast", "0", "1"})
# ip=<method> alone, ip=<interface>:<method>, and the method field of the static form.
AUTOCONF = frozenset({"dhcp", "on", "any", "dhcp6", "auto6", "either6", "link6", "ibft", "none", "off",
                      "single-dhcp"})
_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")


def karg_problem(arg: str) -> str | None:
    """Why dracut/NetworkManager would not take this network argument as meant; None if fine."""
    key, _, value = arg.partition("=")
    check = {"bond": _bond, "vlan": _vlan, "ip": _ip}.get(key)
    problem = check(value) if check else None
    return f"{arg!r}: {problem}" if problem else None


def _bond(value: str) -> str | None:
    fields = value.split(":")
    if not fields[0] or not _IFNAME.fullmatch(fields[0]):
        return "bond=<name>:<members>:<options>[:<mtu>] needs a bond name"
    if len(fields) > 1 and not all(_IFNAME.fullmatch(m) for m in fields[1].split(",")):
        return "the members must be interface names, comma-separated"
    for option in fields[2].split(",") if len(fields) > 2 and fields[2] else []:
        name, _, setting = option.partition("=")
        if name not in BOND_OPTIONS:
            return f"{name!r} is not a bonding option (mode, miimon, lacp_rate, xmit_hash_policy, ...)"
        if name == "mode" and setting not in BOND_MODES:
            return f"mode {setting!r} is not a bonding mode ({', '.join(m.value for m in BondMode)})"
        if name == "lacp_rate" and setting not in LACP_RATES:
            return f"lacp_rate {setting!r} is neither slow nor fast"
    if len(fields) > 3 and not fields[3].isdigit():
        return f"the MTU {fields[3]!r} is not a number"
    if len(fields) > 4:
        return "bond= takes at most 4 fields: <name>:<members>:<options>:<mtu>"
    return None


def _vlan(value: str) -> str | None:
    fields = value.split(":")
    if len(fields) != 2 or not all(_IFNAME.fullmatch(f) for f in fields):
        return "vlan= is <vlan interface>:<parent interface> (vlan=bond0.120:bond0)"
    return None


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _ip(value: str) -> str | None:
    fields = value.split(":")
    if not _is_ipv4(fields[0]):  # ip=<method> or ip=<interface>:<method>[:<mtu>[:<mac>]]
        method = fields[0] if len(fields) == 1 else fields[1]
        if method not in AUTOCONF:
            return f"{method!r} is not an ip= method ({', '.join(sorted(AUTOCONF))})"
        return None
    if len(fields) < 7:
        return "the static form is ip=<ip>::<gateway>:<netmask>:<hostname>:<interface>:none"
    gateway, netmask, method = fields[2], fields[3], fields[6]
    if gateway and not _is_ipv4(gateway):
        return f"the gateway {gateway!r} is not an IPv4 address"
    if not (_is_ipv4(netmask) or (netmask.isdigit() and int(netmask) <= 32)):
        return f"the netmask {netmask!r} is neither a mask (255.255.255.0) nor a prefix length"
    if method not in AUTOCONF:
        return f"{method!r} is not an ip= method ({', '.join(sorted(AUTOCONF))})"
    return None
