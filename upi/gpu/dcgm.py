"""DCGM diagnostics on every GPU node: `dcgmi diag -r <level>` in the GPU Operator's DCGM image.

NVIDIA's DGX acceptance runs DCGM diagnostics (docs.nvidia.com/datacenter/dcgm,
user-guide/dcgm-diagnostics): level 1 is a readiness check of seconds, level 2
about two minutes, level 3 about half an hour, level 4 an hour or more. A pod
on each node asks for all the node's GPUs, so the run covers every GPU and
nothing else uses them meanwhile; the nodes run at once.

`dcgmi diag` prints a table (NVIDIA/DCGM dcgmi/Diag.cpp; DCGM 4 output as in
NVIDIA/DCGM issue 124): category rows (`|-----  Hardware  ---...|`), one row
per test (`| memory | Pass |`) followed by one row per GPU
(`|  | GPU0: Pass |`); results are Pass, Fail, Warn, Skip or Not Run.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from upi.gpu.kube import Kube
from upi.gpu.objects import MANAGED_BY, Obj
from upi.gpu.pool import pod_tolerations
from upi.gpu.steps import Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.gpupool import pool_settings
from upi.inventory.model import Inventory

GPU = "nvidia.com/gpu"
# On a Node: upi gpu's last DCGM verdict there, for upi status's `diagnosed` stage (docs/status.md):
# `<UTC time of the first pass> level <n>`, or `failed level <n>: <what failed>`.
DIAGNOSED = "upi.openshift.io/gpu-diagnosed"
DIAGNOSED_MANAGER = "upi-gpu-diagnose"  # not `upi`: its server-side applies to the Node must not own it
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
DCGM_IMAGE = "dcgm-image"  # the GPU Operator CSV's relatedImages name of the DCGM image
POD_LABEL = "upi.openshift.io/gpu-diagnose"
# Roughly how long each level runs (DCGM user guide); said before a long run starts.
DURATION = {1: "under a minute", 2: "about 2 minutes", 3: "about 30 minutes", 4: "an hour or more"}
LIMIT = {1: 600.0, 2: 1200.0, 3: 3600.0, 4: 3 * 3600.0}  # seconds a level may take before upi gives up
RESULTS = ("Pass", "Fail", "Warn", "Skip", "Not Run")
_GPU_ROW = re.compile(r"^GPU\s?(\d+):\s*(Pass|Fail|Warn|Skip|Not Run)\b")
_CATEGORY = re.compile(r"^[|+]-+\s+(\w[\w ]*?)\s+-+")


@dataclass
class TestResult:
    """One DCGM test's result on one GPU."""

    category: str
    test: str
    gpu: str  # "0".."7", or "all" for a test reported without per-GPU rows
    result: str


@dataclass
class NodeDiag:
    """A node's DCGM run: every test's result per GPU."""

    node: str
    level: int
    results: list[TestResult] = field(default_factory=list)
    problem: str = ""

    @property
    def failed(self) -> list[TestResult]:
        """The tests that failed, per GPU."""
        return [r for r in self.results if r.result == "Fail"]

    def summary(self) -> str:
        """`level 1: 8 GPUs pass` or `GPU 3 memory Fail`, for the node's table row."""
        if self.problem:
            return self.problem
        if self.failed:
            return "; ".join(f"GPU {r.gpu} {r.test} Fail" for r in self.failed)
        gpus = sorted({r.gpu for r in self.results if r.gpu != "all"}, key=int)
        warned = sorted({f"GPU {r.gpu} {r.test} Warn" for r in self.results if r.result == "Warn"})
        return f"level {self.level}: {len(gpus)} GPUs pass" + (f" ({', '.join(warned)})" if warned else "")


