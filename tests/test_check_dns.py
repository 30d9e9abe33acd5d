from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import pytest
from check_helpers import LOOPBACK, dnsmasq
from conftest import inventory_path

from upi.check.dnsclient import Query, query_all
from upi.cli import app
from upi.facts import dns_records
from upi.inventory import load_inventory


def rendered_dns_conf(runner, tmp_path: Path, name: str) -> Path:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path(name)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out / "dnsmasq" / "dns.conf"


def check_dns(runner, name: str, port: int, *extra: str):
    return runner.invoke(app, ["check", "dns", str(inventory_path(name)), "--server", LOOPBACK,
                               "--port", str(port), *extra])


@pytest.mark.parametrize(("name", "checks"), [("dgxpod", 17), ("compact", 0), ("legacy-4.3", 21)])
def test_rendered_dns_conf_passes_every_check(runner, tmp_path: Path, name: str, checks: int) -> None:
    conf = rendered_dns_conf(runner, tmp_path, name)
    with dnsmasq(conf) as port:
        result = check_dns(runner, name, port, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # One probe per A/PTR/SRV record and two per wildcard: the list render wrote.
    records = dns_records(load_inventory(inventory_path(name), check_files=False))
    assert len(doc["checks"]) == len(records) + sum(r.kind == "WILDCARD" for r in records)
    if checks:
        assert len(doc["checks"]) == checks
    assert doc["ok"] is True
    assert doc["counts"] == {"pass": len(doc["checks"]), "warn": 0, "fail": 0}


def test_legacy_cluster_checks_etcd_srv_records(runner, tmp_path: Path) -> None:
    conf = rendered_dns_conf(runner, tmp_path, "legacy-4.3")
    with dnsmasq(conf) as port:
        result = check_dns(runner, "legacy-4.3", port, "--json")
    rows = {r["check"]: r for r in json.loads(result.stdout)["checks"]}
    srv = rows["SRV _etcd-server-ssl._tcp.dgxpod.nvidia.com"]
    assert srv["verdict"] == "pass"
    assert "0 10 2380 etcd-2.dgxpod.nvidia.com" in srv["got"]
    assert rows["A etcd-0.dgxpod.nvidia.com"]["got"] == "10.33.3.50"


def test_changed_and_missing_records_are_named_with_a_fix(runner, tmp_path: Path) -> None:
    conf = rendered_dns_conf(runner, tmp_path, "dgxpod")
    text = conf.read_text()
    text = text.replace(
        "host-record=api-int.dgxpod.nvidia.com,api.dgxpod.nvidia.com,10.33.3.54\n",
        "host-record=api.dgxpod.nvidia.com,10.33.3.54\n"
        "address=/api-int.dgxpod.nvidia.com/10.33.3.50\n")
    text = text.replace("ptr-record=54.3.33.10.in-addr.arpa,api-int.dgxpod.nvidia.com\n", "")
    text = text.replace("host-record=worker-1.dgxpod.nvidia.com,10.33.3.46\n", "")
    text = text.replace("address=/apps.dgxpod.nvidia.com/10.33.3.54\n",
                        "host-record=console-openshift-console.apps.dgxpod.nvidia.com,10.33.3.54\n")
    conf.write_text(text)
    with dnsmasq(conf) as port:
        result = check_dns(runner, "dgxpod", port)
    assert result.exit_code == 1
    fixes = [line for line in result.stdout.splitlines() if line.startswith("fail: ")]
    assert fixes == [
        "fail: api-int.dgxpod.nvidia.com resolves to 10.33.3.50; "
        "expected the load balancer 10.33.3.54",
        "fail: 10.33.3.54 reverse-resolves to api.dgxpod.nvidia.com; "
        "expected api-int.dgxpod.nvidia.com and api.dgxpod.nvidia.com",
        "fail: random.apps.dgxpod.nvidia.com does not resolve (NXDOMAIN); "
        "expected the load balancer 10.33.3.54",
        "fail: worker-1.dgxpod.nvidia.com does not resolve (NXDOMAIN); "
        "expected 10.33.3.46 (worker worker-1)",
        "fail: 10.33.3.46 has no PTR record (46.3.33.10.in-addr.arpa, NXDOMAIN); "
        "expected worker-1.dgxpod.nvidia.com: RHCOS takes its hostname from it",
    ]
    assert result.stdout.splitlines()[-1] == "17 checks: 12 passed, 0 warnings, 5 failed"
    assert result.stderr == "upi: error: 5 of 17 checks failed\n"


def test_a_node_whose_reverse_names_another_host_first_fails(runner, tmp_path: Path) -> None:
    conf = rendered_dns_conf(runner, tmp_path, "dgxpod")
    text = conf.read_text().replace(
        "host-record=master-0.dgxpod.nvidia.com,10.33.3.50\n",
        "host-record=etcd-0.dgxpod.nvidia.com,master-0.dgxpod.nvidia.com,10.33.3.50\n")
    conf.write_text(text)
    with dnsmasq(conf) as port:
        result = check_dns(runner, "dgxpod", port)
    assert result.exit_code == 1
    assert ("fail: 10.33.3.50 reverse-resolves to etcd-0.dgxpod.nvidia.com; "
            "expected master-0.dgxpod.nvidia.com") in result.stdout


def test_no_dns_server_is_one_failure_not_one_per_record(runner) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind((LOOPBACK, 0))  # bound and never read: queries time out
        port = silent.getsockname()[1]
        result = check_dns(runner, "dgxpod", port, "--timeout", "0.1", "--retries", "1")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == [
        f"fail: nothing answers DNS at {LOOPBACK}:{port}: start dnsmasq with dnsmasq/dns.conf "
        "there (`upi push`) and open udp 53 with the rendered firewall/provisioner.sh, or name "
        "the cluster's DNS server with --server/--port",
        "1 check: 0 passed, 0 warnings, 1 failed",
    ]


def test_bad_inventory_exits_2(runner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [\n")
    result = runner.invoke(app, ["check", "dns", str(bad), "--server", LOOPBACK])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"upi: error: {bad}:")


def test_check_runs_without_the_pull_secret(runner, example_dir: Path, tmp_path: Path) -> None:
    (example_dir / "pull-secret.json").unlink()
    conf = rendered_dns_conf(runner, tmp_path, "dgxpod")
    with dnsmasq(conf) as port:
        result = runner.invoke(app, ["check", "dns", str(example_dir / "dgxpod.yaml"),
                                     "--server", LOOPBACK, "--port", str(port)])
    assert result.exit_code == 0, result.output


def test_a_lost_query_is_sent_again() -> None:
    """A server that drops every first try: the retry gets the answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((LOOPBACK, 0))
    seen: set[str] = set()

    def serve() -> None:
        while True:
            try:
                data, peer = sock.recvfrom(4096)
            except OSError:
                return
            if not data:  # shut down
                return
            query = dns.message.from_wire(data)
            name = str(query.question[0].name)
            if name not in seen:
                seen.add(name)
                continue
            reply = dns.message.make_response(query)
            reply.set_rcode(3)
            sock.sendto(reply.to_wire(), peer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        queries = [Query(f"n{i}.test", "A") for i in range(5)]
        answers = query_all(queries, LOOPBACK, sock.getsockname()[1], timeout=0.2, retries=1)
        assert [a.rcode for a in answers] == ["NXDOMAIN"] * 5
        lost = query_all([Query("never.test", "A")], LOOPBACK, sock.getsockname()[1],
                         timeout=0.1, retries=0)
        assert lost[0].error == "no answer in 1 try of 0.1 s"
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes recvfrom() (tests/relay.py says why it must)
        sock.close()


def test_a_truncated_answer_is_asked_again_over_tcp(tmp_path: Path) -> None:
    """Real dnsmasq: 60 addresses for one name pass UDP's 512 bytes; the client asks over TCP."""
    want = [f"10.9.0.{i}" for i in range(1, 61)]
    conf = tmp_path / "dns.conf"
    conf.write_text("no-resolv\nno-hosts\n" + "".join(f"host-record=big.example.test,{ip}\n" for ip in want))
    with dnsmasq(conf) as port:
        # The premise: over UDP (no EDNS, as the client asks) the answer comes truncated.
        udp = dns.query.udp(dns.message.make_query("big.example.test", "A"), LOOPBACK, port=port,
                            timeout=2)
        assert udp.flags & dns.flags.TC
        [answer] = query_all([Query("big.example.test", "A")], LOOPBACK, port)
    assert answer.error == ""
    assert sorted(answer.values) == sorted(want)
