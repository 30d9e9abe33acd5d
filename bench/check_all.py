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
2. the baseline: the same DNS queries (upi.check's probes of the
   inventory's records) sent by a plain loop of dnspython's `dns.query.udp`,
   plus the same HTTP requests (method and path as nginx logged them for
   upi's run) sent by a plain `http.client` loop, one connection each.

Goal: upi's wall time under 2x the baseline's (upi also checks the LB and
TFTP, which the baseline does not do).

    sudo python bench/check_all.py [--dgx N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
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


def measure(work: Path, inv_path: Path, www: Path) -> dict[str, object]:
    """In the namespace: nginx and haproxy up, upi check all timed, then the baseline loops."""
    import dns.message
    import dns.query
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
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
        upi = time.perf_counter() - t0
        doc = json.loads(proc.stdout)
        time.sleep(0.5)  # nginx logs a request after its response
        asked = re.findall(r'"([A-Z]+) (\S+) HTTP/[0-9.]+"', access.read_text())
        queries = [p.query for p in probes(dns_records(inv))]
        # Where the time goes: each area as its own process, and a process that only starts.
        parts: dict[str, float] = {}
        common = [str(inv_path), "--server", "127.0.0.1", "--json"]
        for area, extra in (("dns", ["--port", "53"]), ("http", ["--port", str(port)]), ("lb", mapping),
                            ("tftp", ["--port", "69"])):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "upi", "check", area, *common, *extra], cwd=ROOT,
                           capture_output=True, check=False)
            parts[area] = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "upi", "check", "all", "--help"], cwd=ROOT, capture_output=True,
                       check=False)
        parts["start (check all --help)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for q in queries:
            dns.query.udp(dns.message.make_query(q.name, q.rdtype), "127.0.0.1", port=53, timeout=2)
        dns_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for method, path in asked:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request(method, path)
            conn.getresponse().read()
            conn.close()
        http_s = time.perf_counter() - t0
    areas: dict[str, int] = {}
    for row in doc.get("checks", []):
        areas[row["area"]] = areas.get(row["area"], 0) + 1
    return {"rc": proc.returncode, "upi": upi, "counts": doc.get("counts"), "areas": areas,
            "queries": len(queries), "dns": dns_s, "requests": len(asked), "http": http_s,
            "stderr": proc.stderr[-1500:], "parts": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dgx", type=int, default=128, help="DGX workers (128)")
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
            res = lab.inside(lambda: measure(work, inv_path, www))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = float(res["dns"]) + float(res["http"])  # type: ignore[arg-type]
    ratio = float(res["upi"]) / base  # type: ignore[arg-type]
    print(f"upi check all, {len(inv.nodes)} nodes ({args.dgx} DGX): exit {res['rc']}, "
          f"{res['upi']:.2f} s wall; checks by area {res['areas']}, counts {res['counts']}")
    print(f"baseline: {res['queries']} DNS queries by a dnspython loop {res['dns']:.2f} s + "
          f"{res['requests']} HTTP requests by an http.client loop {res['http']:.2f} s = {base:.2f} s")
    print(f"ratio upi / baseline: {ratio:.2f}x (goal < {GOAL_RATIO}x)")
    print("each area as its own process (wall): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in res["parts"].items()))  # type: ignore[union-attr]
    if res["rc"] not in (0, 1):
        print("stderr: " + str(res["stderr"]))
    if ratio >= GOAL_RATIO or res["rc"] not in (0, 1):
        print("GOAL MISSED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
