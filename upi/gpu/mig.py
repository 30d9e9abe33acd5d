"""MIG layouts: a node's `mig_config` becomes its `nvidia.com/mig.config` label (gpu-day2.md §5).

The GPU Operator's MIG manager watches that label, repartitions the node's
GPUs and reports progress in `nvidia.com/mig.config.state` (`pending`, then
`success` or `failed`). With the `single` strategy the MIG devices are
offered as `nvidia.com/gpu`; with `mixed` as `nvidia.com/mig-<profile>`.
"""

from __future__ import annotations

from upi.gpu.kube import Kube
from upi.gpu.objects import Obj
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.model import Inventory, Node

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
MIG_RESOURCE = "nvidia.com/mig-"
DISABLED = "all-disabled"  # the MIG manager's profile for "MIG off"
MANAGER_POD = {"app": "nvidia-mig-manager"}


def mig_nodes(inv: Inventory) -> list[Node]:
    """GPU nodes whose GPUs the inventory partitions (a profile other than all-disabled)."""
    return [n for n in inv.nodes if n.gpu and n.mig_config and n.mig_config != DISABLED]


def mig_labels(inv: Inventory) -> list[Obj]:
    """One apply configuration per node with `mig_config`: just its `nvidia.com/mig.config` label."""
    return [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": n.name, "labels": {CONFIG_LABEL: n.mig_config}}}
        for n in inv.nodes
        if n.gpu and n.mig_config
    ]


def relabel(kube: Kube, inv: Inventory, changes: list[Change], reporter: Reporter) -> None:
    """A node moving to another MIG profile: the new profile and no state, in one write.

    Its `nvidia.com/mig.config.state` still says `success` for the old layout
    until the MIG manager notices the change; left in place, waiting for
    `success` would end at once on the old layout.
    """
    for obj in mig_labels(inv):
        name, want = obj["metadata"]["name"], obj["metadata"]["labels"][CONFIG_LABEL]
        labels = _labels(kube, name)
        if labels.get(CONFIG_LABEL) not in (None, want) and STATE_LABEL in labels:
            patch = {"metadata": {"labels": {CONFIG_LABEL: want, STATE_LABEL: None}}}
            kube.merge_patch("v1", "Node", name, None, patch)
            changes.append(Change(f"Node {name}", f"MIG profile {labels[CONFIG_LABEL]} -> {want}"))
            reporter.note(f"Node {name}: MIG profile {labels[CONFIG_LABEL]} -> {want}")


def offered(allocatable: dict[str, str]) -> dict[str, int]:
    """The MIG resources a node offers under the mixed strategy (`nvidia.com/mig-1g.10gb`: 56)."""
    out = {}
    for key, value in allocatable.items():
        if key.startswith(MIG_RESOURCE):
            try:
                count = int(value)
            except (TypeError, ValueError):
                continue
            if count > 0:
                out[key] = count
    return out


def _labels(kube: Kube, name: str) -> dict[str, str]:
    obj = kube.get("v1", "Node", name) or {}
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _manager_log(kube: Kube, node: str, namespace: str) -> tuple[str, tuple[str, ...]]:
    for pod in kube.find("v1", "Pod", namespace, labels=MANAGER_POD):
        if (pod.get("spec") or {}).get("nodeName") == node:
            name = pod["metadata"]["name"]
            return f"Pod {namespace}/{name}", tuple(kube.logs(name, namespace, tail=10))
    return "", ()


def wait_mig(kube: Kube, inv: Inventory, namespace: str, clock: Clock, reporter: Reporter) -> None:
    """Wait until every MIG node's layout is applied; a failed or stuck one is diagnosed from its log."""
    for node in mig_nodes(inv):
        profile = node.mig_config

        def settled(name: str = node.name, want: str | None = profile) -> str | None:
            labels = _labels(kube, name)
            state = labels.get(STATE_LABEL)
            return state if labels.get(CONFIG_LABEL) == want and state in ("success", "failed") else None

        def diagnose(name: str = node.name, want: str | None = profile, *, failed: bool = False) -> Diagnosis:
            state = _labels(kube, name).get(STATE_LABEL, "unset")
            pod, log = _manager_log(kube, name, namespace)
            return Diagnosis(
                "wait for MIG layout",
                f"Node {name}" + (f" ({pod})" if pod else ""),
                f"{STATE_LABEL} is {state} for {CONFIG_LABEL}={want}",
                "the profile does not fit this GPU model, or a process still holds a GPU so it "
                "cannot be reset" if failed else "the MIG manager has not finished (or is not running)",
                log,
                fix=f"oc logs -n {namespace} -l app=nvidia-mig-manager; correct mig_config in the "
                "inventory and run again",
            )

        state = clock.wait_for(settled, diagnose)
        if state == "failed":
            raise GpuFailed(diagnose(failed=True))
        reporter.note(f"Node {node.name}: MIG layout {profile} applied")
