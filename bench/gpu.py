"""Benchmark `upi gpu` at pod scale: 128 DGXs in the fake GPU cluster of the tests (issue 29).

tests/fake_gpu.py's cluster (a fake API server with OLM, NFD, the GPU
Operator and a pod runner following their documented behaviour) holds 3
masters and N DGX H100 nodes of 8 GPUs; its operators become ready after a
few controller ticks and each validation pod finishes at its first tick.
`upi gpu INV --kubeconfig K --poll 1s --json` runs as a new process
against it (the fake Thanos querier's port set in that process, as the
tests set it), for N = 16 and N = 128, and prints:

- upi's own CPU seconds (the process's user + system time, as os.times()
  counts a reaped child; the fake runs in the bench's own process). Goal: under 10 s at 128.
- the API requests the fake served, per GPU node, and the growth from 16
  to 128 nodes per node added; the list requests of every Node. Goal: per
  GPU node bounded by a constant (the requests per node added at 128 no
  more than at 16, and the Node lists not growing with the nodes).
- how many of upi's validation pods the fake saw at once. Goal: all 128
  (every pod created before the first is awaited).

    python bench/gpu.py [--nodes 16,128]
"""

from __future__ import annotations

import argparse
import collections
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
sys.path[:0] = [str(ROOT / "tests")]

GOAL_CPU = 10.0
W = "install_disk: /dev/nvme0n1, gpu: true}"


def inventory(work: Path, dgx: int) -> Path:
    """dgxpod with `dgx` DGX workers of 8 GPUs (10.33.3.60 on) instead of its two."""
    for name in ("pull-secret.json", "id_rsa.pub"):
        shutil.copy(ROOT / "inventories" / name, work / name)
    text = (ROOT / "inventories" / "dgxpod.yaml").read_text()
    text = text[:text.index("  - {name: worker-0")]
    text += "".join(f'  - {{name: dgx-{i:03d}, role: worker, mac: "b8:ce:f6:10:34:{i:02x}", '
                    f"ip: 10.33.3.{60 + i}, install_disk: /dev/nvme0n1, gpu: true, gpus: 8}}\n"
                    for i in range(dgx))
    # The pool's tuned config rolls onto every DGX at once (as the operators here are ready at once):
    # with the default maxUnavailable 1 the rollout is 128 reboots one after another, the cluster's
    # pace, not upi's cost, and the fake MCO's per-tick work grows with it.
    text += "gpu_pool: {max_unavailable: '100%'}\n"
    path = work / "pod.yaml"
    path.write_text(text)
    return path


def run(work: Path, dgx: int) -> dict[str, object]:
    from fake_gpu import FakeGpuCluster, SimNode

    inv = inventory(work, dgx)
    nodes = [SimNode(f"master-{i}") for i in range(3)] + [SimNode(f"dgx-{i:03d}", 8) for i in range(dgx)]
    fake = FakeGpuCluster(work / "kube", nodes).start()
    try:
        t0 = time.perf_counter()
        # The fake Thanos querier's route listens on a loopback port, not 443: the one override,
        # made in upi's own process as tests/fake_thanos.py makes it in the tests' (a port only).
        launch = ("import sys, upi.gpu.metrics as m; m.ROUTER_PORT = int(sys.argv.pop(1)); "
                  "sys.argv[0] = 'upi'; from upi.cli import main; main()")
        proc = subprocess.Popen([sys.executable, "-c", launch, str(fake.thanos.port), "gpu", str(inv),
                                 "--kubeconfig", str(fake.kubeconfig), "--poll", "1s", "--timeout", "15m",
                                 "--json"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate()
        wall, rc = time.perf_counter() - t0, proc.returncode
        requests = list(fake.api.requests)
        at_once = fake.most_validation_pods_at_once
    finally:
        fake.stop()
    return {"rc": rc, "wall": wall, "requests": requests, "at_once": at_once, "err": err.decode()[-2000:],
            "out": out.decode()[-500:]}


def shape(path: str) -> str:
    """A request path with its object names replaced, to group them."""
    path = re.sub(r"/namespaces/[^/]+", "/namespaces/NS", path)
    return re.sub(r"(/(?:nodes|pods|clusterpolicies|nodefeaturediscoveries|subscriptions|"
                  r"installplans|clusterserviceversions|configmaps|secrets|serviceaccounts)/)[^/]+",
                  r"\1NAME", path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="16,128", help="DGX counts (16,128)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}")
    results = {}
    for dgx in sizes:
        work = Path(tempfile.mkdtemp(prefix="upi-bench-gpu-"))
        try:
            before = os.times()
            res = run(work, dgx)
            after = os.times()
            res["cpu"] = (after.children_user - before.children_user) + (after.children_system -
                                                                         before.children_system)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results[dgx] = res
        reqs = res["requests"]
        assert isinstance(reqs, list)
        node_lists = sum(1 for m, p, _ in reqs if m == "GET" and p == "/api/v1/nodes")
        print(f"{dgx} DGX: exit {res['rc']}, upi CPU {res['cpu']:.2f} s (wall {res['wall']:.1f} s), "
              f"{len(reqs)} API requests = {len(reqs) / dgx:.1f} per GPU node, {node_lists} lists of every "
              f"Node, validation pods at once: {res['at_once']}")
        top = collections.Counter((m, shape(p)) for m, p, _ in reqs).most_common(8)
        print("  most asked: " + "; ".join(f"{n} {m} {p}" for (m, p), n in top))
        if res["rc"] != 0:
            print("  stderr: " + str(res["err"]))
    met = True
    if len(sizes) >= 2:
        small, big = sizes[0], sizes[-1]
        rs, rb = len(results[small]["requests"]), len(results[big]["requests"])  # type: ignore[arg-type]
        per_added = (rb - rs) / (big - small)
        print(f"requests per DGX added from {small} to {big}: {per_added:.1f} (at {small}: {rs / small:.1f} "
              f"per node, fixed part included)")
        met = per_added <= rs / small
    big = sizes[-1]
    res = results[big]
    met = met and res["rc"] == 0 and float(res["cpu"]) < GOAL_CPU and res["at_once"] == big  # type: ignore[arg-type]
    if not met:
        print("GOAL MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
