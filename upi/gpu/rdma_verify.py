"""GPUDirect RDMA proven per node and per pair of DGXs (issue 26): the plain input, the checks, the report.

Per node: the RDMA shared device plugin offers `rdma/<resource>` (allocatable
above 0), and nvidia-peermem is loaded: the GPU Operator runs it as the
container `nvidia-peermem-ctr` of the node's driver pod when the ClusterPolicy
has `driver.rdma.enabled` (NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml;
controllers/object_controls.go transformPeerMemoryContainer removes it
otherwise); the container is ready once its startup probe
`nvidia-driver probe_nvidia_peermem` passes. When the resource is missing,
the node's NIC driver pod is the first suspect: the Network Operator runs the
DOCA/MOFED driver as DaemonSet pods labelled `nvidia.com/ofed-driver` whose
container `mofed-container` loads the driver (Mellanox/network-operator
manifests/state-ofed-driver/0050_ofed-driver-ds.yaml).

Per pair (upi.gpu.rdma_pairs): an `ib_write_bw` server and client
(upi.gpu.rdma_perftest) on the two nodes; the client's average must reach
the minimum; the pairs of a round run at once (upi.gpu.rdma_bandwidth).
The tables of both are upi.gpu.rdma_table's.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

from upi.gpu.kube import Kube
from upi.gpu.objects import Obj
from upi.gpu.pods import DRIVER_LABELS
from upi.gpu.rdma_bandwidth import LOG_LINES, STEP, run_round
from upi.gpu.rdma_pairs import joining, rounds, schedule
from upi.gpu.rdma_perftest import BandwidthTest
from upi.gpu.steps import Clock, Diagnosis, Reporter

Fabric = Literal["infiniband", "ethernet"]
PEERMEM = "nvidia-peermem-ctr"
NIC_LABEL = "nvidia.com/ofed-driver"
NIC_CONTAINER = "mofed-container"


@dataclass(frozen=True)
class RdmaTarget:
    """One DGX to prove: its fabric, the RDMA resource its pods ask for, the secondary network (`ns/name`)."""

    node: str
    fabric: Fabric
    resource: str  # e.g. "rdma/rdma_shared_device_a"
    network: str  # the NetworkAttachmentDefinition, "namespace/name"
    device: str = ""  # the RDMA device ib_write_bw uses (-d); "" is perftest's first


@dataclass(frozen=True)
class RdmaPlan:
    """What to verify and how: the targets in ring order, where the test pods run, the image, the minimum."""

    targets: tuple[RdmaTarget, ...]
    namespace: str  # where the bandwidth pods run
    image: str  # an image with perftest built with CUDA
    min_gbps: float
    gpu_resource: str = "nvidia.com/gpu"
    tolerations: tuple[Obj, ...] = ()  # the GPU pool's taint (upi.gpu.pool.pod_tolerations)
    timeout: float = 300.0  # seconds one round may take, image pulls included (never past the deadline)
    gpu_namespace: str = "nvidia-gpu-operator"  # the GPU Operator's: the driver pods
    network_namespace: str = "nvidia-network-operator"  # the Network Operator's: the NIC driver pods
    test: BandwidthTest = field(default_factory=BandwidthTest)
    service_account: str = ""  # the pods' account, allowed the privileged SCC (upi.gpu.rdma); "" = default
    # `upi nodes add`: the new DGXs; only they get the node checks, each paired with one DGX of its fabric.
    new: tuple[str, ...] = ()


@dataclass
class NodeRow:
    """One DGX's RDMA signals and the first problem found."""

    node: str
    fabric: str
    resource: str
    allocatable: int = 0
    peermem: str = "unknown"  # loaded | not loaded | missing | no driver pod
    nic_driver: str = "none"  # ready | failing | none (a host driver)
    problem: str = ""
    log: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None

    @property
    def ok(self) -> bool:
        """The resource is offered and nvidia-peermem is loaded."""
        return not self.problem

    def to_json(self) -> dict[str, object]:
        """The node's row for --json."""
        out = {k: v for k, v in asdict(self).items() if k != "diagnosis"}
        return {**out, "log": list(self.log), "ok": self.ok}


@dataclass
class PairRow:
    """One pair's bandwidth test: the figures, and its verdict."""

    server: str
    client: str
    fabric: str
    round: int
    peak_gbps: float | None = None
    average_gbps: float | None = None
    verdict: str = "not run"  # passed | below minimum | failed | timed out | unschedulable | skipped
    problem: str = ""
    seconds: float = 0.0
    log: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None

    @property
    def name(self) -> str:
        """`server<->client`."""
        return f"{self.server}<->{self.client}"

    @property
    def ok(self) -> bool:
        """The client reported an average at or above the minimum."""
        return self.verdict == "passed"

    def to_json(self) -> dict[str, object]:
        """The pair's row for --json."""
        out = {k: v for k, v in asdict(self).items() if k != "diagnosis"}
        return {"pair": self.name, **out, "log": list(self.log), "ok": self.ok}


