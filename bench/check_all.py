"""Benchmark `upi check all` for a 128-DGX inventory against the lab (issue 29).

Root only (a network namespace, as tests/realtftp.py): dnsmasq runs the
rendered `dnsmasq/` files unmodified in a namespace whose bridge has the
provisioner's interface name and address (DNS on 53, TFTP on 69; the TFTP
root holds the rendered per-MAC files, boot loaders and kernels); nginx
serves an HTTP root with the RHCOS files and fresh ignition files; haproxy
fronts each LB port with a live backend (port 80's is down: the nodes do
not run yet, a warning), as tests/test_check_lb.py's `running_lb`. Then,
in the namespace, in one run:

1. `python -m upi check all INV --server 127.0.0.1 ... --json` as a new
   process (wall time; its report's counts per area printed);
2. the baseline: a new process, a plain script that sends the same DNS
   queries (upi.check's probes of the inventory's records) by a loop of
   dnspython's `dns.query.udp`, then the same HTTP requests (method and path
   as nginx logged them for upi's first run) by a plain `http.client` loop,
   one connection each.

Both run as new processes, in turns (each side first every other time),
so both pay an interpreter's start and their imports: the figure is the
median of the per-pair ratios. Goal: upi's wall time under 2x the
baseline's (upi also checks the LB and TFTP, which the baseline does not
do). Printed beside it, not judged: `run_checks("all")` against the same
loops, both in this process with their imports paid, and the command
against those in-process loops (the comparison this bench made before).

    sudo python bench/check_all.py [--dgx N] [--repeat PAIRS]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "tests")]

GOAL_RATIO = 2.0
IGNITION = '{"ignition": {"version": "3.2.0"}}\n'


def roots(work: Path, inv_path: Path, out: Path) -> tuple[Path, Path]:
    """The TFTP root (the render's tftp/, loaders, kernels) and the HTTP root (RHCOS, ignition)."""
    from upi.facts.boot import boot_entries
    from upi.inventory import load_inventory

    inv = load_inventory(inv_path, check_files=False)
    tftp = work / "tftproot"
    shutil.copytree(out / "tftp", tftp)
    extra = {"pxelinux.0": os.urandom(4000), "ldlinux.c32": os.urandom(3000), "grubx64.efi": os.urandom(9000)}
    for e in boot_entries(inv):
        extra[e.kernel] = os.urandom(512 * 5)
        extra[e.initrd] = os.urandom(512 * 40 + 3)
    for rel, data in extra.items():
        (tftp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tftp / rel).write_bytes(data)
    www = work / "www"
    for rel in (inv.rhcos.kernel, inv.rhcos.initramfs, inv.rhcos.rootfs):
        assert rel
        (www / rel).parent.mkdir(parents=True, exist_ok=True)
        (www / rel).write_bytes(b"\x7fELF" + b"\0" * 4096)
    (www / "ignition").mkdir()
    for role in ("bootstrap", "master", "worker"):
        (www / "ignition" / f"{role}.ign").write_text(IGNITION)
    return tftp, www


# The baseline as a program someone would write: the same DNS queries sent one at a time by
# dnspython, then the same HTTP requests by http.client, a connection each. It runs as a new
# process, as `upi check all` does: both pay an interpreter's start and their imports.
BASELINE = """
import http.client, json, sys
import dns.message, dns.query
spec = json.load(open(sys.argv[1]))
for name, rdtype in spec["queries"]:
    dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=53, timeout=2)
for method, path in spec["requests"]:
    conn = http.client.HTTPConnection("127.0.0.1", spec["port"], timeout=5)
    conn.request(method, path)
    conn.getresponse().read()
    conn.close()
"""


def timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run argv from the repository's root: (wall seconds, the child's CPU seconds, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, proc


def in_process(inv_path: Path, port: int, mapping: list[str], spec: dict[str, object],
               repeat: int) -> dict[str, float]:
    """`run_checks("all")` and the plain loops in this process (imports paid): medians of `repeat`."""
    import dns.message
    import dns.query

    from upi.check.lb import parse_port_map
    from upi.check.run import CheckOptions, run_checks

    opts = CheckOptions(dns_server="127.0.0.1", lb_server="127.0.0.1", http_server="127.0.0.1",
                        http_port=port, tftp_server="127.0.0.1",
                        port_map=parse_port_map([m.split("=", 1)[1] for m in mapping]))

    def upi() -> None:
        run_checks("all", inv_path, opts)

    def loops() -> None:
        for name, rdtype in spec["queries"]:  # type: ignore[attr-defined]
            dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=53, timeout=2)
        for method, path in spec["requests"]:  # type: ignore[attr-defined]
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request(method, path)
            conn.getresponse().read()
            conn.close()

    out: dict[str, list[float]] = {"upi": [], "loops": []}
    upi()  # the first call pays upi's lazy imports
    for _ in range(repeat):
        for name, fn in (("upi", upi), ("loops", loops)):
            t0 = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in out.items()}


