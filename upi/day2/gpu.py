"""The GPU step of `upi nodes add`: the new GPU nodes through the pool's steps, nothing cluster-wide applied.

The operators (NFD, GPU Operator), the ClusterPolicy and the GPU pool with its
tuning are day 1's (`upi gpu`): here they are only read. Each new `gpu: true`
node goes through the same steps as on day 1 (upi.gpu.pool, docs/gpu.md): the
pool's role label, the pool's rollout onto it (it reboots into the tuned
config), the taint; then it is judged as `upi gpu` judges every one
(upi.gpu.verify: labels, allocatable, one validation pod) and diagnosed with
DCGM at the configured level (upi.gpu.dcgm), each verdict recorded on its Node
for `upi status`. A new DGX with `rdma:` has the NicClusterPolicy
applied again to name it, its NIC driver and nvidia-peermem waited for
(upi.gpu.rdma.rdma_for_nodes). With `gpu_pool.metrics` on, the cluster's Prometheus must then
have a utilisation series for each of their GPUs (upi.gpu.metrics). Only the new
nodes are judged: a day-1 DGX short of series is `upi gpu`'s to name, not this.
"""

from __future__ import annotations

from collections.abc import Sequence

from upi.errors import ClusterError
from upi.gpu.kube import Kube
from upi.gpu.objects import CLUSTER_POLICY
from upi.gpu.rdma import rdma_for_nodes
from upi.gpu.steps import Change, Clock, GpuFailed, Reporter
from upi.gpu.verify import NodeResult, check_labels, record, run_validations
from upi.inventory.gpu import settings
from upi.inventory.model import Inventory