@dataclass
class RdmaReport:
    """Every node's and every pair's row; `diagnosis` is the first failure (nodes before pairs)."""

    min_gbps: float
    nodes: list[NodeRow] = field(default_factory=list)
    pairs: list[PairRow] = field(default_factory=list)

    @property
    def diagnoses(self) -> list[Diagnosis]:
        """Every failure's diagnosis, nodes first."""
        rows: list[NodeRow | PairRow] = [*self.nodes, *self.pairs]
        return [r.diagnosis for r in rows if r.diagnosis is not None]

    @property
    def diagnosis(self) -> Diagnosis | None:
        """The first failure, the one exit 1 prints."""
        found = self.diagnoses
        return found[0] if found else None

    @property
    def ok(self) -> bool:
        """Every node and every pair passed."""
        return all(n.ok for n in self.nodes) and all(p.ok for p in self.pairs)

    def to_json(self) -> dict[str, object]:
        """The report for --json."""
        first = self.diagnosis
        return {"ok": self.ok, "min_gbps": self.min_gbps,
                "nodes": [n.to_json() for n in self.nodes], "pairs": [p.to_json() for p in self.pairs],
                "diagnosis": {**asdict(first), "log": list(first.log)} if first else None}


def verify_rdma(kube: Kube, plan: RdmaPlan, reporter: Reporter, clock: Clock) -> RdmaReport:
    """Per-node checks, then each fabric's ring of bandwidth tests, round by round; never raises GpuFailed."""
    report = RdmaReport(plan.min_gbps)
    report.nodes = check_nodes(kube, plan, clock)
    for row in report.nodes:
        reporter.note(f"{row.node}: RDMA {'ready' if row.ok else row.problem}")
    fabrics: dict[str, list[str]] = {}
    for target in plan.targets:
        fabrics.setdefault(target.fabric, []).append(target.node)
    pairs = joining(fabrics, plan.new) if plan.new else schedule(fabrics)
    bad = {r.node for r in report.nodes if not r.ok}
    rows = {p: PairRow(p.server, p.client, p.fabric, p.round) for p in pairs}
    report.pairs = list(rows.values())
    by_node = {t.node: t for t in plan.targets}
    for group in rounds(pairs):
        runnable = []
        for pair in group:
            failed = [n for n in (pair.server, pair.client) if n in bad]
            if failed:
                rows[pair].verdict = "skipped"
                rows[pair].problem = f"{', '.join(failed)} failed its RDMA checks"
            elif clock.left() <= 0:
                _out_of_time(rows[pair])
            else:
                runnable.append(pair)
        if runnable:
            reporter.note(f"RDMA bandwidth round {group[0].round + 1}: "
                          + ", ".join(p.name for p in runnable))
            run_round(kube, plan, [(p, rows[p]) for p in runnable], by_node, clock, reporter)
    return report


def _out_of_time(row: PairRow) -> None:
    """A pair whose round would start after the run's deadline: not run, and said so."""
    row.verdict = "timed out"
    row.problem = "the run's deadline passed before this pair's round began"
    row.diagnosis = Diagnosis(STEP, f"pair {row.name} ({row.fabric})", row.problem,
                              fix="give the run a longer --timeout: each round takes about one test's time")


# --- per node -------------------------------------------------------------------------------

def check_nodes(kube: Kube, plan: RdmaPlan, clock: Clock) -> list[NodeRow]:
    """Every target's resource, peermem and NIC driver, `clock.settle` s to converge."""
    end = time.monotonic() + min(clock.settle, clock.left())
    while True:
        gpu_pods = _on_nodes(kube.find("v1", "Pod", plan.gpu_namespace, labels=DRIVER_LABELS))
        nic_pods = _on_nodes([p for p in kube.find("v1", "Pod", plan.network_namespace)
                              if NIC_LABEL in ((p.get("metadata") or {}).get("labels") or {})])
        rows = [_node_row(kube, plan, t, gpu_pods.get(t.node), nic_pods.get(t.node)) for t in plan.targets
                if not plan.new or t.node in plan.new]
        if all(r.ok for r in rows) or time.monotonic() >= end:
            break
        time.sleep(clock.poll)
    for row in rows:  # the logs only once the verdict stands
        _diagnose_node(kube, plan, row, gpu_pods.get(row.node), nic_pods.get(row.node))
    return rows


