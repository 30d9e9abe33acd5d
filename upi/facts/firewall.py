"""What each host must let in, and the SELinux settings its services need.

The provisioner serves DNS, DHCP and TFTP (dnsmasq) and HTTP (ignition and
RHCOS files) on the port of `http_base_url`; the load balancer listens on
the ports of its pools. One list each, rendered as firewalld commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from upi.facts.lb import lb_pools
from upi.inventory.model import Inventory


@dataclass(frozen=True)
class Opening:
    """One firewalld rule: a predefined service (`dns`) or a port/protocol, and why."""

    option: str  # --add-service or --add-port
    value: str  # dns, 8080/tcp
    why: str


def http_port(inv: Inventory) -> int:
    """The TCP port of `provisioner.http_base_url` (80/443 by scheme when it names none)."""
    url = urlsplit(inv.provisioner.http_base_url)
    return url.port or (443 if url.scheme == "https" else 80)


def provisioner_openings(inv: Inventory) -> list[Opening]:
    """DNS, DHCP and TFTP for dnsmasq; the HTTP server's port."""
    return [
        Opening("--add-service", "dns", "dnsmasq answers the names of the cluster (53/udp, 53/tcp)"),
        Opening("--add-service", "dhcp", "dnsmasq leases the nodes their addresses (67/udp)"),
        Opening("--add-service", "tftp", "pxelinux and GRUB fetch boot files, kernel and initramfs "
                "(69/udp; the service loads the TFTP connection helper of firewalld)"),
        Opening("--add-port", f"{http_port(inv)}/tcp",
                f"nodes fetch ignition and the RHCOS rootfs from {inv.provisioner.http_base_url}"),
    ]


def load_balancer_openings(inv: Inventory) -> list[Opening]:
    """One TCP port per HAProxy frontend (6443, 22623, 443, 80)."""
    return [Opening("--add-port", f"{p.port}/tcp", f"HAProxy frontend {p.name}") for p in lb_pools(inv)]
