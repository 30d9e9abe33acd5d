"""The GPU nodes as a pool of their own: role label, MachineConfigPool, tuning, rollout, taint.

Facts: ../shared/data/tuning/README.md and the machine config operator
(openshift/machine-config-operator docs/MachineConfigDaemon.md,
docs/custom-pools.md; pkg/daemon/constants for the node annotations). A
custom pool selects nodes by `node-role.kubernetes.io/<pool>` and
MachineConfigs by the roles `worker` and `<pool>`; a KubeletConfig or a
PerformanceProfile targets it through the pool's own label. The MCO renders
the pool's config (`rendered-<pool>-<hash>`) and reboots the nodes into it one
at a time, each node's `state` annotation going Working -> Done. The taint
comes last, once the nodes run the pool's config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from upi.gpu.kube import Kube, describe
from upi.gpu.objects import Obj, gpu_nodes
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.gpupool import GpuPool, Taint, pool_settings, pool_taint
from upi.inventory.model import Inventory

MCO = "machineconfiguration.openshift.io/v1"
PAO = "performance.openshift.io/v2"
ROLE = "node-role.kubernetes.io/"
MC_ROLE = "machineconfiguration.openshift.io/role"
# The label OpenShift's own pools carry (`pools.operator.machineconfiguration.openshift.io/worker`);
# a KubeletConfig or PerformanceProfile selects the pool by it.
POOL_LABEL = "pools.operator.machineconfiguration.openshift.io/"
# Node annotations the machine config daemon keeps (MCO pkg/daemon/constants/constants.go).
CURRENT = "machineconfiguration.openshift.io/currentConfig"
DESIRED = "machineconfiguration.openshift.io/desiredConfig"
STATE = "machineconfiguration.openshift.io/state"
REASON = "machineconfiguration.openshift.io/reason"
# The node patches' field manager: not `upi`, whose server-side applies of the same Node (the MIG
# label) must not count the role label and the taint as fields it dropped.
PATCHER = "upi-gpu-pool"


def role_label(pool: GpuPool) -> str:
    """`node-role.kubernetes.io/<pool>`: the label that puts a node in the pool."""
    return ROLE + pool.name


def machine_config_pool(pool: GpuPool) -> Obj:
    """The pool: the worker MachineConfigs plus its own, on the nodes with its role."""
    return {
        "apiVersion": MCO, "kind": "MachineConfigPool",
        "metadata": {"name": pool.name, "labels": {POOL_LABEL + pool.name: ""}},
        "spec": {
            "machineConfigSelector": {"matchExpressions": [
                {"key": MC_ROLE, "operator": "In", "values": ["worker", pool.name]}]},
            "nodeSelector": {"matchLabels": {role_label(pool): ""}},
            "maxUnavailable": pool.max_unavailable,
        },
    }


def _selector(pool: GpuPool) -> Obj:
    return {"matchLabels": {POOL_LABEL + pool.name: ""}}


def kubelet_config(pool: GpuPool) -> Obj:
    """CPU manager and topology manager of the pool's kubelets (upstream KubeletConfiguration fields)."""
    t = pool.tuning
    kubelet: Obj = {"cpuManagerPolicy": t.cpu_manager, "topologyManagerPolicy": t.topology_manager}
    if t.cpu_manager == "static":  # the static policy needs CPUs kept back for the system
        kubelet |= {"cpuManagerReconcilePeriod": "5s", "reservedSystemCPUs": t.reserved_cpus}
    return {
        "apiVersion": MCO, "kind": "KubeletConfig",
        "metadata": {"name": f"{pool.name}-kubelet"},
        "spec": {"machineConfigPoolSelector": _selector(pool), "kubeletConfig": kubelet},
    }


def hugepages_config(pool: GpuPool) -> Obj | None:
    """Hugepages reserved at boot: kernel arguments in a MachineConfig of the pool's role."""
    pages = pool.tuning.hugepages
    if not pages:
        return None
    args = [f"default_hugepagesz={pages[0].size}"]
    for page in pages:
        args += [f"hugepagesz={page.size}", f"hugepages={page.count}"]
    return {
        "apiVersion": MCO, "kind": "MachineConfig",
        "metadata": {"name": f"50-{pool.name}-hugepages", "labels": {MC_ROLE: pool.name}},
        "spec": {"kernelArguments": args},
    }