def _on_nodes(pods: list[Obj]) -> dict[str, Obj]:
    placed = ((str((p.get("spec") or {}).get("nodeName") or ""), p) for p in pods)
    return {node: p for node, p in placed if node}


def _count(value: object) -> int:
    try:
        return int(str(value or 0))
    except ValueError:
        return 0


def _container_ready(pod_obj: Obj, name: str) -> bool | None:
    """Whether the pod's container `name` is ready; None when the pod has no such container."""
    containers = (pod_obj.get("spec") or {}).get("containers") or []
    names = [c.get("name") for c in containers if isinstance(c, dict)]
    if name not in names:
        return None
    for status in (pod_obj.get("status") or {}).get("containerStatuses") or []:
        if isinstance(status, dict) and status.get("name") == name:
            return bool(status.get("ready"))
    return False


def _node_row(kube: Kube, plan: RdmaPlan, target: RdmaTarget, gpu_pod: Obj | None,
              nic_pod: Obj | None) -> NodeRow:
    row = NodeRow(target.node, target.fabric, target.resource)
    node = kube.get("v1", "Node", target.node)
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    row.allocatable = _count(allocatable.get(target.resource))
    if nic_pod is not None:
        row.nic_driver = "ready" if _container_ready(nic_pod, NIC_CONTAINER) else "failing"
    ready = _container_ready(gpu_pod, PEERMEM) if gpu_pod is not None else None
    row.peermem = ("no driver pod" if gpu_pod is None else "missing" if ready is None
                   else "loaded" if ready else "not loaded")
    if node is None:
        row.problem = "the node is not in the cluster"
    elif row.nic_driver == "failing":
        row.problem = f"NIC driver pod {nic_pod and nic_pod['metadata']['name']} is not ready"
    elif row.allocatable < 1:
        row.problem = f"allocatable {target.resource} is {row.allocatable}"
    elif row.peermem != "loaded":
        row.problem = {"no driver pod": "no GPU driver pod runs on the node: nvidia-peermem cannot load",
                       "missing": f"nvidia-peermem missing: the GPU driver pod has no {PEERMEM} container",
                       "not loaded": f"nvidia-peermem not loaded: {PEERMEM} is not ready"}[row.peermem]
    return row


def _diagnose_node(kube: Kube, plan: RdmaPlan, row: NodeRow, gpu_pod: Obj | None,
                   nic_pod: Obj | None) -> None:
    if row.ok:
        return
    where, cause, fix = f"Node {row.node}", "", ""
    if row.nic_driver == "failing" and nic_pod is not None:
        name = nic_pod["metadata"]["name"]
        where = f"Pod {plan.network_namespace}/{name} ({NIC_CONTAINER}) on {row.node}"
        row.log = tuple(kube.logs(name, plan.network_namespace, NIC_CONTAINER, tail=LOG_LINES))
        cause = (f"the NIC driver (DOCA/MOFED) is not loaded{_waiting(nic_pod, NIC_CONTAINER)}: "
                 f"the node has no RDMA device, {row.resource} stays 0")
        fix = (f"oc logs -n {plan.network_namespace} {name} -c {NIC_CONTAINER}; a driver built against "
               "the wrong kernel or Driver Toolkit fails here (network-operator issue 2471)")
    elif row.allocatable < 1 and row.problem.startswith("allocatable"):
        cause = ("the RDMA shared device plugin found no device matching its selectors on this node "
                 "(vendors, ifNames, linkTypes of the NicClusterPolicy's rdmaSharedDevicePlugin config)")
        fix = "make the selectors name this node's fabric interfaces, then check the plugin pod's log"
    elif gpu_pod is not None and row.peermem == "not loaded":
        name = gpu_pod["metadata"]["name"]
        where = f"Pod {plan.gpu_namespace}/{name} ({PEERMEM}) on {row.node}"
        row.log = tuple(kube.logs(name, plan.gpu_namespace, PEERMEM, tail=LOG_LINES))
        cause = "nvidia_peermem does not load: the NIC driver must be loaded before it (driver.rdma)"
        fix = f"oc logs -n {plan.gpu_namespace} {name} -c {PEERMEM}"
    elif row.peermem in ("missing", "no driver pod"):
        cause = "ClusterPolicy driver.rdma.enabled is not true, or the GPU driver is not running here"
        fix = "set driver.rdma.enabled: true on the ClusterPolicy once the NicClusterPolicy is ready"
    row.diagnosis = Diagnosis(STEP, where, row.problem, cause, row.log, fix)


def _waiting(pod_obj: Obj, name: str) -> str:
    for status in (pod_obj.get("status") or {}).get("containerStatuses") or []:
        if isinstance(status, dict) and status.get("name") == name:
            reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
            return f" ({reason})" if reason else ""
    return ""
