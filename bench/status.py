"""Benchmark `upi status`'s reading of a busy provisioner's logs at pod scale (issue 29).

In a temp dir: a 64 MiB dnsmasq log (`log-dhcp`) and a 64 MiB nginx access
log for a 128-DGX inventory (bench/_statuslogs.py says what is in them),
then in one run:

1. the first look: a new process loads the inventory and takes one
   Looker.look() (both logs read and parsed, every other source asked,
   the table built), timed in the process (CPU) after a look with empty
   logs has paid what any first look pays once (lazy imports: libvirt,
   the API client; printed beside it), its peak memory (VmHWM) printed; against the floor:
   a plain Python process reading the same two files line by line and
   counting the lines holding `DHCPACK`, its loop timed the same way, the
   faster of binary and text lines (`grep -c DHCPACK` beside it: the
   machine's limit). Runs in pairs, in
   turns, the page cache warm; the figure is the median of the per-pair
   ratios. Goal: at most 2x the floor, peak memory under 150 MB.
2. a later look, 1 MiB appended to each log since the first: CPU seconds of
   that look (goal: under 0.1 s); then the same over SSH to a real sshd on
   loopback (tests/pushkit.py), through a relay that counts the bytes sent
   to upi: the later look's bytes against the bytes appended (goal: the
   appended bytes and at most 64 KiB of SSH's own).
3. upi wait's status reader (the same Looker, a look every 15 s) over a
   simulated 10-minute install of the 128 nodes: between two looks, the
   lines the install writes in those 15 s are appended (each node's DHCP
   exchange, TFTP files, rootfs and ignition GETs, at its time) plus 64 KiB
   of other traffic per log, and a fake API server (tests/fake_apiserver.py)
   gains the Nodes that joined; the 40 looks run back to back, their CPU
   seconds summed and divided by the 600 s they stand for (the reader
   sleeps in between). Goal: under 2% of one core.

    python bench/status.py [--size MIB] [--repeat N] [--no-ssh]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "tests")]  # this tree's upi, not an installed one

import _statuslogs as logs  # noqa: E402 - bench/ is no package

GOAL_RATIO, GOAL_MB, GOAL_LATER, GOAL_SSH_OVERHEAD, GOAL_SHARE = 2.0, 150, 0.1, 64 << 10, 0.02
INTERVAL, INSTALL = 15, 600  # upi wait's status_every; the simulated install's seconds

FLOOR = """
import json, sys, time
mode = sys.argv[1]
t0, c0 = time.perf_counter(), time.process_time()
n = 0
for path in sys.argv[2:]:
    if mode == "rb":
        with open(path, "rb") as fh:
            for line in fh:
                if b"DHCPACK" in line:
                    n += 1
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "DHCPACK" in line:
                    n += 1
