"""`upi check dns`: every record `upi render` writes, asked of the cluster's DNS server.

The probes come from `upi.facts.dns_records(inv)`, the same list the
rendered dns.conf and hosts file are made from.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass

from upi.check.dnsclient import Answer, Query, query_all
from upi.check.reach import Miss, endpoint, hint, miss
from upi.check.report import CheckResult
from upi.facts import DnsRecord, dns_records
from upi.inventory import Inventory

# The docs' own wildcard probes: any name under *.apps, and the console's route.
WILDCARD_PROBES = ("random", "console-openshift-console")
AREA = "dns"


@dataclass(frozen=True)
class Probe:
    """One question about one record, and what the answer must be."""

    record: DnsRecord
    query: Query

    @property
    def label(self) -> str:
        """The check column: `A api.dgxpod.nvidia.com`, `PTR 10.33.3.54`."""
        kind = "A" if self.record.kind == "WILDCARD" else self.record.kind
        shown = self.record.name if kind == "PTR" else self.query.name
        return f"{kind} {shown}"


def probes(records: list[DnsRecord]) -> list[Probe]:
    """The queries that prove each record, in record order."""
    out: list[Probe] = []
    for rec in records:
        if rec.kind == "A":
            out.append(Probe(rec, Query(rec.name, "A")))
        elif rec.kind == "PTR":
            out.append(Probe(rec, Query(rec.reverse_name, "PTR")))
        elif rec.kind == "SRV":
            out.append(Probe(rec, Query(rec.name, "SRV")))
        else:
            out.extend(Probe(rec, Query(f"{label}.{rec.name}", "A")) for label in WILDCARD_PROBES)
    return out


def server_address(host: str) -> str:
    """`host` as an IP address; a name is looked up once (`socket.gaierror` if it cannot be)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, 53, type=socket.SOCK_DGRAM)
    return str(infos[0][4][0])


def _target(value: str, rec: DnsRecord, lb_ip: str) -> str:
    return f"the load balancer {value}" if value == lb_ip else f"{value} ({rec.why})"


def _fix_a(p: Probe, ans: Answer, lb_ip: str) -> str:
    want = " or ".join(_target(v, p.record, lb_ip) for v in p.record.values)
    if not ans.values:
        return f"{p.query.name} does not resolve ({ans.rcode}); expected {want}"
    return f"{p.query.name} resolves to {', '.join(ans.values)}; expected {want}"


def _fix_ptr(p: Probe, ans: Answer) -> str:
    ip, want = p.record.name, " and ".join(p.record.values)
    if not ans.values:
        return (f"{ip} has no PTR record ({p.query.name}, {ans.rcode}); expected {want}: "
                "RHCOS takes its hostname from it")
    if len(p.record.values) == 1 and p.record.values[0] in ans.values:
        return f"{ip} reverse-resolves to {', '.join(ans.values)}; expected {want} first"
    return f"{ip} reverse-resolves to {', '.join(ans.values)}; expected {want}"


def _fix_srv(p: Probe, ans: Answer) -> str:
    got = "; ".join(ans.values) if ans.values else f"nothing ({ans.rcode})"
    return f"{p.query.name} SRV answers {got}; expected {'; '.join(p.record.values)}"


def passes(p: Probe, ans: Answer) -> bool:
    """Whether the answer satisfies the record (PTR: every name, a node's name first)."""
    want, got = p.record.values, ans.values
    if ans.error or not got:
        return False
    if p.record.kind == "PTR":
        return set(want) <= set(got) and (len(want) > 1 or got[0] == want[0])
    return set(got) == set(want)


def judge(p: Probe, ans: Answer, lb_ip: str, where: str) -> CheckResult:
    """One probe's row: pass, or fail with a one-line fix."""
    expected = ", ".join(p.record.values)
    if ans.error:
        return CheckResult(AREA, p.label, expected, ans.error, "fail",
                           f"the DNS server {where} did not answer {p.query.name}: {ans.error}")
    got = ", ".join(ans.values) if ans.values else ans.rcode
    if passes(p, ans):
        return CheckResult(AREA, p.label, expected, got, "pass")
    kind = p.record.kind
    fix = _fix_ptr(p, ans) if kind == "PTR" else _fix_srv(p, ans) if kind == "SRV" else _fix_a(
        p, ans, lb_ip)
    return CheckResult(AREA, p.label, expected, got, "fail", fix)


def check_dns(inv: Inventory, *, server: str | None = None, port: int = 53, window: int = 64,
              timeout: float = 2.0, retries: int = 1,
              progress: Callable[[int], None] | None = None) -> list[CheckResult]:
    """Ask the cluster's DNS server (default: the provisioner) for every record.

    If the server does not answer the first query at all, one failed row
    says so instead of thousands of timeouts.
    """
    host = server or str(inv.provisioner.ip)
    where = f"{host}:{port}" if port != 53 else host
    todo = probes(dns_records(inv))
    lb_ip = str(inv.load_balancer.ip)
    try:
        addr = server_address(host)
        first = query_all([todo[0].query], addr, port, timeout=timeout, retries=retries)[0]
        if first.error:
            m = Miss("refused", first.error) if first.refused else Miss("timeout", first.error)
            return [_unreached(inv, m, host, port)]
        answers = query_all([p.query for p in todo], addr, port, window=window, timeout=timeout,
                            retries=retries, progress=progress)
    except (OSError, UnicodeError) as exc:  # no route, a name that does not resolve
        return [_unreached(inv, miss(exc), host, port)]
    return [judge(p, a, lb_ip, where) for p, a in zip(todo, answers, strict=True)]


def _unreached(inv: Inventory, m: Miss, host: str, port: int) -> CheckResult:
    """The one row when the DNS server cannot be asked at all, with the fix for its cause."""
    listens = ("start dnsmasq with dnsmasq/dns.conf there (`upi push`), or name the cluster's "
               "DNS server with --server/--port")
    where = endpoint(host, port) if port != 53 else host
    fix = hint(m, inv, host, endpoint(host, port, "udp"), listens=listens,
               firewall="firewall/provisioner.sh", redirect="--server/--port")
    if m.cause == "timeout":  # UDP: a silent server, a host that is down and a firewall look alike
        fix = (f"nothing answers DNS at {where}: start dnsmasq with dnsmasq/dns.conf there "
               "(`upi push`) and open udp 53 with the rendered firewall/provisioner.sh, or name "
               "the cluster's DNS server with --server/--port")
    return CheckResult(AREA, f"DNS server {where}", "answers queries", m.text, "fail", fix)
