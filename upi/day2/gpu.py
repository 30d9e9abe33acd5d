"""The GPU step of `upi nodes add`: the new GPU nodes verified, nothing cluster-wide re-applied.

The operators (NFD, GPU Operator) and the ClusterPolicy are day 1's (`upi gpu`):
here they are only read; a new DGX with `rdma:` has the NicClusterPolicy applied
again to name it (upi.gpu.rdma.rdma_for_nodes). Each new `gpu: true` node is judged as `upi gpu`
judges every one (upi.gpu.verify: labels, allocatable, one validation pod),
and its verdict recorded on its Node for `upi status`.
"""

from __future__ import annotations

from collections.abc import Sequence

from upi.errors import ClusterError
from upi.gpu.kube import Kube
from upi.gpu.objects import CLUSTER_POLICY
from upi.gpu.rdma import rdma_for_nodes
from upi.gpu.steps import Clock, GpuFailed, Reporter
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
    try:  # GPUDirect RDMA for the new DGXs with rdma: (upi.gpu.rdma): their NIC driver, then peermem
        rdma_for_nodes(kube, inv, sorted(gpu_names), clock, reporter)
    except GpuFailed as exc:
        raise ClusterError(f"stage gpu: {exc.diagnosis.object}: {exc.diagnosis.problem}") from None
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
    return results
