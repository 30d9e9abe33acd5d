"""`upi check` from where the hosts cannot be reached: a FAIL row naming the cause, never a traceback.

Real conditions, no mocks: a network namespace whose only network is not the
machine network (connect() gets ENETUNREACH, as on a laptop with no route to
the provisioner), closed loopback ports (ECONNREFUSED, and ICMP port
unreachable for UDP), a name under `.invalid` (never resolves, RFC 6761).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_helpers import LOOPBACK, free_port
from conftest import inventory_path, require_root
from pxe_harness import Lab
from typer.testing import CliRunner

from upi.cli import app

INV = str(inventory_path("dgxpod"))
NO_ROUTE_FIX = ("this machine has no route to {host}: run `upi check` on the provisioner or another "
                "host in 10.33.3.0/24, or reach {host} through a tunnel and name it with")
AREAS = ["dns", "lb", "http", "tftp", "all"]
FAST = ["--timeout", "0.3", "--retries", "0"]


def _invoke(args: list[str]):
    return CliRunner().invoke(app, args)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A namespace on 198.51.100.0/24 only: no route to the machine network 10.33.3.0/24."""
    require_root("a network namespace with no route to the machine network")
    with Lab(tmp_path_factory.mktemp("elsewhere"), "lab0", "198.51.100.10/24") as lab:
        yield lab


def _rows(result) -> list[dict[str, str]]:
    return json.loads(result.stdout)["checks"]


@pytest.mark.parametrize("area", AREAS)
def test_no_route_is_a_fail_row_naming_the_cause(elsewhere, area: str) -> None:
    plain = elsewhere.inside(lambda: _invoke(["check", area, INV, *FAST]))
    as_json = elsewhere.inside(lambda: _invoke(["check", area, INV, *FAST, "--json"]))
    for result in (plain, as_json):
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        assert result.stderr.startswith("upi: error: ") and result.stderr.endswith(" checks failed\n")
    rows = _rows(as_json)
    assert rows and {(r["got"], r["verdict"]) for r in rows} == {
        ("no route (Network is unreachable)", "fail")}
    for r in rows:
        host = "10.33.3.54" if r["area"] == "lb" else "10.33.3.18"
        assert NO_ROUTE_FIX.format(host=host) in r["fix"], r
        assert f"fail: {r['fix']}" in plain.stdout
    if area in ("dns", "all"):  # one row for the DNS server, not one per record
        assert [r["check"] for r in rows if r["area"] == "dns"] == ["DNS server 10.33.3.18"]


def test_cluster_up_adds_no_readyz_row_when_the_lb_cannot_be_reached(elsewhere) -> None:
    result = elsewhere.inside(lambda: _invoke(["check", "lb", INV, "--cluster-up", *FAST, "--json"]))
    assert result.exit_code == 1
    rows = _rows(result)
    assert [r["check"].split(" (")[0] for r in rows] == [
        "LB 10.33.3.54:6443", "LB 10.33.3.54:22623", "LB 10.33.3.54:443", "LB 10.33.3.54:80"]
    assert all(NO_ROUTE_FIX.format(host="10.33.3.54") in r["fix"] for r in rows)


@pytest.mark.parametrize("area", ["dns", "http", "tftp", "lb", "all"])
def test_a_name_that_does_not_resolve_is_a_fail_row(elsewhere, area: str) -> None:
    result = elsewhere.inside(lambda: _invoke(["check", area, INV, "--server", "nosuch.invalid",
                                               *FAST, "--json"]))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    rows = _rows(result)
    assert {r["got"].split(" (")[0] for r in rows} == {"name does not resolve"}
    assert {r["fix"].split(": ", 1)[-1] if r["area"] in ("http", "tftp") else r["fix"] for r in rows} \
        == {"nosuch.invalid does not resolve on this machine: give --server its IP address"}


def _closed(area: str) -> list[str]:
    if area == "dns":
        return ["--port", str(free_port(2))]  # SOCK_DGRAM: nothing bound there
    if area == "tftp":
        return ["--port", str(free_port(2))]
    if area == "http":
        return ["--port", str(free_port())]
    return [f"--port-map={p}={free_port()}" for p in (6443, 22623, 443, 80)]


@pytest.mark.parametrize(("area", "listens"), [
    ("dns", "start dnsmasq with dnsmasq/dns.conf there (`upi push`)"),
    ("tftp", "start dnsmasq with the rendered dnsmasq/ files there (`upi push`)"),
    ("http", "start the web server that serves http://10.33.3.18:8080 there"),
    ("lb", "start haproxy with haproxy/haproxy.cfg there (`upi push`)"),
])
def test_nothing_listening_says_what_to_start(area: str, listens: str) -> None:
    args = ["check", area, INV, "--server", LOOPBACK, *_closed(area), *FAST]
    plain, as_json = _invoke(args), _invoke([*args, "--json"])
    assert plain.exit_code == as_json.exit_code == 1, plain.output
    assert "Traceback" not in plain.output + as_json.output
    rows = _rows(as_json)
    assert {r["got"].split(" (")[0] for r in rows} == {"connection refused"}
    for r in rows:
        assert "nothing listens on 127.0.0.1:" in r["fix"] and listens in r["fix"], r
        assert f"fail: {r['fix']}" in plain.stdout


def test_a_silent_port_says_the_host_is_down_or_filtered(tmp_path: Path) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind((LOOPBACK, 0))  # bound, never read: like a firewall that drops
        port = silent.getsockname()[1]
        result = _invoke(["check", "tftp", INV, "--server", LOOPBACK, "--port", str(port),
                          *FAST, "--json"])
    assert result.exit_code == 1
    fixes = {r["fix"].split(": ", 1)[1] for r in _rows(result)}
    assert fixes == {f"127.0.0.1:{port} (udp) does not answer (the host is down, or a firewall drops "
                     "the packets): check that the host is up and run the rendered "
                     "firewall/provisioner.sh on it"}


def test_a_host_that_does_not_answer_arp_is_unreachable_not_unrouted(tmp_path: Path) -> None:
    """On the machine network but the LB is not there: EHOSTUNREACH (as firewalld's reject gives)."""
    require_root("a network namespace on the machine network")
    with Lab(tmp_path / "lan", "lab0", "10.33.3.99/24") as lab:
        result = lab.inside(lambda: _invoke(["check", "lb", INV, "--timeout", "8", "--retries", "0",
                                             "--json"]))
    assert result.exit_code == 1, result.output
    rows = _rows(result)
    assert {r["got"] for r in rows} == {"host unreachable (No route to host)"}
    assert rows[0]["fix"] == (
        "10.33.3.54:6443: host unreachable (No route to host): the host is down or not on this "
        "network, or its firewall rejects the port: run the rendered firewall/load-balancer.sh on it")