def verify_gpu_nodes(kube: Kube, inv: Inventory, names: Sequence[str], clock: Clock,
                     reporter: Reporter) -> list[NodeResult]:
    """Verify the named `gpu: true` nodes; ClusterError when the GPU Operator is not installed."""
    gpu_names = frozenset(n.name for n in inv.nodes if n.gpu and n.name in names)
    if not gpu_names:
        return []
    policy = kube.get("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY)
    if policy is None:
        raise ClusterError(f"{', '.join(sorted(gpu_names))}: stage gpu: the cluster has no ClusterPolicy "
                           f"{CLUSTER_POLICY}: install the GPU stack once with `upi gpu` (docs/gpu.md)")
    try:
        join_pool(kube, inv, gpu_names, clock, reporter)
    except GpuFailed as exc:
        raise ClusterError(f"stage gpu pool: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None
    try:  # GPUDirect RDMA for the new DGXs with rdma: (upi.gpu.rdma): their NIC driver, then peermem
        rdma_for_nodes(kube, inv, sorted(gpu_names), clock, reporter)
    except GpuFailed as exc:
        raise ClusterError(f"stage gpu rdma: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None
    results = list(check_labels(kube, inv, clock, gpu_names).values())
    ready = [r for r in results if not r.problem]
    if ready:
        try:
            run_validations(kube, inv, ready, settings(inv).operator_namespace, clock, reporter)
        except GpuFailed as exc:
            raise ClusterError(f"stage gpu: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None
    for result in results:
        record(kube, result)
        reporter.note(f"{result.node}: {'GPUs verified' if result.ok else result.problem}")
    diagnose_new(kube, inv, results, clock, reporter)
    _rdma_new(kube, inv, [r.node for r in results if r.ok], clock, reporter)  # as upi gpu: RDMA, metrics
    metrics_new(kube, inv, results, clock, reporter)
    return results


def _rdma_new(kube: Kube, inv: Inventory, names: list[str], clock: Clock, reporter: Reporter) -> None:
    """GPUDirect RDMA on the verified new DGXs: node checks, one bandwidth test each (docs/rdma.md)."""
    from upi.gpu.rdma import verify_joining

    report = verify_joining(kube, inv, names, clock, reporter)
    first = report.diagnosis if report is not None else None
    if first is not None:
        raise ClusterError(f"stage gpu rdma: {first.object}: {first.problem}")


def join_pool(kube: Kube, inv: Inventory, names: frozenset[str], clock: Clock, reporter: Reporter) -> None:
    """The new nodes into day 1's GPU pool: role label, the pool's rollout onto them, then the taint."""
    from upi.gpu.pool import MCO, ROLE, label_nodes, taint_nodes, wait_rollout
    from upi.inventory.gpupool import pool_settings

    pool = pool_settings(inv).name
    if kube.get(MCO, "MachineConfigPool", pool) is None:
        raise ClusterError(f"{', '.join(sorted(names))}: stage gpu pool: the cluster has no "
                           f"MachineConfigPool {pool}: set the GPU pool up once with `upi gpu` (docs/gpu.md)")
    changes: list[Change] = []
    label_nodes(kube, inv, changes, reporter, only=names)
    # The pool's members now: day 1's DGX nodes and the new ones, whatever else the inventory lists.
    members = {n["metadata"]["name"] for n in kube.find("v1", "Node", labels={ROLE + pool: ""})}
    wait_rollout(kube, inv, clock, reporter, nodes=sorted(members | names))
    taint_nodes(kube, inv, changes, reporter, only=names)


def diagnose_new(kube: Kube, inv: Inventory, results: list[NodeResult], clock: Clock,
                 reporter: Reporter) -> None:
    """DCGM diagnostics at the configured level on the verified new nodes (not MIG); ClusterError on one."""
    from upi.gpu.dcgm import diagnose, verdict
    from upi.gpu.mig import mig_nodes
    from upi.gpu.objects import GPU_PACKAGE

    partitioned = {n.name for n in mig_nodes(inv)}
    names = [r.node for r in results if r.ok and r.node not in partitioned]
    if not names:
        return
    namespace = settings(inv).operator_namespace
    sub = kube.get("operators.coreos.com/v1alpha1", "Subscription", GPU_PACKAGE, namespace) or {}
    installed = (sub.get("status") or {}).get("installedCSV")
    csv = kube.get("operators.coreos.com/v1alpha1", "ClusterServiceVersion", installed, namespace) \
        if installed else None
    if csv is None:
        raise ClusterError(f"stage gpu diagnose: no installed GPU Operator CSV in {namespace}: "
                           "install the GPU stack once with `upi gpu` (docs/gpu.md)")
    try:
        diags = diagnose(kube, inv, names, namespace, csv, clock, reporter)
        for result in results:
            if result.node in diags:
                result.diagnosis = diags[result.node].summary()
        verdict(diags)
    except GpuFailed as exc:
        raise ClusterError(f"stage gpu diagnose: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None


def metrics_new(kube: Kube, inv: Inventory, results: list[NodeResult], clock: Clock,
                reporter: Reporter) -> None:
    """With gpu_pool.metrics on: a DCGM_FI_DEV_GPU_UTIL series per GPU of each verified new node (not MIG).

    ClusterError naming the node and the stage when one is short. upi's metrics
    ServiceAccount and binding are day 1's: read, made only if missing.
    """
    from upi.gpu.metrics import prove_series
    from upi.gpu.mig import mig_nodes
    from upi.inventory.gpupool import pool_settings

    if not pool_settings(inv).metrics:
        reporter.note("gpu_pool.metrics is false: the GPU metrics are not checked")
        return
    partitioned = {n.name for n in mig_nodes(inv)}
    gpus = {n.name: n.gpus for n in inv.nodes}
    judged = {r.node: gpus.get(r.node) for r in results if r.ok and r.node not in partitioned}
    changes: list[Change] = []
    try:
        found = prove_series(kube, judged, settings(inv).operator_namespace, clock, changes, reporter,
                             reapply=False)
    except GpuFailed as exc:
        raise ClusterError(f"stage gpu metrics: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None
    for result in results:
        if result.node in found:
            result.metrics = found[result.node].summary()
        elif result.node in partitioned:
            result.metrics = "skipped (MIG)"
