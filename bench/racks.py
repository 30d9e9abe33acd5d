"""Benchmark a DGX pod of 8 racks x 16 DGX (128 workers) behind DHCP relays: validate, render, check.

Each rack is its own /24 behind a relay (network.machine_networks); every DGX
has an LACP bond of two in-band ports, tagged (VLAN) in the even racks, MTU
9000, a static address. In one run, each as the new process an admin starts
(median of --repeat runs, wall seconds and the process's CPU seconds):

  1. `upi validate INV`;
  2. `upi render INV -o DIR` into a new directory, and `dnsmasq --test` of the
     rendered dhcp-pxe.conf (the per-rack ranges and routers);
  3. `upi check dns INV` against real dnsmasq serving the rendered dns.conf on a
     loopback port (every rack node's A and PTR);
  4. `upi check relay INV` (the route to each of the 8 relays).

Goal (issue 30): each step under 2 s of CPU on this 2-core machine (it is a
small inventory: the point is that racks add nothing slow). A missed goal prints
GOAL MISSED and exits 1.

    python bench/racks.py [--racks 8] [--per-rack 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from check_dns import start_dnsmasq  # bench/ is on sys.path: this script's own folder

ROOT = Path(__file__).resolve().parent.parent
GOAL_CPU = 2.0
MEMBERS = ["enp41s0f1np1", "enp170s0f1np1"]


def make_inventory(directory: Path, racks: int, per_rack: int) -> Path:
    """Control plane on 10.50.0.0/24 with the provisioner; rack r on 10.50.r.0/24 behind relay .2."""
    for name in ("pull-secret.json", "id_rsa.pub"):
        shutil.copy(ROOT / "inventories" / name, directory / name)
    nodes: list[dict[str, object]] = [
        {"name": "bootstrap", "role": "bootstrap", "mac": "52:54:00:50:00:20", "ip": "10.50.0.20"}]
    nodes += [{"name": f"master-{i}", "role": "master", "mac": f"52:54:00:50:00:2{i + 1}",
               "ip": f"10.50.0.2{i + 1}"} for i in range(3)]
    for r in range(1, racks + 1):
        for n in range(per_rack):
            network: dict[str, object] = {"bond": {"members": MEMBERS, "mode": "802.3ad",
                                                   "lacp_rate": "fast"}, "mtu": 9000}
            if r % 2 == 0:
                network["vlan"] = 100 + r
            nodes.append({"name": f"dgx-r{r}-{n}", "role": "worker", "mac": f"b8:ce:f6:50:{r:02x}:{n:02x}",
                          "ip": f"10.50.{r}.{10 + n}", "install_disk": "/dev/nvme0n1", "gpu": True,
                          "network": network})
    doc = {
        "cluster": {"name": "pod", "base_domain": "example.com", "openshift_version": "4.18",
                    "pull_secret_file": "pull-secret.json", "ssh_key_file": "id_rsa.pub"},
        "network": {"machine_cidr": "10.50.0.0/24", "gateway": "10.50.0.1",
                    "machine_networks": [{"name": f"rack{r}", "cidr": f"10.50.{r}.0/24",
                                          "gateway": f"10.50.{r}.1", "relay": f"10.50.{r}.2"}
                                         for r in range(1, racks + 1)],
                    "upstream_dns": ["10.50.255.53"]},
        "provisioner": {"ip": "10.50.0.10", "interface": "eno1", "http_base_url": "http://10.50.0.10:8080"},
        "rhcos": {"kernel": "rhcos/rhcos-4.18.1-x86_64-live-kernel-x86_64",
                  "initramfs": "rhcos/rhcos-4.18.1-x86_64-live-initramfs.x86_64.img",
                  "rootfs": "rhcos/rhcos-4.18.1-x86_64-live-rootfs.x86_64.img"},
        "load_balancer": {"ip": "10.50.0.11"},
        "hypervisor": {"uri": "qemu:///system", "bridge": "br0"},
        "nodes": nodes,
    }
    path = directory / "racks.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def timed(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall and CPU seconds of one process, whose exit status must be in `ok`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--per-rack", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    upi = [sys.executable, "-m", "upi"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"racks: {args.racks} racks x {args.per_rack} DGX, {now}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    missed = []
    with tempfile.TemporaryDirectory(prefix="upi-bench-racks-") as tmp:
        inv = make_inventory(Path(tmp), args.racks, args.per_rack)
        steps: dict[str, list[tuple[float, float]]] = {}
        steps["validate"] = [timed([*upi, "validate", str(inv)]) for _ in range(args.repeat)]
        steps["render"] = [timed([*upi, "render", str(inv), "-o", f"{tmp}/out-{r}"])
                           for r in range(args.repeat)]
        dnsmasq = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"
        test = subprocess.run([dnsmasq, "--test", f"--conf-file={tmp}/out-0/dnsmasq/dhcp-pxe.conf"],
                              capture_output=True, text=True, check=False)
        print(f"dnsmasq --test of the rendered dhcp-pxe.conf: exit {test.returncode} "
              f"({(test.stderr or test.stdout).strip()})")
        if test.returncode != 0:
            missed.append("dnsmasq --test")
        proc, port = start_dnsmasq(Path(f"{tmp}/out-0/dnsmasq/dns.conf"))
        try:
            steps["check dns"] = [timed([*upi, "check", "dns", str(inv), "--server", "127.0.0.1",
                                         "--port", str(port), "--json"]) for _ in range(args.repeat)]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        # exit 1 is a relay with no route from this machine: the time is what is measured here.
        steps["check relay"] = [timed([*upi, "check", "relay", str(inv), "--json"], ok=(0, 1))
                                for _ in range(args.repeat)]
    nodes = 4 + args.racks * args.per_rack
    print(f"{'step':<12} {'wall (median)':>14} {'CPU (median)':>13}   ({nodes} nodes)")
    for name, runs in steps.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        verdict = "" if cpu < GOAL_CPU else f"  GOAL MISSED (< {GOAL_CPU:.0f} s CPU)"
        if verdict:
            missed.append(name)
        print(f"{name:<12} {wall:>12.2f} s {cpu:>11.2f} s{verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