def performance_profile(pool: GpuPool) -> Obj:
    """The inventory's PerformanceProfile spec, aimed at the pool (its node selector and pool label)."""
    t = pool.tuning
    spec: dict[str, Any] = dict(t.performance_profile or {})
    spec.setdefault("nodeSelector", {role_label(pool): ""})
    spec.setdefault("machineConfigPoolSelector", {POOL_LABEL + pool.name: ""})
    spec.setdefault("numa", {"topologyPolicy": t.topology_manager})
    if t.hugepages and "hugepages" not in spec:
        spec["hugepages"] = {"defaultHugepagesSize": t.hugepages[0].size,
                             "pages": [{"size": h.size, "count": h.count} for h in t.hugepages]}
    return {"apiVersion": PAO, "kind": "PerformanceProfile", "metadata": {"name": pool.name}, "spec": spec}


def pool_objects(inv: Inventory) -> list[Obj]:
    """The pool and its tuning, in apply order (the node labels and the taint are patches)."""
    pool = pool_settings(inv)
    out = [machine_config_pool(pool)]
    if pool.tuning.performance_profile is not None:
        return [*out, performance_profile(pool)]
    hugepages = hugepages_config(pool)
    return [*out, *([hugepages] if hugepages else []), kubelet_config(pool)]


def toleration(taint: Taint | None) -> list[Obj]:
    """What a pod needs to run on a tainted GPU node ([] without a taint)."""
    if taint is None:
        return []
    return [{"key": taint.key, "operator": "Exists", "effect": taint.effect}]


def pod_tolerations(inv: Inventory) -> list[Obj]:
    """Tolerations of every pod upi runs on a GPU node: the pool's taint (and the default GPU one)."""
    default = toleration(Taint())
    own = toleration(pool_taint(inv))
    return default + [t for t in own if t not in default]


def _node_labels(inv: Inventory) -> list[Obj]:
    pool = pool_settings(inv)
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {role_label(pool): ""}}}
            for n in gpu_nodes(inv)]


def _taint_of(node: Obj, taint: Taint) -> Obj | None:
    return next((t for t in (node.get("spec") or {}).get("taints") or []
                 if t.get("key") == taint.key and t.get("effect") == taint.effect), None)


def label_nodes(kube: Kube, inv: Inventory, changes: list[Change], reporter: Reporter,
                only: frozenset[str] = frozenset()) -> None:
    """Each GPU node (of `only`, when given) gets the pool's role label (a merge patch: other labels stay)."""
    label = role_label(pool_settings(inv))
    for name in (n for n in gpu_nodes(inv) if not only or n in only):
        node = kube.get("v1", "Node", name)
        if node is None:
            raise GpuFailed(Diagnosis("GPU pool", f"Node {name}",
                                      "the inventory's GPU node is not in the cluster",
                                      fix="check the node joined (oc get nodes) and its name matches"))
        if label in (node["metadata"].get("labels") or {}):
            changes.append(Change(f"Node {name}", "unchanged"))
            continue
        kube.merge_patch("v1", "Node", name, None, {"metadata": {"labels": {label: ""}}}, manager=PATCHER)
        changes.append(Change(f"Node {name}", f"labelled {label}"))
        reporter.note(f"Node {name}: labelled {label}")


