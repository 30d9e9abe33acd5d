"""Benchmark `upi check dns` on a large inventory against real dnsmasq on loopback.

Same run, same records, same server:
  1. `upi check dns INVENTORY --json` as a user runs it (a new process);
  2. dnspython's raw rate: a serial loop of dns.query.udp with no checking;
  3. the documented serial `dig` loop (one dig process per record).
Goals (issue 3): upi >= 20x the dig loop, and within 2x of dnspython's raw rate
(>= 0.5x of it). A missed goal prints GOAL MISSED and exits 1. The dig loop
runs over the first --dig-sample queries (default 2,000; 0: all) and its rate
is compared: one dig process per query costs the same for every record.

    python bench/check_dns.py            # 5,000 nodes (the dig loop takes minutes)
    python bench/check_dns.py --quick    # 200 nodes
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dns.message
import dns.query
import yaml

ROOT = Path(__file__).resolve().parent.parent
GOAL_VS_DIG = 20.0
GOAL_VS_RAW = 0.5
DIG_SAMPLE = 2_000
GOAL_NODES = 5_000
sys.path.insert(0, str(ROOT))

from upi.check.dns import check_dns, probes  # noqa: E402 - after the path is set
from upi.facts import dns_records  # noqa: E402
from upi.inventory import load_inventory  # noqa: E402
from upi.render import render_inventory  # noqa: E402
from upi.runner import run  # noqa: E402


def make_inventory(directory: Path, workers: int) -> Path:
    """A cluster of 1 bootstrap, 3 masters and `workers` DGX workers in a /16."""
    for name in ("pull-secret.json", "id_rsa.pub"):
        shutil.copy(ROOT / "inventories" / name, directory / name)
    net = ipaddress.IPv4Network("10.64.0.0/16")
    hosts = net.hosts()
    gateway, provisioner, lb = (str(next(hosts)) for _ in range(3))
    nodes = [{"name": "bootstrap", "role": "bootstrap"}]
    nodes += [{"name": f"master-{i}", "role": "master"} for i in range(3)]
    nodes += [{"name": f"worker-{i}", "role": "worker"} for i in range(workers)]
    for i, node in enumerate(nodes):
        node["mac"] = "b8:ce:f6:{:02x}:{:02x}:{:02x}".format(*(i + 1).to_bytes(3, "big"))
        node["ip"] = str(next(hosts))
    doc = {
        "cluster": {"name": "bench", "base_domain": "example.com", "openshift_version": "4.16",
                    "pull_secret_file": "pull-secret.json", "ssh_key_file": "id_rsa.pub"},
        # One /24 of pods per node (host_prefix): a /9 has room for 32,768 nodes, the
        # default /14 for 512 (the pod-subnet capacity rule refuses more).
        "network": {"machine_cidr": str(net), "gateway": gateway,
                    "cluster_network": "10.128.0.0/9", "host_prefix": 24},
        "provisioner": {"ip": provisioner, "interface": "eno1",
                        "http_base_url": f"http://{provisioner}:8080"},
        "rhcos": {"kernel": "rhcos/kernel", "initramfs": "rhcos/initramfs.img",
                  "rootfs": "rhcos/rootfs.img"},
        "load_balancer": {"ip": lb},
        "hypervisor": {"uri": "qemu:///system", "bridge": "br0"},
        "nodes": nodes,
    }
    path = directory / "bench.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start_dnsmasq(conf: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
    proc = subprocess.Popen(
        [dnsmasq, "--keep-in-foreground", "--no-resolv", "--no-hosts",
         "--listen-address=127.0.0.1", f"--port={port}", "--bind-interfaces",
         f"--conf-file={conf}", "--pid-file=", "--log-facility=/dev/null"])
    for _ in range(500):
        try:
            dns.query.udp(dns.message.make_query("up.invalid", "A"), "127.0.0.1", port=port,
                          timeout=0.05)
            return proc, port
        except dns.exception.Timeout:
            continue
    proc.terminate()
    raise SystemExit("dnsmasq did not start")


def timed(label: str, n: int, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    print(f"  {label:<34} {n:>7,} queries  {seconds:8.2f} s  {n / seconds:8,.0f} q/s")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000, help="cluster size (default 5000)")
    parser.add_argument("--quick", action="store_true", help="200 nodes: a run of seconds")
    parser.add_argument("--dig-sample", type=int, default=DIG_SAMPLE,
                        help=f"queries the dig loop runs (default {DIG_SAMPLE:,}; 0: all)")
    args = parser.parse_args()
    nodes = 200 if args.quick else args.nodes
    with tempfile.TemporaryDirectory(prefix="upi-bench-") as tmp:
        inv_path = make_inventory(Path(tmp), max(2, nodes - 4))
        inv = load_inventory(inv_path, check_files=False)
        conf = Path(tmp) / "dns.conf"
        conf.write_bytes(next(f.content for f in render_inventory(inv)
                              if f.path == "dnsmasq/dns.conf"))
        queries = [p.query for p in probes(dns_records(inv))]
        n = len(queries)
        proc, port = start_dnsmasq(conf)
        try:
            print(f"check dns: {len(inv.nodes):,} nodes, {n:,} queries, dnsmasq on 127.0.0.1:{port}")
            upi = timed("upi check dns (new process)", n, lambda: run(
                [sys.executable, "-m", "upi", "check", "dns", str(inv_path), "--server",
                 "127.0.0.1", "--port", str(port), "--json"], timeout=600, cwd=ROOT))

            inproc = timed("upi check_dns() in process", n, lambda: check_dns(
                inv, server="127.0.0.1", port=port))

            def raw() -> None:
                for q in queries:
                    dns.query.udp(dns.message.make_query(q.name, q.rdtype), "127.0.0.1",
                                  port=port, timeout=2)

            rawt = timed("dnspython serial dns.query.udp", n, raw)

            sample = queries[:args.dig_sample] if args.dig_sample > 0 else queries

            def dig() -> None:
                for q in sample:
                    run(["dig", "+noall", "+answer", "@127.0.0.1", "-p", str(port), q.name,
                         q.rdtype], timeout=30)

            # Per query, as a rate: the sample's time scaled to all n queries.
            digt = timed("serial dig loop (bind9-dnsutils)", len(sample), dig) * n / len(sample)
        finally:
            proc.terminate()
            proc.wait(5)
    vs_dig, vs_raw = digt / upi, rawt / upi
    print(f"  upi vs dig loop: {vs_dig:.1f}x faster (goal >= {GOAL_VS_DIG:.0f}x)")
    print(f"  upi vs dnspython raw: {vs_raw:.2f}x the raw rate (goal >= {GOAL_VS_RAW}x); "
          f"in process {rawt / inproc:.2f}x; load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    if nodes < GOAL_NODES:  # a new process's start-up outweighs a few hundred queries
        print(f"  (the goals are set for {GOAL_NODES:,} nodes: not judged on {nodes:,})")
        return 0
    missed = [f"upi vs the dig loop: {vs_dig:.1f}x"] if vs_dig < GOAL_VS_DIG else []
    missed += [f"upi vs dnspython's raw rate: {vs_raw:.2f}x"] if vs_raw < GOAL_VS_RAW else []
    for m in missed:
        print(f"GOAL MISSED: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
