"""Real dnsmasq serving the rendered dns.conf answers the OpenShift docs' dig list.

The expected answers are written out here by hand from the example
inventories, not derived with upi.facts, so a derivation bug is caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import dns.exception
import dns.resolver
import dns.reversename
import pytest
from conftest import inventory_path
from realdns import serve_dns

from upi.inventory import load_inventory
from upi.render import render_inventory


@dataclass(frozen=True)
class Expected:
    domain: str
    lb: str
    nodes: dict[str, str]
    etcd: dict[str, str] = field(default_factory=dict)


EXPECTED = {
    "dgxpod": Expected(
        "dgxpod.nvidia.com", "10.33.3.54",
        {"bootstrap": "10.33.3.53", "master-0": "10.33.3.50", "master-1": "10.33.3.51",
         "master-2": "10.33.3.52", "worker-0": "10.33.3.44", "worker-1": "10.33.3.46"},
    ),
    "compact": Expected(
        "edge.lab.example.com", "192.168.122.10",
        {"bootstrap": "192.168.122.9", "cp-0": "192.168.122.11", "cp-1": "192.168.122.12",
         "cp-2": "192.168.122.13"},
    ),
    "legacy-4.3": Expected(
        "dgxpod.nvidia.com", "10.33.3.54",
        {"bootstrap": "10.33.3.53", "master-0": "10.33.3.50", "master-1": "10.33.3.51",
         "master-2": "10.33.3.52", "worker-0": "10.33.3.44", "worker-1": "10.33.3.46"},
        etcd={"etcd-0": "10.33.3.50", "etcd-1": "10.33.3.51", "etcd-2": "10.33.3.52"},
    ),
}


def _resolver(port: int) -> dns.resolver.Resolver:
    # configure=False: never read /etc/resolv.conf, never query off the machine.
    res = dns.resolver.Resolver(configure=False)
    res.nameservers = ["127.0.0.1"]
    res.port = port
    res.lifetime = 2.0
    return res


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Expected, dns.resolver.Resolver]]:
    name: str = request.param
    conf = tmp_path_factory.mktemp(name) / "dns.conf"
    files = {f.path: f for f in render_inventory(load_inventory(inventory_path(name)))}
    conf.write_bytes(files["dnsmasq/dns.conf"].content)
    with serve_dns(conf) as port:
        yield EXPECTED[name], _resolver(port)


def _a(res: dns.resolver.Resolver, name: str) -> set[str]:
    return {r.to_text() for r in res.resolve(name, "A")}


def _ptr(res: dns.resolver.Resolver, ip: str) -> set[str]:
    return {r.to_text() for r in res.resolve(dns.reversename.from_address(ip), "PTR")}


@pytest.mark.parametrize("host", ["api", "api-int", "random.apps", "console-openshift-console.apps"])
def test_api_and_apps_names_resolve_to_the_load_balancer(served, host: str) -> None:
    exp, res = served
    assert _a(res, f"{host}.{exp.domain}") == {exp.lb}


def test_bootstrap_and_every_node_resolve_to_their_ip(served) -> None:
    exp, res = served
    for node, ip in exp.nodes.items():
        assert _a(res, f"{node}.{exp.domain}") == {ip}, node


def test_reverse_of_the_load_balancer_names_api_int_and_api(served) -> None:
    exp, res = served
    assert _ptr(res, exp.lb) == {f"api-int.{exp.domain}.", f"api.{exp.domain}."}


def test_reverse_of_bootstrap_and_every_node_is_exactly_its_fqdn(served) -> None:
    exp, res = served
    for node, ip in exp.nodes.items():
        # One PTR only: RHCOS takes its hostname from it, and it lands in the node's CSRs.
        assert _ptr(res, ip) == {f"{node}.{exp.domain}."}, node


def test_etcd_records_exist_only_before_4_4(served) -> None:
    exp, res = served
    srv_name = f"_etcd-server-ssl._tcp.{exp.domain}"
    if exp.etcd:
        for etcd, ip in exp.etcd.items():
            assert _a(res, f"{etcd}.{exp.domain}") == {ip}
        srv = {r.to_text() for r in res.resolve(srv_name, "SRV")}
        assert srv == {f"0 10 2380 {etcd}.{exp.domain}." for etcd in exp.etcd}
    else:
        with pytest.raises((dns.resolver.NXDOMAIN, dns.resolver.NoAnswer)):
            res.resolve(srv_name, "SRV")
        with pytest.raises((dns.resolver.NXDOMAIN, dns.resolver.NoAnswer)):
            res.resolve(f"etcd-0.{exp.domain}", "A")


def test_unknown_names_in_the_cluster_domain_are_answered_locally(served) -> None:
    exp, res = served
    # local=/domain/: NXDOMAIN from dnsmasq itself, not a timeout forwarding upstream.
    with pytest.raises(dns.resolver.NXDOMAIN):
        res.resolve(f"no-such-host.{exp.domain}", "A")