def taint_nodes(kube: Kube, inv: Inventory, changes: list[Change], reporter: Reporter,
                only: frozenset[str] = frozenset()) -> None:
    """Each GPU node (of `only`, when given) carries the pool's taint; the node's other taints are kept."""
    taint = pool_taint(inv)
    if taint is None:
        return
    want = {"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})}
    for name in (n for n in gpu_nodes(inv) if not only or n in only):
        node = kube.get("v1", "Node", name) or {}
        have = _taint_of(node, taint)
        if have is not None and have.get("value", "") == taint.value:
            continue
        others = [t for t in (node.get("spec") or {}).get("taints") or [] if t is not have]
        # A merge patch replaces the list: send the node's other taints with ours.
        kube.merge_patch("v1", "Node", name, None, {"spec": {"taints": [*others, want]}}, manager=PATCHER)
        changes.append(Change(f"Node {name}", f"tainted {taint.key}:{taint.effect}"))
        shown = f"{taint.key}={taint.value}" if taint.value else taint.key
        reporter.note(f"Node {name}: tainted {shown}:{taint.effect}")


@dataclass
class Rollout:
    """What the pool's rollout has shown so far: each node's last state, to say each change once."""

    pool: str
    nodes: list[str]
    sources: list[str]
    kubelet: str = ""  # the KubeletConfig whose Failure condition stops the wait
    seen: dict[str, str] = field(default_factory=dict)


def _condition(mcp: Obj, kind: str) -> Obj:
    return next((c for c in (mcp.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _annotations(kube: Kube, ro: Rollout) -> dict[str, dict[str, str]]:
    """Each pool node's annotations, from one list of the pool's nodes (not a GET per node)."""
    found = {n["metadata"]["name"]: n["metadata"].get("annotations") or {}
             for n in kube.find("v1", "Node", labels={ROLE + ro.pool: ""})}
    return {name: found.get(name, {}) for name in ro.nodes}


def _degraded(mcp: Obj, ro: Rollout, nodes: dict[str, dict[str, str]]) -> Diagnosis | None:
    pool_msg = (_condition(mcp, "NodeDegraded").get("message") or _condition(mcp, "Degraded").get("message")
                or "")
    for name, notes in nodes.items():
        if notes.get(STATE) == "Degraded":
            reason = notes.get(REASON) or "no reason given"
            return Diagnosis("GPU pool", f"Node {name}",
                             f"the machine config daemon reports Degraded: {reason}",
                             cause=f"MachineConfigPool {ro.pool}: {pool_msg}" if pool_msg else "",
                             fix=f"oc describe node {name}; oc logs -n openshift-machine-config-operator "
                                 f"the machine-config-daemon pod on {name}")
    st = mcp.get("status") or {}
    if st.get("degradedMachineCount") or _condition(mcp, "Degraded").get("status") == "True":
        return Diagnosis("GPU pool", f"MachineConfigPool {ro.pool}", f"the pool is Degraded: {pool_msg}",
                         fix=f"oc describe machineconfigpool {ro.pool}")
    return None


def _progress(ro: Rollout, nodes: dict[str, dict[str, str]], reporter: Reporter) -> None:
    """Report each node whose state moved (Working: it drains and reboots)."""
    for name, notes in nodes.items():
        state = notes.get(STATE, "")
        if state and ro.seen.get(name) != state:
            if state == "Working":
                reporter.note(f"Node {name}: updating to {notes.get(DESIRED, '?')} (drains and reboots)")
            elif state == "Done" and name in ro.seen:
                reporter.note(f"Node {name}: on {notes.get(CURRENT, '?')}")
            ro.seen[name] = state


def expected_sources(pool: GpuPool) -> list[str]:
    """MachineConfigs the pool's rendered config must include once the tuning is rendered.

    Named as the controllers name them: the kubelet config controller's
    `99-<pool>-generated-kubelet` (MCO pkg/controller/kubelet-config), the Node
    Tuning Operator's `50-performance-<profile>`. Until the pool's config lists
    them, a rollout that looks finished is the old config's.
    """
    if pool.tuning.performance_profile is not None:
        return [f"50-performance-{pool.name}"]
    hugepages = [f"50-{pool.name}-hugepages"] if pool.tuning.hugepages else []
    return [f"99-{pool.name}-generated-kubelet", *hugepages]


def _kubelet_failure(kube: Kube, name: str) -> Diagnosis | None:
    """The kubelet config controller's `Failure` condition: the tuning will never be rendered."""
    kc = kube.get(MCO, "KubeletConfig", name) or {}
    st = kc.get("status") or {}
    if st.get("observedGeneration", 0) < (kc.get("metadata") or {}).get("generation", 0):
        return None  # not judged yet: an old verdict on an earlier spec
    bad = next((c for c in st.get("conditions") or []
                if c.get("type") == "Failure" and c.get("status") == "True"), None)
    if bad is None:
        return None
    return Diagnosis("GPU pool", f"KubeletConfig {name}", f"the machine config operator refused it: "
                     f"{bad.get('message') or 'no message'}", fix=f"oc describe kubeletconfig {name}; "
                     "fix gpu_pool.tuning and run again")


def _rolled_out(kube: Kube, ro: Rollout, reporter: Reporter) -> Obj | None:
    if ro.kubelet:
        refused = _kubelet_failure(kube, ro.kubelet)
        if refused is not None:
            raise GpuFailed(refused)
    mcp = kube.get(MCO, "MachineConfigPool", ro.pool) or {}
    notes = _annotations(kube, ro)
    bad = _degraded(mcp, ro, notes)
    if bad is not None:
        raise GpuFailed(bad)
    _progress(ro, notes, reporter)
    st, spec = mcp.get("status") or {}, mcp.get("spec") or {}
    rendered = (spec.get("configuration") or {}).get("name")
    if not rendered or (st.get("configuration") or {}).get("name") != rendered:
        return None
    sources = {s.get("name") for s in (spec.get("configuration") or {}).get("source") or []}
    if not set(ro.sources) <= sources:
        return None
    if st.get("observedGeneration", 0) < (mcp.get("metadata") or {}).get("generation", 0):
        return None
    counts = [st.get(k) for k in ("machineCount", "updatedMachineCount", "readyMachineCount")]
    if counts != [len(ro.nodes)] * 3 or _condition(mcp, "Updated").get("status") != "True":
        return None
    done = all(n.get(STATE) == "Done" and n.get(CURRENT) == n.get(DESIRED) == rendered
               for n in notes.values())
    return mcp if done else None


def _stuck(kube: Kube, ro: Rollout) -> Diagnosis:
    mcp = kube.get(MCO, "MachineConfigPool", ro.pool) or {}
    st = mcp.get("status") or {}
    counts = ", ".join(f"{k} {st.get(k, '?')}" for k in ("machineCount", "updatedMachineCount",
                                                          "readyMachineCount", "degradedMachineCount"))
    waiting = [n for n in ro.nodes if ro.seen.get(n) != "Done"]
    updated = _condition(mcp, "Updated").get("status")
    return Diagnosis("GPU pool", f"MachineConfigPool {ro.pool}",
                     f"the rollout did not finish ({counts}; Updated {updated})"
                     + (f"; not done: {', '.join(waiting)}" if waiting else ""),
                     fix=f"oc get mcp {ro.pool}; oc get nodes -l {ROLE}{ro.pool}: a node reboots for minutes")


def wait_rollout(kube: Kube, inv: Inventory, clock: Clock, reporter: Reporter,
                 nodes: list[str] | None = None) -> Obj:
    """Wait for every GPU node (or `nodes`: the pool's members) to run the pool's rendered config.

    A Degraded node is GpuFailed at once.
    """
    pool = pool_settings(inv)
    kubelet = "" if pool.tuning.performance_profile is not None else kubelet_config(pool)["metadata"]["name"]
    ro = Rollout(pool.name, gpu_nodes(inv) if nodes is None else nodes, expected_sources(pool), kubelet)
    mcp = clock.wait_for(lambda: _rolled_out(kube, ro, reporter), lambda: _stuck(kube, ro))
    rendered = mcp["status"]["configuration"]["name"]
    reporter.note(f"MachineConfigPool {pool.name}: {len(ro.nodes)} node(s) on {rendered}")
    return mcp


def setup_pool(kube: Kube, inv: Inventory, clock: Clock, changes: list[Change], reporter: Reporter) -> None:
    """Label the GPU nodes, apply the pool and its tuning, wait for the rollout, then taint the nodes."""
    from upi.gpu.install import apply_all

    # The pool and its tuning first: nodes that join it then reboot once, into the tuned config,
    # not first into the pool's untuned one and then again.
    apply_all(kube, pool_objects(inv), changes, reporter)
    label_nodes(kube, inv, changes, reporter)
    wait_rollout(kube, inv, clock, reporter)
    taint_nodes(kube, inv, changes, reporter)


def plan_pool(inv: Inventory) -> list[Obj]:
    """--dry-run: the node labels, the pool and its tuning (the taint follows the rollout)."""
    taint = pool_taint(inv)
    out = [*_node_labels(inv), *pool_objects(inv)]
    if taint is not None:
        out += [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                 "spec": {"taints": [{"key": taint.key, "effect": taint.effect,
                                      **({"value": taint.value} if taint.value else {})}]}}
                for n in gpu_nodes(inv)]
    return out


__all__ = ["describe", "pod_tolerations", "setup_pool"]


def for_pool(inv: Inventory, policy: Obj) -> Obj:
    """The ClusterPolicy made to serve the pool: its daemonsets tolerate the taint; metrics if asked.

    The operator's daemonsets tolerate `nvidia.com/gpu` by default; a list in
    `daemonsets.tolerations` replaces that default, so the default goes in too.
    With metrics on, the DCGM exporter gets its ServiceMonitor (ClusterPolicy
    `dcgmExporter.serviceMonitor`), which the cluster's Prometheus scrapes in a
    namespace labelled `openshift.io/cluster-monitoring`; off, no ServiceMonitor.
    """
    spec = policy["spec"]
    daemonsets = spec.setdefault("daemonsets", {})
    have = list(daemonsets.get("tolerations") or [])
    daemonsets["tolerations"] = have + [t for t in pod_tolerations(inv) if t not in have]
    exporter = spec.setdefault("dcgmExporter", {})
    on = pool_settings(inv).metrics
    if on:
        exporter["enabled"] = True
    # Off: the exporter may stay (other scrapers), but the cluster's Prometheus is not pointed at it.
    exporter["serviceMonitor"] = {**(exporter.get("serviceMonitor") or {}), "enabled": on}
    return policy