def parse(log: list[str]) -> list[TestResult]:
    """Each test's result per GPU from `dcgmi diag`'s table (the Metadata rows are skipped)."""
    out: list[TestResult] = []
    category, test, overall, per_gpu = "", "", "", False
    for raw in log:
        line = raw.strip()
        found = _CATEGORY.match(line)
        if found:
            category = found.group(1).strip()
            continue
        if not line.startswith("|") or category in ("", "Metadata"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 2:
            continue
        name, value = cells[0], cells[1]
        gpu = _GPU_ROW.match(value)
        if not name and gpu and test:
            out.append(TestResult(category, test, gpu.group(1), gpu.group(2)))
            per_gpu = True
            continue
        if name and value.split(" - ")[0] in RESULTS:
            if test and not per_gpu:
                out.append(TestResult(category, test, "all", overall))
            test, overall, per_gpu = name, value.split(" - ")[0], False
    if test and not per_gpu:
        out.append(TestResult(category, test, "all", overall))
    return out


def dcgm_image(gpu_csv: Obj) -> str:
    """The DCGM image of the installed GPU Operator (its CSV's relatedImages)."""
    for entry in (gpu_csv.get("spec") or {}).get("relatedImages") or []:
        if entry.get("name") == DCGM_IMAGE:
            return str(entry["image"])
    raise GpuFailed(Diagnosis("diagnose", f"ClusterServiceVersion {gpu_csv['metadata']['name']}",
                              f"no {DCGM_IMAGE} among its relatedImages: no DCGM image to diagnose with",
                              fix="set gpu_pool.diagnosis_level: 0 to skip the diagnosis"))


def diag_pod(inv: Inventory, node: str, gpus: int, image: str, namespace: str, level: int) -> Obj:
    """A pod pinned to `node` with all its GPUs, running `dcgmi diag -r <level>` once."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": f"upi-gpu-dcgm-{node}-", "namespace": namespace,
                     "labels": {POD_LABEL: node, **MANAGED_BY}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": pod_tolerations(inv),
            "containers": [{
                "name": "dcgm", "image": image, "command": ["dcgmi", "diag", "-r", str(level)],
                "resources": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}},
            }],
        },
    }


def _gpus(kube: Kube, node: str, expected: int | None) -> int:
    found = ((kube.get("v1", "Node", node) or {}).get("status") or {}).get("allocatable", {}).get(GPU, "0")
    try:
        return expected or int(found)
    except ValueError:
        return expected or 0


def diagnose(kube: Kube, inv: Inventory, nodes: list[str], namespace: str, gpu_csv: Obj, clock: Clock,
             reporter: Reporter) -> dict[str, NodeDiag]:
    """DCGM diagnostics on every node at once, each node's results (`verdict` judges them)."""
    level = pool_settings(inv).diagnosis_level
    if level == 0 or not nodes:
        return {}
    image = dcgm_image(gpu_csv)
    expected = {n.name: n.gpus for n in inv.nodes}
    reporter.note(f"DCGM diagnostics level {level} on {len(nodes)} node(s) at once: {DURATION[level]}")
    pods: dict[str, str] = {}
    out = {n: NodeDiag(n, level) for n in nodes}
    try:
        for node in nodes:
            gpus = _gpus(kube, node, expected.get(node))
            pods[node] = kube.create(diag_pod(inv, node, gpus, image, namespace, level))["metadata"]["name"]
            reporter.note(f"DCGM pod {namespace}/{pods[node]} on {node}")
        end = time.monotonic() + min(clock.left(), LIMIT[level])
        done: dict[str, bool] = {}
        while len(done) < len(nodes) and time.monotonic() < end:
            for node in (n for n in nodes if n not in done):
                pod = kube.get("v1", "Pod", pods[node], namespace) or {}
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    done[node] = True
                    out[node].results = parse(kube.logs(pods[node], namespace, "dcgm", tail=400))
            time.sleep(clock.poll if len(done) < len(nodes) else 0)
        for node in nodes:
            if node not in done:
                out[node].problem = f"DCGM pod {pods[node]} did not finish"
            elif not out[node].results:
                out[node].problem = f"DCGM pod {pods[node]} printed no test results"
    finally:
        for name in pods.values():
            kube.delete("v1", "Pod", name, namespace)
    for diag in out.values():
        reporter.note(f"{diag.node}: DCGM {diag.summary()}")
        record(kube, diag)
    return out


def passed_at(value: object) -> tuple[str, int] | None:
    """(time text, level) of a DIAGNOSED value that records a pass, else None."""
    when, sep, level = str(value).partition(" level ")
    try:
        datetime.strptime(when, TIME_FORMAT)
    except ValueError:
        return None
    return (when, int(level)) if sep and level.isdigit() else None


def record(kube: Kube, diag: NodeDiag) -> None:
    """Keep the node's DCGM verdict on its Node (an annotation: `oc describe node` shows it too).

    A pass at the same level as the last one keeps the time of that first pass,
    so a re-run that finds the same changes nothing; a failure replaces a pass.
    """
    node = kube.get("v1", "Node", diag.node)
    if node is None:
        return
    current = (node.get("metadata", {}).get("annotations") or {}).get(DIAGNOSED)
    ok = not diag.failed and not diag.problem
    if ok:
        kept = passed_at(current)
        if kept is not None and kept[1] == diag.level:
            return
        value = f"{datetime.now(UTC).strftime(TIME_FORMAT)} level {diag.level}"
    else:
        value = f"failed level {diag.level}: {diag.summary()}"[:1000]
        if value == current:
            return
    kube.merge_patch("v1", "Node", diag.node, None, {"metadata": {"annotations": {DIAGNOSED: value}}},
                     manager=DIAGNOSED_MANAGER)


def verdict(out: dict[str, NodeDiag]) -> None:
    """GpuFailed naming the node, the GPU and the test of the first failure."""
    for diag in out.values():
        if diag.failed:
            first = diag.failed[0]
            others = f" (and {len(diag.failed) - 1} more)" if len(diag.failed) > 1 else ""
            raise GpuFailed(Diagnosis(
                "diagnose", f"Node {diag.node} GPU {first.gpu}",
                f"DCGM level {diag.level} test '{first.test}' ({first.category}) failed{others}",
                fix=f"take GPU {first.gpu} of {diag.node} out of service and open a case with NVIDIA "
                    "(the DCGM report names the failing check)"))
        if diag.problem:
            raise GpuFailed(Diagnosis("diagnose", f"Node {diag.node}", diag.problem,
                                      fix="oc get pods -n <operator namespace> -l " + POD_LABEL))