def measure(work: Path, inv_path: Path, www: Path, repeat: int) -> dict[str, object]:
    """In the namespace: nginx and haproxy up; upi check all and the baseline in turns, then parts."""
    import realnginx
    from test_check_lb import running_lb

    from upi.check.dns import probes
    from upi.facts.dns import dns_records
    from upi.inventory import load_inventory

    inv = load_inventory(inv_path, check_files=False)
    access = work / "nginx" / "access.log"
    with realnginx.nginx(www, work / "nginx", http=f"    access_log {access};") as port, \
            running_lb(work, down=80) as mapping:
        argv = [sys.executable, "-m", "upi", "check", "all", str(inv_path), "--server", "127.0.0.1",
                "--dns-port", "53", "--http-port", str(port), "--tftp-port", "69", *mapping, "--json"]
        # A first run, untimed: the page cache and bytecode warm for both sides, and the
        # HTTP requests upi makes, as nginx logs them, for the baseline to make too.
        _, _, proc = timed(argv)
        doc = json.loads(proc.stdout)
        time.sleep(0.5)  # nginx logs a request after its response
        spec = {"queries": [(p.query.name, p.query.rdtype) for p in probes(dns_records(inv))],
                "requests": re.findall(r'"([A-Z]+) (\S+) HTTP/[0-9.]+"', access.read_text()),
                "port": port}
        spec_path = work / "baseline.json"
        spec_path.write_text(json.dumps(spec))
        base_argv = [sys.executable, "-c", BASELINE, str(spec_path)]
        pairs: list[dict[str, tuple[float, float]]] = []
        rcs = set()
        for i in range(repeat):  # in turns, each side first every other time
            pair = {}
            for side in (("upi", "base") if i % 2 == 0 else ("base", "upi")):
                wall, cpu, run = timed(argv if side == "upi" else base_argv)
                if side == "base" and run.returncode != 0:
                    raise SystemExit(f"the baseline failed: {run.stderr[-1500:]}")
                if side == "upi":
                    rcs.add(run.returncode)
                pair[side] = (wall, cpu)
            pairs.append(pair)
        inproc = in_process(inv_path, port, mapping, spec, repeat)
        # Where the time goes: each area as its own process, and a process that only starts.
        parts: dict[str, float] = {}
        common = [str(inv_path), "--server", "127.0.0.1", "--json"]
        for area, extra in (("dns", ["--port", "53"]), ("http", ["--port", str(port)]), ("lb", mapping),
                            ("tftp", ["--port", "69"])):
            parts[area] = timed([sys.executable, "-m", "upi", "check", area, *common, *extra])[0]
        parts["start (check all --help)"] = timed([sys.executable, "-m", "upi", "check", "all", "--help"])[0]
    areas: dict[str, int] = {}
    for row in doc.get("checks", []):
        areas[row["area"]] = areas.get(row["area"], 0) + 1
    return {"rcs": sorted(rcs | {proc.returncode}), "counts": doc.get("counts"), "areas": areas,
            "queries": len(spec["queries"]), "requests": len(spec["requests"]), "pairs": pairs,
            "inproc": inproc, "stderr": proc.stderr[-1500:], "parts": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dgx", type=int, default=128, help="DGX workers (128)")
    parser.add_argument("--repeat", type=int, default=5, help="pairs of runs in turns (5)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("check_all: needs root (a network namespace for the provisioner's dnsmasq); skipped")
        return 0
    from conftest import require
    from gpu import inventory
    from pxe_harness import Lab

    from upi.inventory import load_inventory

    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}")
    # Bytecode for upi's own modules, as an installed wheel has it (bench/render.py does the
    # same): under PYTHONDONTWRITEBYTECODE the untimed first run writes none, and each timed
    # run of upi would compile ~50 modules from source (~40 ms) that the baseline's
    # site-packages imports never do.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "upi")], check=True)
    work = Path(tempfile.mkdtemp(prefix="upi-bench-check-"))
    try:
        inv_path = inventory(work, args.dgx)
        out = work / "out"
        subprocess.run([sys.executable, "-m", "upi", "render", str(inv_path), "-o", str(out)], cwd=ROOT,
                       check=True, capture_output=True)
        tftp, www = roots(work, inv_path, out)
        inv = load_inventory(inv_path, check_files=False)
        address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
        with Lab(work / "lab", inv.provisioner.interface, address) as lab:
            lab.start_rendered(require("dnsmasq"), out, tftp, work / "dnsmasq.log")
            res = lab.inside(lambda: measure(work, inv_path, www, args.repeat))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pairs: list[dict[str, tuple[float, float]]] = res["pairs"]  # type: ignore[assignment]
    ratios = [p["upi"][0] / p["base"][0] for p in pairs]
    ratio = statistics.median(ratios)

    def med(side: str, i: int) -> float:
        return statistics.median(p[side][i] for p in pairs)

    inproc: dict[str, float] = res["inproc"]  # type: ignore[assignment]
    print(f"upi check all, {len(inv.nodes)} nodes ({args.dgx} DGX): exit {res['rcs']}; checks by area "
          f"{res['areas']}, counts {res['counts']}")
    print(f"upi check all (new process): {med('upi', 0):.3f} s wall, {med('upi', 1):.3f} s CPU "
          f"(medians of {len(pairs)})")
    print(f"baseline (new process): {res['queries']} DNS queries by a dnspython loop + {res['requests']} "
          f"HTTP requests by an http.client loop: {med('base', 0):.3f} s wall, {med('base', 1):.3f} s CPU")
    print(f"ratio upi / baseline, median of {len(pairs)} pairs in turns: {ratio:.2f}x "
          f"({', '.join(f'{r:.2f}' for r in ratios)}; goal < {GOAL_RATIO}x)")
    print(f"in this process, imports paid: run_checks('all') {inproc['upi']:.3f} s, the plain loops "
          f"{inproc['loops']:.3f} s: {inproc['upi'] / inproc['loops']:.2f}x")
    print(f"the command against the loops in this process (no start-up on their side, the comparison "
          f"before): {med('upi', 0) / inproc['loops']:.2f}x")
    print("each area as its own process (wall): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in res["parts"].items()))  # type: ignore[union-attr]
    print(f"load at the end {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    bad = [rc for rc in res["rcs"] if rc not in (0, 1)]  # type: ignore[union-attr]
    if bad:
        print("stderr: " + str(res["stderr"]))
    if ratio >= GOAL_RATIO or bad:
        print("GOAL MISSED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
