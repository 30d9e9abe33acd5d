"""`upi check relay`: what the provisioner side of each rack's DHCP relay path can show.

dnsmasq answers a relayed request by sending to the relay's address (giaddr)
on port 67, so this host must have a route to every relay: a UDP "connect"
asks the kernel for that route without sending a packet. Whether the leaf
really relays (its helper address, the VLAN, the port) shows only from a
client in the rack: that path is reported as not checkable from here, with
how to see it (`upi status` reads dnsmasq's log; docs/networking.md).
"""

from __future__ import annotations

import errno
import socket

from upi.check.report import CheckResult
from upi.inventory.model import Inventory
from upi.inventory.segments import Segment, segments

AREA = "relay"
BOOTPS = 67


def _route(seg: Segment, provisioner: str) -> CheckResult:
    relay = str(seg.relay)
    check = f"route to {seg.where} relay {relay}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((relay, BOOTPS))  # a route lookup; nothing is sent
            local = probe.getsockname()[0]
        except OSError as exc:
            why = errno.errorcode.get(exc.errno or 0, str(exc))
            return CheckResult(AREA, check, "a route", f"none ({why})", "fail",
                               f"route {seg.cidr} from this host (the provisioner's default gateway "
                               f"or `ip route add {seg.cidr} via <gateway>`): dnsmasq answers the "
                               f"relay at {relay}")
    if local != provisioner:
        return CheckResult(AREA, check, f"from {provisioner}", f"from {local}", "warn",
                           f"this host reaches {relay} from {local}, not the provisioner's "
                           f"{provisioner}: run upi check relay on the provisioner")
    return CheckResult(AREA, check, f"from {provisioner}", f"from {local}", "pass")


def check_relay(inv: Inventory) -> list[CheckResult]:
    """For each relayed machine network: the route to its relay, and the path named as unchecked."""
    out = []
    provisioner = str(inv.provisioner.ip)
    for seg in segments(inv):
        if seg.relay is None:
            continue
        out.append(_route(seg, provisioner))
        out.append(CheckResult(
            AREA, f"DHCP through {seg.where} relay {seg.relay}", f"leases in {seg.cidr}",
            "not checkable from the provisioner", "warn",
            f"boot one node of {seg.cidr} (upi boot-metal) and read dnsmasq's log "
            f"({inv.provisioner.dnsmasq_log}, what upi status reads): its DHCPACK carries the tag "
            f"{seg.tag}; no request from it means the leaf does not relay to {provisioner}"))
    return out
