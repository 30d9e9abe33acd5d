"""Rules against hostile or mistaken values: addresses, name lengths, the trust bundle.

Cross-field rules like those of `rules.py`, kept apart so each can say what
it protects (docs/security.md, "Hostile inventory values").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from upi.inventory.model import Inventory
from upi.inventory.types import MAX_FQDN

if TYPE_CHECKING:
    from upi.inventory.rules import Finding

# The longest names a cluster cannot do without, past the node names.
CLUSTER_NAMES = ("api-int", "console-openshift-console.apps", "oauth-openshift.apps",
                 "_etcd-server-ssl._tcp")
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\n(.*?)-----END \1-----[ \t]*(?:\n|\Z)", re.DOTALL)


def safety_rules(inv: Inventory) -> Iterator[Finding]:
    """Every finding of this module's rules (none for a sound inventory)."""
    yield from _name_lengths(inv)
    yield from _service_addresses(inv)
    yield from _dhcp_range(inv)
    yield from _upstream_dns(inv)
    yield from _lb_hostname(inv)


def safety_warnings(inv: Inventory) -> list[str]:
    """Values upi renders right that a program downstream is known to mangle."""
    out = []
    hypervisors = {"hypervisor": inv.hypervisor, **{f"nodes[{i}].hypervisor": n.hypervisor
                                                     for i, n in enumerate(inv.nodes)}}
    for where, hv in hypervisors.items():
        for key in ("image_dir", "uefi_loader"):
            value = getattr(hv, key) if hv else ""
            if any(c in value for c in "&'<>"):
                out.append(
                    f"{where}.{key} {value!r} holds one of & ' < >: upi boot-vms and vms/*.xml take it "
                    "as written, but virt-install (4.1 at least) escapes it twice and would use a "
                    "mangled path: boot the VMs with upi boot-vms, not vms/virt-install.sh"
                )
    return out


def _name_lengths(inv: Inventory) -> Iterator[Finding]:
    domain = inv.cluster.domain
    hosts = [*CLUSTER_NAMES, *(n.name for n in inv.nodes)]
    if inv.load_balancer.hostname:
        hosts.append(inv.load_balancer.hostname)
    longest = max((f"{h}.{domain}" for h in hosts), key=len)
    if len(longest) > MAX_FQDN:
        yield ("cluster", "base_domain"), (
            f"the cluster's DNS names would be longer than {MAX_FQDN} characters "
            f"({longest[:40]}... has {len(longest)}): shorten cluster.name or base_domain"
        )


def _service_addresses(inv: Inventory) -> Iterator[Finding]:
    net, gw = inv.network.machine_cidr, inv.network.gateway
    special = {net.network_address: f"the network address of {net}",
               net.broadcast_address: f"the broadcast address of {net}", gw: "the gateway's address"}
    lb = inv.load_balancer.ip
    if lb not in net:
        yield ("load_balancer", "ip"), f"{lb} is outside machine_cidr {net}"
    elif lb in special:
        yield ("load_balancer", "ip"), f"{lb} is {special[lb]}"
    prov = inv.provisioner.ip
    if prov in net and prov in special:  # outside the network: rules._addresses says so
        yield ("provisioner", "ip"), f"{prov} is {special[prov]}"


def _dhcp_range(inv: Inventory) -> Iterator[Finding]:
    rng = inv.provisioner.dhcp_range
    net = inv.network.machine_cidr
    if rng is None or rng.start > rng.end or rng.start not in net or rng.end not in net:
        return  # rules._dhcp_range reports these
    fixed = {"the gateway": inv.network.gateway, "the provisioner": inv.provisioner.ip,
             "the load balancer": inv.load_balancer.ip, "the network address": net.network_address,
             "the broadcast address": net.broadcast_address}
    inside = [f"{what} {ip}" for what, ip in fixed.items() if rng.start <= ip <= rng.end]
    if inside:
        yield ("provisioner", "dhcp_range"), (
            f"the dynamic range {rng.start}-{rng.end} holds {', '.join(inside)}: "
            "a lease there would take an address the cluster relies on"
        )


def _upstream_dns(inv: Inventory) -> Iterator[Finding]:
    for i, server in enumerate(inv.network.upstream_dns):
        why = None
        if server.is_loopback:
            why = "a loopback address: dnsmasq would forward to itself or to nothing"
        elif server.is_unspecified or server == ipaddress.IPv4Address("255.255.255.255"):
            why = "not the address of a host"
        elif server.is_multicast:
            why = "a multicast address"
        if why:
            yield ("network", "upstream_dns", i), f"{server} is {why}; name a reachable resolver"


def _lb_hostname(inv: Inventory) -> Iterator[Finding]:
    from upi.inventory.rules import RESERVED_NAMES

    name = inv.load_balancer.hostname
    if name and (name in RESERVED_NAMES or name.startswith("etcd-")):
        yield ("load_balancer", "hostname"), f"{name!r} is a name the cluster's DNS records use"


def trust_bundle(inv: Inventory, text: str) -> Iterator[Finding]:
    """The bundle holds PEM certificates and nothing else (it is published in bootstrap.ign).

    A private key or any other block beside the certificates would be served
    over HTTP to every node: refused, naming the file and the line.
    """
    name = inv.cluster.additional_trust_bundle_file
    problem = _bundle_problem(str(name), text.replace("\r\n", "\n"))
    if problem:
        yield ("cluster", "additional_trust_bundle_file"), problem


def _bundle_problem(name: str, text: str) -> str | None:
    from cryptography import x509

    published = "the trust bundle is published in bootstrap.ign over HTTP"
    pos, certs = 0, 0
    for block in [*_PEM_BLOCK.finditer(text), None]:
        start = block.start() if block else len(text)
        loose = _loose_line(text, pos, start)
        if loose is not None:
            row, number = loose
            what = "a PRIVATE KEY" if "PRIVATE KEY" in row else "text that is not a PEM certificate"
            return f"{name} line {number} holds {what}: only PEM certificates (and # comments), {published}"
        if block is None:
            break
        pos = block.end()
        line = text.count("\n", 0, block.start()) + 1
        if block.group(1) != "CERTIFICATE":
            return f"{name} line {line} holds a {block.group(1)} block: only PEM certificates, {published}"
        try:
            x509.load_pem_x509_certificate(block.group().encode())
        except ValueError:
            return f"{name}: the certificate at line {line} does not parse"
        certs += 1
    return None if certs else f"{name} holds no PEM certificate"


def _loose_line(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The first line between certificates that is neither blank nor a `#` comment."""
    first = text.count("\n", 0, start) + 1
    for offset, row in enumerate(text[start:end].split("\n")):
        if row.strip() and not row.strip().startswith("#"):
            return row, first + offset
    return None
