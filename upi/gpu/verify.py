"""Per-node proof: labels, allocatable GPUs, and a validation pod that must log success."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from upi.gpu.kube import Kube
from upi.gpu.mig import DISABLED, MIG_RESOURCE, offered
from upi.gpu.objects import MANAGED_BY, PCI_LABELS, Obj
from upi.gpu.pods import pull_failure
from upi.gpu.pool import pod_tolerations
from upi.gpu.steps import Clock, Reporter
from upi.inventory.gpu import settings
from upi.inventory.model import Inventory, Node

GPU = "nvidia.com/gpu"
POD_LABEL = "upi.openshift.io/gpu-validation"
POD_LIMIT = 300.0  # seconds a validation pod may take, image pull included (never past the deadline)
# On a Node: when upi gpu's validation pod last passed there (UTC), for upi status's GPU stage.
VERIFIED = "upi.openshift.io/gpu-verified"
# Its writer: not `upi`, whose server-side applies to the Node (MIG labels) must not own it.
VERIFIED_MANAGER = "upi-gpu-verify"
FAILED = "failed"  # its value when the node's last verification failed
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class NodeResult:
    """One GPU node's verification: every signal, and the first problem found."""

    node: str
    label: str = ""
    product: str = ""
    expected: int | None = None
    allocatable: int = 0
    mig: str = ""  # the MIG profile applied (`mig_config`), if any
    resource: str = GPU  # what the validation pod asks for (a MIG resource under the mixed strategy)
    driver: str = ""
    validation: str = "not run"
    seconds: float = 0.0
    diagnosis: str = ""  # the DCGM diagnostics' verdict (upi.gpu.dcgm), per GPU when one fails
    metrics: str = ""  # GPUs with a utilisation series in the cluster's Prometheus (upi.gpu.metrics)
    problem: str = ""
    log: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Every signal present and the validation pod logged success."""
        return not self.problem and self.validation == "passed"

    def to_json(self) -> dict[str, object]:
        """The node's row for --json."""
        return {**asdict(self), "log": list(self.log), "ok": self.ok}


def _labels_problem(node: Node, obj: Obj | None, result: NodeResult) -> str:
    if obj is None:
        return "the node is gone"
    labels = obj["metadata"].get("labels") or {}
    result.label = next((k.split("/", 1)[1] for k in PCI_LABELS if labels.get(k) == "true"), "")
    result.product = labels.get("nvidia.com/gpu.product", "")
    result.driver = labels.get("nvidia.com/cuda.driver.major", "")
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    result.allocatable = _count(allocatable.get(GPU))
    if not result.label:
        return "no NVIDIA PCI label (pci-10de, pci-0302_10de or pci-0300_10de): NFD found no NVIDIA GPU"
    if labels.get("nvidia.com/gpu.present") != "true":
        return "no nvidia.com/gpu.present=true: the GPU Operator has not set the node up"
    if not result.product:
        return "no nvidia.com/gpu.product label: GPU feature discovery has not run"
    if node.mig_config and node.mig_config != DISABLED:
        return _mig_problem(node, allocatable, result)
    if node.gpus is not None and result.allocatable != node.gpus:
        return f"allocatable {GPU} is {result.allocatable}, the inventory says {node.gpus}"
    if result.allocatable < 1:
        return f"allocatable {GPU} is 0"
    return ""


def _count(value: object) -> int:
    try:
        return int(str(value or 0))
    except ValueError:
        return 0


def _mig_problem(node: Node, allocatable: dict[str, str], result: NodeResult) -> str:
    """A MIG node offers at least one MIG device per GPU (single: nvidia.com/gpu, mixed: nvidia.com/mig-*)."""
    result.mig = node.mig_config or ""
    mixed = offered(allocatable)
    if mixed:
        result.resource = max(mixed, key=lambda k: (mixed[k], k))
        result.allocatable = sum(mixed.values())
    least = node.gpus or 1
    if result.allocatable < least:
        return (f"MIG layout {result.mig}: the node offers {result.allocatable} MIG devices "
                f"({GPU} or {MIG_RESOURCE}*), fewer than its {least} GPUs")
    return ""


def check_labels(kube: Kube, inv: Inventory, clock: Clock,
                 only: frozenset[str] = frozenset()) -> dict[str, NodeResult]:
    """Every GPU node's labels and allocatable (`only`: the named ones), `clock.settle` s to converge."""
    nodes = [n for n in inv.nodes if n.gpu and (not only or n.name in only)]
    end = time.monotonic() + min(clock.settle, clock.left())
    while True:
        results = {}
        for node in nodes:
            result = NodeResult(node.name, expected=node.gpus)
            result.problem = _labels_problem(node, kube.get("v1", "Node", node.name), result)
            results[node.name] = result
        if all(not r.problem for r in results.values()) or time.monotonic() >= end:
            return results
        time.sleep(clock.poll)


