"""Benchmark `upi render` as a whole process against a plain Python write loop.

Inventories with 10, 100, 1,000 and 5,000 workers are generated in a temp
dir; each render runs as `python -m upi render INV -o DIR` (what an admin
waits for: interpreter start, imports, validation, render, atomic write).
The plain loop writes the very same bytes to the same layout in the same run,
so the ratio does not depend on the machine. It is timed twice: in-process
(no interpreter start at all) and as a whole process like upi (`python
-c LOOP` reading the bytes from one file, as upi reads its inventory). The
goal is judged like for like, process against process; both ratios print.
Goals (issue 2): 5,000 nodes < 2 s and within 5x of the plain loop;
`upi --help` < 0.3 s.
"""

from __future__ import annotations

import argparse
import ipaddress
import marshal
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10, 100, 1_000, 5_000)
REPEAT = 3
GOAL_SECONDS = 2.0
GOAL_RATIO = 5.0
HELP_GOAL = 0.3

HEADER = """\
cluster:
  name: bench
  base_domain: example.com
  openshift_version: "4.16"
  pull_secret_file: pull-secret.json
  ssh_key_file: id_rsa.pub
network:
  machine_cidr: 10.40.0.0/16
  gateway: 10.40.0.1
  cluster_network: 10.128.0.0/11
  host_prefix: 24
  upstream_dns: [10.33.0.10]
provisioner:
  ip: 10.40.0.2
  interface: eno1
  http_base_url: http://10.40.0.2:8080
rhcos:
  kernel: rhcos/rhcos-4.16.3-x86_64-live-kernel-x86_64
  initramfs: rhcos/rhcos-4.16.3-x86_64-live-initramfs.x86_64.img
  rootfs: rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img
load_balancer:
  ip: 10.40.0.3
hypervisor:
  uri: qemu:///system
  bridge: br0
nodes:
  - {name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:09", ip: 10.40.0.9}
  - {name: master-0, role: master, mac: "52:54:00:00:00:10", ip: 10.40.0.10}
  - {name: master-1, role: master, mac: "52:54:00:00:00:11", ip: 10.40.0.11}
  - {name: master-2, role: master, mac: "52:54:00:00:00:12", ip: 10.40.0.12}
"""


def inventory(workers: int) -> str:
    lines = [HEADER]
    first = int(ipaddress.IPv4Address("10.40.1.0"))
    for i in range(workers):
        ip = ipaddress.IPv4Address(first + i)
        mac = f"b8:ce:f6:{i >> 16 & 0xff:02x}:{i >> 8 & 0xff:02x}:{i & 0xff:02x}"
        lines.append(f'  - {{name: worker-{i}, role: worker, mac: "{mac}", ip: {ip}, gpu: true}}\n')
    return "".join(lines)


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, timeout=300)
    return time.perf_counter() - start


def plain_loop(files: dict[str, bytes], out: Path) -> float:
    """The same bytes, same paths, written by the simplest loop (no staging, no fsync)."""
    start = time.perf_counter()
    for rel, content in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return time.perf_counter() - start


LOOP_PROGRAM = """
import marshal, os, sys
files = marshal.loads(open(sys.argv[1], "rb").read())
out = sys.argv[2]
for rel, content in files.items():
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(content)
"""


def plain_process(files: dict[str, bytes], data: Path, out: Path) -> float:
    """The plain loop as a whole process: interpreter start, read the bytes, write them."""
    data.write_bytes(marshal.dumps(files))
    return timed([sys.executable, "-c", LOOP_PROGRAM, str(data), str(out)], dict(os.environ))


def bench_size(tmp: Path, workers: int, env: dict[str, str]) -> tuple[float, float, float, int]:
    inv = tmp / f"inv-{workers}.yaml"
    inv.write_text(inventory(workers))
    runs = []
    for r in range(REPEAT):
        out = tmp / f"out-{workers}-{r}"
        runs.append(timed([sys.executable, "-m", "upi", "render", str(inv), "-o", str(out)], env))
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    loops, procs = [], []
    for r in range(REPEAT):
        target = tmp / f"plain-{workers}-{r}"
        loops.append(plain_loop(files, target))
        shutil.rmtree(target)
        procs.append(plain_process(files, tmp / "files.marshal", target))
        shutil.rmtree(target)
    for r in range(REPEAT):
        shutil.rmtree(tmp / f"out-{workers}-{r}")
    return statistics.median(runs), statistics.median(loops), statistics.median(procs), len(files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where to render (default: the system temp dir); "
                        "/dev/shm separates upi's own cost from the disk's")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    failures = []
    with tempfile.TemporaryDirectory(prefix="upi-bench-", dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        print(f"rendering in {tmp.parent}")
        for name in ("pull-secret.json", "id_rsa.pub"):
            shutil.copy(ROOT / "inventories" / name, tmp / name)
        helps = [timed([sys.executable, "-m", "upi", "--help"], env) for _ in range(5)]
        help_s = statistics.median(helps)
        print(f"upi --help: {help_s * 1000:.0f} ms (goal < {HELP_GOAL * 1000:.0f} ms)")
        if help_s >= HELP_GOAL:
            failures.append("upi --help")
        print(f"{'nodes':>6} {'files':>6} {'upi render':>11} {'per node':>9} {'loop, proc':>11} "
              f"{'ratio':>6} {'loop, in-proc':>14} {'ratio':>6}")
        for workers in SIZES:
            upi_s, loop_s, proc_s, nfiles = bench_size(tmp, workers, env)
            nodes = workers + 4
            ratio = upi_s / proc_s
            print(f"{nodes:>6} {nfiles:>6} {upi_s * 1000:>9.0f}ms {upi_s / nodes * 1e6:>7.0f}us "
                  f"{proc_s * 1000:>9.0f}ms {ratio:>5.1f}x {loop_s * 1000:>12.0f}ms "
                  f"{upi_s / loop_s:>5.1f}x", flush=True)
            if workers == 5_000 and (upi_s >= GOAL_SECONDS or ratio > GOAL_RATIO):
                failures.append(f"5,000 workers: {upi_s:.2f} s, {ratio:.1f}x the plain loop")
    print(f"median of {REPEAT} runs; goals: 5,000 workers < {GOAL_SECONDS:.0f} s and "
          f"<= {GOAL_RATIO:.0f}x the plain loop run as a process")
    for f in failures:
        print(f"GOAL MISSED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
