"""approve-csr latency against the fake API server (tests/fake_apiserver.py).

watch: 500 CSRs created over time; latency from creation to Approved (goal p99 < 1 s).
once:  1,000 pending CSRs, one `--once` pass (goal < 10 s).

    python bench/csr.py [--watch-count 500] [--once-count 1000]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from csr_cases import client, serving  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

from upi.csr.client import Approver, run_once  # noqa: E402
from upi.csr.connect import connect  # noqa: E402
from upi.csr.decide import PENDING_MARGIN  # noqa: E402
from upi.facts.identity import NodeIdentity  # noqa: E402

NODES = 1000  # a big inventory, so 1,000 pending CSRs stay under the cap (nodes + 100)


def identities() -> dict[str, NodeIdentity]:
    """A synthetic inventory of NODES workers, w-0 .. w-N, 10.40.x.y."""
    out = {}
    for i in range(NODES):
        ident = NodeIdentity(f"w-{i}", f"w-{i}.bench.example.com", f"10.40.{i // 250}.{i % 250 + 1}",
                             "worker")
        out[ident.name] = out[ident.fqdn] = ident
    return out


def specs(count: int, ids: dict[str, NodeIdentity]) -> list:
    """`count` CSRs: each node's client CSR, then serving ones, all real and all approvable."""
    nodes = sorted({i.name: i for i in ids.values()}.values(), key=lambda i: int(i.name[2:]))
    out = []
    for n, ident in enumerate(nodes * 2):
        if len(out) == count:
            break
        if n < len(nodes):
            out.append(client(ident.name, f"c{n}-{ident.name}"))
        else:
            out.append(serving(ident.name, f"s{n}-{ident.name}", dns=(ident.name, ident.fqdn),
                               ips=(ident.ip,)))
    return out


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def bench_watch(count: int, workdir: Path) -> None:
    ids = identities()
    fake = FakeApiServer(workdir / "watch").start()
    conn = connect(fake.kubeconfig)
    stop = threading.Event()
    thread = threading.Thread(target=Approver(conn, ids).watch, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.5)
    todo = specs(count, ids)
    rng = random.Random(7)
    for spec in todo:
        fake.add_csr(spec.name, spec.pem, **spec.kwargs())
        time.sleep(rng.expovariate(1 / 0.01))  # ~100 CSRs/s in bursts
    end = time.monotonic() + 30
    while len(fake.approved()) < count and time.monotonic() < end:
        time.sleep(0.05)
    stop.set()
    thread.join(timeout=10)
    lat = [fake.approved_at[n] - fake.created_at[n] for n in fake.approved_at]
    print(f"watch: {len(lat)}/{count} approved; latency creation->Approved "
          f"p50 {statistics.median(lat) * 1000:.1f} ms, p99 {pct(lat, 0.99) * 1000:.1f} ms, "
          f"max {max(lat) * 1000:.1f} ms (goal p99 < 1000 ms)")
    conn.close()
    fake.stop()


def bench_once(count: int, workdir: Path) -> None:
    ids = identities()
    assert count <= NODES + PENDING_MARGIN
    fake = FakeApiServer(workdir / "once").start()
    for spec in specs(count, ids):
        fake.add_csr(spec.name, spec.pem, **spec.kwargs())
    conn = connect(fake.kubeconfig)
    start = time.monotonic()
    records = run_once(conn, ids)
    took = time.monotonic() - start
    approved = sum(r.action == "approved" for r in records)
    print(f"once: {approved}/{count} pending CSRs approved in one pass in {took:.2f} s (goal < 10 s)")
    conn.close()
    fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--watch-count", type=int, default=500)
    parser.add_argument("--once-count", type=int, default=1000)
    args = parser.parse_args()
    print(f"approve-csr bench: {platform.python_version()}, {platform.machine()}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores")
    with tempfile.TemporaryDirectory() as tmp:
        bench_watch(args.watch_count, Path(tmp))
        bench_once(args.once_count, Path(tmp))


if __name__ == "__main__":
    main()