def validation_pod(inv: Inventory, node: str, namespace: str, resource: str = GPU) -> Obj:
    """A pod pinned to `node`, limited to one GPU (or MIG device), running the validation image once."""
    val = settings(inv).validation
    container: Obj = {
        "name": "validate",
        "image": val.image,
        "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if val.command:
        container["command"] = list(val.command)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"upi-gpu-validate-{node}-",
            "namespace": namespace,
            "labels": {POD_LABEL: node, **MANAGED_BY},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": pod_tolerations(inv),
            "containers": [container],
        },
    }


def run_validations(
    kube: Kube, inv: Inventory, results: list[NodeResult], namespace: str, clock: Clock,
    reporter: Reporter,
) -> None:
    """One validation pod per node, all running at once; each judged by its log, then deleted.

    A pod pulls its CUDA image before it runs (minutes on a cold node): one
    after the other, 32 DGXs would take the sum of those waits. All the pods
    share one wait, bounded by POD_LIMIT and the run's deadline.
    """
    started = time.monotonic()
    pods: dict[str, str] = {}  # node -> its pod's name
    try:
        for result in results:
            pod = kube.create(validation_pod(inv, result.node, namespace, result.resource))
            pods[result.node] = pod["metadata"]["name"]
            reporter.note(f"validation pod {namespace}/{pods[result.node]} on {result.node}")
        end = time.monotonic() + min(clock.left(), max(clock.settle, POD_LIMIT))
        done: dict[str, Obj] = {}
        while True:
            for result in results:
                if result.node not in done:
                    found = _finished(kube, pods[result.node], namespace)
                    if found is not None:
                        done[result.node] = found
                        result.seconds = round(time.monotonic() - started, 1)
            if len(done) == len(results) or time.monotonic() >= end:
                break
            time.sleep(clock.poll)
        for result in results:
            _judge(kube, inv, result, pods[result.node], namespace, done.get(result.node))
    finally:
        for result in results:
            if result.node in pods:
                kube.delete("v1", "Pod", pods[result.node], namespace)
            if not result.seconds:
                result.seconds = round(time.monotonic() - started, 1)


def _finished(kube: Kube, name: str, namespace: str) -> Obj | None:
    found = kube.get("v1", "Pod", name, namespace) or {}
    phase = (found.get("status") or {}).get("phase")
    return found if phase in ("Succeeded", "Failed") else None


def _judge(kube: Kube, inv: Inventory, result: NodeResult, name: str, namespace: str,
           done: Obj | None) -> None:
    """The node's verdict from its pod: passed, failed (with its log) or timed out."""
    success = settings(inv).validation.success_log
    lines = kube.logs(name, namespace, tail=20)
    result.log = tuple(lines[-10:])
    if done is None:
        current = kube.get("v1", "Pod", name, namespace) or {}
        pull = pull_failure(current)
        conds = [pull.text()] if pull is not None else [
            c.get("message", "")
            for c in (current.get("status") or {}).get("conditions") or []
            if c.get("status") == "False" and c.get("message")
        ]
        result.validation = "timed out"
        result.problem = f"validation pod {name} did not finish" + (f": {conds[0]}" if conds else "")
    elif done["status"]["phase"] == "Succeeded" and any(success in line for line in lines):
        result.validation = "passed"
    else:
        result.validation = "failed"
        result.problem = (f"validation pod {name} {done['status']['phase']}{_ended(done)}; "
                          f"its log lacks {success!r}")


def _ended(pod: Obj) -> str:
    """` (Reason: message)` of a container that did not run its command (StartError: not in the image)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = ((status if isinstance(status, dict) else {}).get("state") or {}).get("terminated") or {}
        if done.get("reason") not in (None, "Completed", "Error"):
            said = f": {done['message']}" if done.get("message") else ""
            return f" ({done['reason']}{said})"
    return ""


def _passed_at(value: object) -> bool:
    try:
        datetime.strptime(str(value), TIME_FORMAT)
    except ValueError:
        return False
    return True


def record(kube: Kube, result: NodeResult) -> None:
    """Keep the node's verdict on its Node: since when its validation passes, or `failed`.

    `upi status` reads it (docs/status.md); a node that fails now loses an
    earlier pass, so the annotation never vouches for a node that is broken.
    A verdict that did not change is not written again: a node that passed and
    passes keeps the time of its first pass, and a re-run changes nothing
    (docs/gpu.md promises unchanged resourceVersions).
    """
    node = kube.get("v1", "Node", result.node)
    if node is None:
        return  # gone: nothing to mark
    current = (node.get("metadata", {}).get("annotations") or {}).get(VERIFIED)
    if (result.ok and _passed_at(current)) or (not result.ok and current == FAILED):
        return
    value = datetime.now(UTC).strftime(TIME_FORMAT) if result.ok else FAILED
    kube.merge_patch("v1", "Node", result.node, None, {"metadata": {"annotations": {VERIFIED: value}}},
                     manager=VERIFIED_MANAGER)