print(json.dumps({"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0, "count": n}))
"""

LOOK = """
import json, sys, time
from pathlib import Path
from upi.status.look import Looker, sources
from upi.inventory import load_inventory
inv = load_inventory(Path(sys.argv[1]), check_files=False)
src = sources(inv, dnsmasq_log=None, access_log=None, out=None, assets=None, kubeconfig=None)
empty = inv.model_copy(update={"provisioner": inv.provisioner.model_copy(
    update={"dnsmasq_log": "/dev/null", "http_access_log": "/dev/null"})})
with Looker(empty, sources(empty, dnsmasq_log=None, access_log=None, out=None, assets=None,
                           kubeconfig=None)) as warm:
    c0 = time.process_time()
    warm.look()  # what any first look pays once: lazy imports (libvirt, the API client)
    once = time.process_time() - c0
with Looker(inv, src) as looker:
    t0, c0 = time.perf_counter(), time.process_time()
    snap = looker.look()
    first = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}
    # VmHWM, not maxrss: exec keeps the parent's maxrss (the bench's own, which made the logs).
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024
    later = None
    if len(sys.argv) > 2:
        for path in sys.argv[2:]:
            with open(path, "ab") as fh:
                fh.write(Path(path + ".more").read_bytes())
        c0 = time.process_time()
        snap = looker.look()
        later = time.process_time() - c0
print(json.dumps({"first": first, "once": once, "peak_mb": peak, "later": later, "unread": snap.unread,
                  "reached": sum(1 for r in snap.rows if "ignition" in r.stages)}))
"""


def child(code: str, *args: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True,
                         cwd=ROOT).stdout
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
            f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, load {load}")


def first_look(work: Path, inv: Path, dns: Path, acc: Path, repeat: int) -> bool:
    for path in (dns, acc):  # the page cache warm for both sides
        with path.open("rb") as fh:
            while fh.read(1 << 24):
                pass
    grep = shutil.which("grep")
    t0 = time.perf_counter()
    counted = subprocess.run([grep or "grep", "-ch", "DHCPACK", str(dns), str(acc)], capture_output=True,
                             text=True, check=False).stdout.split()
    grep_s = time.perf_counter() - t0
    ratios, floors, looks, peaks, laters, onces = [], [], [], [], [], []
    for i in range(repeat):
        pair = []
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            if side == 0:  # the faster of binary and text lines (text is, with CPython's chunked decoding)
                floor = min(child(FLOOR, mode, str(dns), str(acc))["cpu"] for mode in ("rb", "r"))
                pair.append(("floor", floor))
            else:
                look = child(LOOK, str(inv), str(dns), str(acc))
                os.truncate(dns, dns.stat().st_size - (dns.with_name(dns.name + ".more")).stat().st_size)
                os.truncate(acc, acc.stat().st_size - (acc.with_name(acc.name + ".more")).stat().st_size)
                assert not look["unread"] and look["reached"] == 132, look
                pair.append(("look", look["first"]["cpu"]))
                onces.append(look["once"])
                peaks.append(look["peak_mb"])
                laters.append(look["later"])
        sides = dict(pair)
        floors.append(sides["floor"])
        looks.append(sides["look"])
        ratios.append(sides["look"] / sides["floor"])
    ratio, peak, later = statistics.median(ratios), max(peaks), statistics.median(laters)
    print(f"first look: {statistics.median(looks):.3f} s CPU (after a look with empty logs that paid "
          f"the lazy imports once: {statistics.median(onces):.3f} s); floor (Python, line by line, "
          f"count DHCPACK): {statistics.median(floors):.3f} s CPU; grep -c: {grep_s:.3f} s wall "
          f"(counts {' + '.join(counted)})")
    print(f"  ratio look / floor (median of {repeat} pairs): {ratio:.2f}x "
          f"[{', '.join(f'{r:.2f}' for r in ratios)}] (goal <= {GOAL_RATIO}x)")
    print(f"  peak memory of the look's process: {peak:.0f} MB (goal < {GOAL_MB} MB)")
    print(f"later look, 1 MiB appended to each log: {later * 1000:.1f} ms CPU "
          f"[{', '.join(f'{x * 1000:.1f}' for x in laters)}] (goal < {GOAL_LATER * 1000:.0f} ms)")
    return ratio <= GOAL_RATIO and peak < GOAL_MB and later < GOAL_LATER


def over_ssh(work: Path, dns: Path, acc: Path) -> bool:
    from pushkit import start_sshd
    from relay import Relay

    from upi.inventory import load_inventory
    from upi.status.look import Looker, sources

    sshd = start_sshd(work / "sshd")
    relay = Relay(sshd.port)
    try:
        known = work / "known_hosts"
        known.write_text(f"[127.0.0.1]:{relay.port} {sshd.host_pub}\n")
        section = (f"{{host: 127.0.0.1, port: {relay.port}, user: root, known_hosts: {known}, "
                   f"identity_file: {sshd.client_key}}}")
        inv_path = work / "ssh.yaml"
        inv_path.write_text(logs.inventory(str(dns), str(acc), section))
        inv = load_inventory(inv_path, check_files=False)
        src = sources(inv, dnsmasq_log=None, access_log=None, out=None, assets=None, kubeconfig=None)
        with Looker(inv, src) as looker:
            t0 = time.perf_counter()
            snap = looker.look()
            first_s, first_b = time.perf_counter() - t0, relay.down
            assert not snap.unread, snap.unread
            appended = 0
            for path in (dns, acc):
                more = path.with_name(path.name + ".more").read_bytes()
                with path.open("ab") as fh:
                    fh.write(more)
                appended += len(more)
            c0 = time.process_time()
            snap = looker.look()
            later_cpu, later_b = time.process_time() - c0, relay.down - first_b
        overhead = later_b - appended
        print(f"over SSH (loopback sshd): first look {first_b / 2**20:.1f} MiB received in {first_s:.2f} s; "
              f"later look {later_b:,} bytes received for {appended:,} appended "
              f"(SSH's own: {overhead:,}; goal <= {GOAL_SSH_OVERHEAD:,}), {later_cpu * 1000:.1f} ms CPU")
        return 0 <= overhead <= GOAL_SSH_OVERHEAD
    finally:
        relay.close()
        sshd.proc.terminate()
        sshd.proc.wait(timeout=10)


def simulated_wait(work: Path, now: datetime) -> bool:
    """40 looks standing for 10 minutes of an install; their CPU against 600 s of one core."""
    import random

    from fake_apiserver import FakeApiServer

    from upi.inventory import load_inventory
    from upi.status.look import Looker, sources

    dns, acc = work / "wait-dnsmasq.log", work / "wait-access.log"
    start = now - timedelta(seconds=INSTALL)
    logs.dnsmasq_log(dns, 64 << 20, start, install=False)
    logs.access_log(acc, 64 << 20, start, install=False)
    inv_path = work / "wait.yaml"
    inv_path.write_text(logs.inventory(str(dns), str(acc)))
    inv = load_inventory(inv_path, check_files=False)
    fake = FakeApiServer(work / "assets").start()
    rng = random.Random(7)
    # Each node's moments: PXE in the first 5 minutes, rootfs 40 s later, ignition 30 s after, Ready 3 min on.
    plan = []
    for name, mac, ip in logs.nodes():
        pxe = rng.uniform(0, 300)
        plan.append((pxe, name, mac, ip))
    try:
        src = sources(inv, dnsmasq_log=None, access_log=None, out=None, assets=work / "assets",
                      kubeconfig=None)
        cpu, looks = 0.0, 0
        with Looker(inv, src) as looker:
            for tick in range(0, INSTALL, INTERVAL):
                lo, hi = tick - INTERVAL, tick
                with dns.open("a") as d, acc.open("a") as a:
                    d.write(logs.appended_dnsmasq(start + timedelta(seconds=tick), 64 << 10, seed=tick))
                    a.write(logs.other_access(start + timedelta(seconds=tick), 64 << 10, seed=tick))
                    for pxe, name, mac, ip in plan:
                        at = start + timedelta(seconds=pxe)
                        if lo <= pxe < hi:
                            d.write(logs.exchange(at, rng.randrange(1 << 31), mac, ip, name))
                            d.write(logs.tftp(at, mac, ip))
                        if lo <= pxe + 40 < hi:
                            a.write(logs.fetches(at + timedelta(seconds=40), name, ip))
                        if lo <= pxe + 250 < hi:
                            fake.add_node(name, ready=True)
                c0 = time.process_time()
                snap = looker.look()
                cpu += time.process_time() - c0
                looks += 1
        ready = sum(1 for r in snap.rows if "ready" in r.stages)
        share = cpu / INSTALL
        print(f"upi wait's status reader, {looks} looks over a simulated {INSTALL} s install of "
              f"{len(snap.rows)} nodes ({ready} Ready at the end; the fake API's Nodes read each look): "
              f"{cpu:.2f} s CPU, {share * 100:.2f}% of one core (goal < {GOAL_SHARE * 100:.0f}%)")
        if snap.unread:
            print(f"  unread: {snap.unread}")
        return share < GOAL_SHARE
    finally:
        fake.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, help="MiB of each log (64)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of first look and floor (3)")
    parser.add_argument("--no-ssh", action="store_true", help="skip the look over a loopback sshd")
    args = parser.parse_args()
    print(machine())
    now = datetime.now().replace(microsecond=0)
    work = Path(tempfile.mkdtemp(prefix="upi-bench-status-"))
    try:
        dns, acc = work / "dnsmasq.log", work / "access.log"
        t0 = time.perf_counter()
        sizes = logs.dnsmasq_log(dns, args.size << 20, now), logs.access_log(acc, args.size << 20, now)
        dns.with_name("dnsmasq.log.more").write_text(logs.appended_dnsmasq(now, 1 << 20))
        acc.with_name("access.log.more").write_text(logs.other_access(now, 1 << 20))
        inv = work / "inventory.yaml"
        inv.write_text(logs.inventory(str(dns), str(acc)))
        print(f"logs: dnsmasq {sizes[0] / 2**20:.1f} MiB ({sum(1 for _ in dns.open('rb')):,} lines), access "
              f"{sizes[1] / 2**20:.1f} MiB ({sum(1 for _ in acc.open('rb')):,} lines), "
              f"generated in {time.perf_counter() - t0:.1f} s; 128 DGX + 4 nodes")
        met = [first_look(work, inv, dns, acc, args.repeat)]
        if not args.no_ssh:
            met.append(over_ssh(work, dns, acc))
        met.append(simulated_wait(work, now))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not all(met):
        print("GOAL MISSED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
