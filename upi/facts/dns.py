"""The DNS records a UPI cluster needs (openshift-docs installation-dns-user-infra)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from upi.inventory.model import Inventory, Role

RecordKind = Literal["A", "PTR", "SRV", "WILDCARD"]
ETCD_SRV_PORT = 2380


@dataclass(frozen=True)
class DnsRecord:
    """One record as a resolver must answer it.

    A: `name` -> `values` (one IPv4). PTR: `name` is the IPv4, `values` the
    host names in the order a hosts file lists them. SRV: `values` are
    `"priority weight port target"`. WILDCARD: any name under `name` -> the IPv4.
    """

    kind: RecordKind
    name: str
    values: tuple[str, ...]
    why: str

    @property
    def reverse_name(self) -> str:
        """The in-addr.arpa name of a PTR record."""
        return ipaddress.IPv4Address(self.name).reverse_pointer


@dataclass(frozen=True)
class HostEntry:
    """One IP with its names: `names` all resolve to it, `ptr` answer its reverse."""

    ip: str
    names: tuple[str, ...]
    ptr: tuple[str, ...]

    @property
    def reverse(self) -> str:
        """The in-addr.arpa name of `ip`."""
        return ipaddress.IPv4Address(self.ip).reverse_pointer


def etcd_records_needed(inv: Inventory) -> bool:
    """OpenShift 4.1-4.3 find etcd through DNS; 4.4 and later do not."""
    return inv.cluster.version < (4, 4)


def dns_records(inv: Inventory) -> list[DnsRecord]:
    """Every record the docs require, in a stable order."""
    d = inv.cluster.domain
    lb = str(inv.load_balancer.ip)
    recs = [
        DnsRecord("A", f"api.{d}", (lb,), "Kubernetes API, external: the load balancer"),
        DnsRecord("A", f"api-int.{d}", (lb,), "Kubernetes API, internal: the load balancer"),
        DnsRecord("PTR", lb, (f"api-int.{d}", f"api.{d}"), "reverse of the API load balancer"),
        DnsRecord("WILDCARD", f"apps.{d}", (lb,), "*.apps ingress: the load balancer"),
    ]
    if inv.load_balancer.hostname:
        recs.append(DnsRecord("A", f"{inv.load_balancer.hostname}.{d}", (lb,), "load balancer host"))
    for node in inv.nodes:
        fqdn = f"{node.name}.{d}"
        recs.append(DnsRecord("A", fqdn, (str(node.ip),), f"{node.role.value} {node.name}"))
        recs.append(DnsRecord("PTR", str(node.ip), (fqdn,), f"reverse of {node.name}"))
    if etcd_records_needed(inv):
        targets = []
        for n, master in enumerate(inv.by_role(Role.master)):
            etcd = f"etcd-{n}.{d}"
            targets.append(f"0 10 {ETCD_SRV_PORT} {etcd}")
            recs.append(DnsRecord("A", etcd, (str(master.ip),), f"etcd member on {master.name}"))
        recs.append(DnsRecord("SRV", f"_etcd-server-ssl._tcp.{d}", tuple(targets), "etcd discovery"))
    return recs


def host_entries(records: list[DnsRecord]) -> list[HostEntry]:
    """Group A and PTR records by IP, PTR names first (hosts file and dnsmasq)."""
    order: list[str] = []
    names: dict[str, list[str]] = {}
    ptrs: dict[str, tuple[str, ...]] = {}
    for rec in records:
        ip = rec.values[0] if rec.kind == "A" else rec.name
        if rec.kind not in ("A", "PTR"):
            continue
        if ip not in names:
            order.append(ip)
            names[ip] = []
        if rec.kind == "A":
            names[ip].append(rec.name)
        else:
            ptrs[ip] = rec.values
    out = []
    for ip in order:
        ptr = ptrs.get(ip, ())
        rest = [n for n in names[ip] if n not in ptr]
        out.append(HostEntry(ip, (*[n for n in ptr if n in names[ip]], *rest), ptr))
    return out
