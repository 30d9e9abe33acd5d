"""`upi gpu`'s RDMA step: the Network Operator, its NicClusterPolicy ready, then GPUDirect on the GPU side.

Order matters (docs/rdma.md). The NIC driver (DOCA, `ofedDriver`) must be
loaded before the GPU driver is asked for nvidia-peermem: with
`driver.rdma.enabled` set first, the GPU driver daemonset waits on (or
breaks against) a NIC driver that is not there (network-operator issue
2471). So: subscribe, apply the NicClusterPolicy, wait for its `status.state`
`ready` and for the driver pod on every RDMA node, create the secondary
networks, and only then let the ClusterPolicy carry `driver.rdma.enabled`.

Facts: Mellanox/network-operator api/v1alpha1/nicclusterpolicy_types.go
(status.state ready/notReady/ignore/error, appliedStates[] of
{name, state, message}) and manifests/state-ofed-driver/0050_ofed-driver-ds.yaml
(the driver pods carry the label `nvidia.com/ofed-driver`, their container is
`mofed-container`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from upi.gpu.install import OLM, apply_all, choose, example_of, install_operator, operator_objects
from upi.gpu.kube import Kube, describe
from upi.gpu.network import (
    MELLANOX,
    NIC_POLICY,
    fabric_namespace,
    network_package,
    nic_cluster_policy,
    secondary_networks,
)
from upi.gpu.objects import CLUSTER_POLICY, MANAGED_BY, Obj, dump, own_namespace
from upi.gpu.pods import DRIVER_LABELS
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.gpu import settings
from upi.inventory.model import Inventory
from upi.inventory.rdma import rdma_nodes

if TYPE_CHECKING:
    from upi.gpu.rdma_verify import RdmaPlan, RdmaReport

STAGE = "Network Operator"
NIC_DRIVER_LABELS = {"nvidia.com/ofed-driver": ""}
NIC_DRIVER_CONTAINER = "mofed-container"
# The GPU driver pod's sidecar that loads nvidia-peermem once the NIC driver is ready (NVIDIA/gpu-operator
# assets/state-driver/0500_daemonset.yaml; present only with driver.rdma.enabled,
# controllers/object_controls.go transformPeerMemoryContainer).
PEERMEM_CONTAINER = "nvidia-peermem-ctr"
# Waiting reasons that mean the container keeps failing (kubelet), not that it is still starting.
FAILING = ("CrashLoopBackOff", "Error", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
           "CreateContainerConfigError", "CreateContainerError")


def related_images(csv: Obj) -> dict[str, str]:
    """A CSV's `spec.relatedImages` by name."""
    related = (csv.get("spec") or {}).get("relatedImages") or []
    return {str(r.get("name")): str(r.get("image")) for r in related if isinstance(r, dict)}


def install_network(kube: Kube, inv: Inventory, clock: Clock, changes: list[Change], reporter: Reporter,
                    nodes: Iterable[str] | None = None) -> None:
    """Install the Network Operator, apply the NicClusterPolicy, wait ready on `nodes`, add the networks.

    `nodes`: the RDMA nodes whose NIC driver must be ready (default: every one);
    the policy itself always names every RDMA node of the inventory.
    """
    if not rdma_nodes(inv):
        return
    reporter.stage(STAGE, "started")
    pkg = network_package(inv)
    csv = install_operator(kube, pkg, settings(inv).catalog_sources.namespace, clock, changes, reporter)
    policy = nic_cluster_policy(inv, example_of(csv, "NicClusterPolicy"), related_images(csv))
    apply_all(kube, [policy], changes, reporter)
    names = list(nodes) if nodes is not None else [n.name for n in rdma_nodes(inv)]
    wait_nic_ready(kube, pkg.namespace, names, clock)
    reporter.note(f"NicClusterPolicy {NIC_POLICY}: ready; NIC driver loaded on {', '.join(names)}")
    apply_all(kube, [*fabric_namespace(inv), *secondary_networks(inv)], changes, reporter)
    reporter.stage(STAGE, "done")


def _driver_pods(kube: Kube, ns: str) -> dict[str, Obj]:
    """The NIC driver pod of each node, by node name."""
    found = kube.find("v1", "Pod", ns, NIC_DRIVER_LABELS)
    return {str((p.get("spec") or {}).get("nodeName")): p for p in found}


def _ready(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all(s.get("ready") for s in statuses)


def _failing(pod: Obj) -> str | None:
    """Why the pod's driver container keeps failing, None while it is fine or still starting."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING:
            said = waiting.get("message") or ""
            return f"container {status.get('name')} is {waiting['reason']}" + (f" ({said})" if said else "")
    return None


def _pod_diagnosis(kube: Kube, ns: str, node: str, pod: Obj, problem: str) -> Diagnosis:
    name = pod["metadata"]["name"]
    return Diagnosis(
        STAGE, f"Pod {ns}/{name} (NIC driver on {node})", problem,
        cause="the DOCA/MOFED driver container cannot build or load the NIC driver on this node's kernel",
        log=tuple(kube.logs(name, ns, NIC_DRIVER_CONTAINER, tail=20)),
        fix=f"oc logs -n {ns} {name} -c {NIC_DRIVER_CONTAINER}; check ofedDriver.version supports the "
            "node's kernel (network_operator.nic_cluster_policy)")


def wait_nic_ready(kube: Kube, ns: str, nodes: list[str], clock: Clock) -> None:
    """NicClusterPolicy `ready` and a ready NIC driver pod on each node; a failing one stops at once."""
    what = describe(MELLANOX, "NicClusterPolicy", NIC_POLICY)

    def ready() -> bool | None:
        pods = _driver_pods(kube, ns)
        for node in nodes:
            pod = pods.get(node)
            bad = _failing(pod) if pod is not None else None
            if pod is not None and bad is not None:
                raise GpuFailed(_pod_diagnosis(kube, ns, node, pod, bad))
        policy = kube.get(MELLANOX, "NicClusterPolicy", NIC_POLICY) or {}
        if (policy.get("status") or {}).get("state") != "ready":
            return None
        return True if all(n in pods and _ready(pods[n]) for n in nodes) else None

    def stuck() -> Diagnosis:
        policy = kube.get(MELLANOX, "NicClusterPolicy", NIC_POLICY) or {}
        st = policy.get("status") or {}
        applied = [a for a in st.get("appliedStates") or [] if isinstance(a, dict)]
        waiting = [f"{a.get('name')} {a.get('state')}" + (f" ({a['message']})" if a.get("message") else "")
                   for a in applied if a.get("state") != "ready"]
        problem = f"state is {st.get('state', 'not set')}"
        problem += f"; not ready: {', '.join(waiting)}" if waiting else ""
        pods = _driver_pods(kube, ns)
        for node in nodes:
            pod = pods.get(node)
            if pod is None:
                return Diagnosis(STAGE, what, f"{problem}; no NIC driver pod on {node}",
                                 fix=f"oc get pods -n {ns} -o wide; is {node} labelled by NFD "
                                     "(feature.node.kubernetes.io/pci-15b3.present)?")
            if not _ready(pod):
                return _pod_diagnosis(kube, ns, node, pod, f"{problem}; its NIC driver pod is not ready")
        return Diagnosis(STAGE, what, problem, fix=f"oc describe nicclusterpolicy {NIC_POLICY}")

    clock.wait_for(ready, stuck)


def rdma_split(inv: Inventory, objs: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """The operands to apply now, and those that wait for the NIC driver (the ClusterPolicy, with rdma:)."""
    if not rdma_nodes(inv):
        return objs, []
    later = [o for o in objs if o["kind"] == "ClusterPolicy"]
    return [o for o in objs if o not in later], later


def apply_rdma_policy(kube: Kube, inv: Inventory, deferred: list[Obj], changes: list[Change],
                      reporter: Reporter) -> None:
    """Apply the ClusterPolicy with driver.rdma.enabled; on an existing one, say its driver pods restart."""
    if not deferred:
        return
    policy = kube.get("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY)
    rdma = (((policy or {}).get("spec") or {}).get("driver") or {}).get("rdma") or {}
    if policy is not None and rdma.get("enabled") is not True:
        reporter.warn(f"ClusterPolicy {CLUSTER_POLICY}: setting driver.rdma.enabled: the GPU driver pods "
                      "restart (to load nvidia-peermem); the GPUs are unavailable until the ClusterPolicy "
                      "is ready again")
    apply_all(kube, deferred, changes, reporter)


def _peermem(pod: Obj) -> Obj | None:
    return next((c for c in (pod.get("status") or {}).get("containerStatuses") or []
                 if c.get("name") == PEERMEM_CONTAINER), None)


def wait_peermem(kube: Kube, inv: Inventory, gpu_ns: str, clock: Clock,
                 only: Iterable[str] | None = None) -> None:
    """Each RDMA node's (of `only`) GPU driver pod runs a ready nvidia-peermem-ctr: GPUDirect is loaded."""
    wanted = None if only is None else set(only)
    nodes = [n.name for n in rdma_nodes(inv) if wanted is None or n.name in wanted]
    if not nodes:
        return

    def loaded() -> bool | None:
        return True if peermem_problem(kube, nodes, gpu_ns) is None else None

    def stuck() -> Diagnosis:
        return peermem_problem(kube, nodes, gpu_ns) or Diagnosis("ClusterPolicy ready", "nvidia-peermem",
                                                                 "not loaded")

    clock.wait_for(loaded, stuck)


def peermem_problem(kube: Kube, nodes: Iterable[str], gpu_ns: str) -> Diagnosis | None:
    """The first of `nodes` whose GPU driver pod has no ready nvidia-peermem-ctr, diagnosed; None if none."""
    found = {str((p.get("spec") or {}).get("nodeName")): p
             for p in kube.find("v1", "Pod", gpu_ns, DRIVER_LABELS)}
    for node in nodes:
        pod = found.get(node)
        if pod is None:
            return Diagnosis("ClusterPolicy ready", f"Node {node}", "no GPU driver pod",
                             fix=f"oc get pods -n {gpu_ns} -o wide")
        status = _peermem(pod)
        if status is None or status.get("ready") is not True:
            name = pod["metadata"]["name"]
            problem = ("its GPU driver pod has no nvidia-peermem-ctr container (driver.rdma.enabled not "
                       "applied yet)" if status is None else "nvidia-peermem-ctr is not ready")
            where = f"Pod {gpu_ns}/{name} (GPU driver on {node})"
            return Diagnosis("ClusterPolicy ready", where, problem,
                             cause="nvidia-peermem loads only once the NIC driver is ready on the node",
                             log=tuple(kube.logs(name, gpu_ns, PEERMEM_CONTAINER, tail=20))
                             if status is not None else (),
                             fix=f"oc logs -n {gpu_ns} {name} -c {PEERMEM_CONTAINER}")
    return None


def peermem_stuck(kube: Kube, inv: Inventory, gpu_ns: str) -> Diagnosis | None:
    """After the ClusterPolicy did not get ready: an RDMA node whose nvidia-peermem is what holds it back.

    The GPU driver pod is ready only with every container ready, so a peermem
    that never loads keeps the ClusterPolicy notReady; naming the node and its
    peermem log says more than the ClusterPolicy's state.
    """
    nodes = [n.name for n in rdma_nodes(inv)]
    return peermem_problem(kube, nodes, gpu_ns) if nodes else None


def plan_network(inv: Inventory, kube: Kube) -> list[str]:
    """--dry-run: the Network Operator's objects, read-only against the cluster."""
    pkg = network_package(inv)
    cat_ns = settings(inv).catalog_sources.namespace
    docs = [dump(o) for o in operator_objects(pkg, choose(kube, pkg, cat_ns), cat_ns)]
    sub = kube.get(OLM, "Subscription", pkg.name, pkg.namespace) or {}
    name = (sub.get("status") or {}).get("installedCSV")
    csv = kube.get(OLM, "ClusterServiceVersion", name, pkg.namespace) if name else None
    if csv is None:
        return [*docs, "# NicClusterPolicy: built from the Network Operator's CSV once installed\n"]
    policy = nic_cluster_policy(inv, example_of(csv, "NicClusterPolicy"), related_images(csv))
    return docs + [dump(o) for o in [policy, *secondary_networks(inv)]]


def rdma_for_nodes(kube: Kube, inv: Inventory, names: list[str], clock: Clock, reporter: Reporter) -> None:
    """`upi nodes add`: the RDMA steps for the named nodes that have rdma:; GpuFailed on a failure.

    The NicClusterPolicy names the RDMA nodes (its nodeAffinity, the plugin's
    ports), so it is applied again with the new ones; their NIC driver must be
    ready, then their GPU driver pods must load nvidia-peermem. GPUDirect itself
    (the ClusterPolicy's driver.rdma.enabled) is day 1's: switching it on
    restarts every GPU driver, which is `upi gpu`'s to do, not a node's.
    """
    new = [n.name for n in rdma_nodes(inv) if n.name in names]
    if not new:
        return
    policy = kube.get("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY) or {}
    rdma = ((policy.get("spec") or {}).get("driver") or {}).get("rdma") or {}
    if rdma.get("enabled") is not True:
        raise GpuFailed(Diagnosis(
            STAGE, f"ClusterPolicy {CLUSTER_POLICY}", "GPUDirect RDMA (driver.rdma.enabled) is not on",
            cause="the cluster's GPU stack was installed without rdma: nodes",
            fix="run `upi gpu` with the inventory: it installs the Network Operator for every rdma: "
                "node, then switches GPUDirect on (the GPU driver pods restart)"))
    install_network(kube, inv, clock, [], reporter, nodes=new)
    wait_peermem(kube, inv, settings(inv).operator_namespace, clock, only=new)


# The bandwidth pods add IPC_LOCK and run as root (perftest pins GPU memory for the NIC): the restricted-v2
# SCC every pod gets admits neither. OpenShift has one ClusterRole per default SCC granting `use` on it,
# `system:openshift:scc:<name>` (openshift-docs modules/security-context-constraints-rbac.adoc, "Role-based
# access to security context constraints"); a RoleBinding to it in upi's own test namespace lets upi's
# own ServiceAccount, and nothing else, run under `privileged` there (what `oc adm policy add-scc-to-user
# privileged -z <account> -n <ns>` does, scoped to the namespace).
TEST_ACCOUNT = "upi-rdma-bandwidth"
SCC_ROLE = "system:openshift:scc:privileged"


def test_account_objects(inv: Inventory) -> list[Obj]:
    """The bandwidth test's Namespace, ServiceAccount and RoleBinding to the privileged SCC's ClusterRole."""
    from upi.inventory.rdma import operator_settings

    ns = operator_settings(inv).bandwidth.namespace
    return [
        own_namespace(ns),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": TEST_ACCOUNT, "namespace": ns, "labels": dict(MANAGED_BY)}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{TEST_ACCOUNT}-scc-privileged", "namespace": ns, "labels": dict(MANAGED_BY)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SCC_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": TEST_ACCOUNT, "namespace": ns}]},
    ]


def apply_test_account(kube: Kube, inv: Inventory, changes: list[Change], reporter: Reporter) -> None:
    """Apply the bandwidth test's namespace, account and SCC binding (unchanged on a second run)."""
    apply_all(kube, test_account_objects(inv), changes, reporter)


def verify_joining(kube: Kube, inv: Inventory, names: Iterable[str], clock: Clock,
                   reporter: Reporter) -> RdmaReport | None:
    """`upi nodes add`: the new rdma: DGXs' node checks, each paired once with a DGX of its fabric.

    None when no named node has rdma:. The report's diagnosis is the first failure.
    """
    from dataclasses import replace

    from upi.gpu.rdma_verify import verify_rdma

    wanted = set(names)
    new = tuple(n.name for n in rdma_nodes(inv) if n.name in wanted)
    if not new:
        return None
    apply_test_account(kube, inv, [], reporter)
    return verify_rdma(kube, replace(verify_plan(inv), new=new), reporter, clock)


def verify_plan(inv: Inventory) -> RdmaPlan:
    """The verification's input (upi.gpu.rdma_verify) from the inventory's rdma: and network_operator:.

    Targets in inventory order (the ring's order), each with its fabric, the
    device plugin's resource and its fabric's secondary network; the test pods
    run in the bandwidth test's namespace under upi's account, tolerate the GPU pool's taint.
    """
    from upi.gpu.pool import pod_tolerations
    from upi.gpu.rdma_verify import RdmaPlan, RdmaTarget
    from upi.inventory.rdma import operator_settings

    op = operator_settings(inv)
    sec = op.secondary_network
    targets = tuple(
        RdmaTarget(node=n.name, fabric=n.rdma.link_type, resource=f"rdma/{op.resource_name}",
                   network=f"{sec.namespace}/{getattr(sec, n.rdma.link_type).name}")
        for n in rdma_nodes(inv) if n.rdma is not None)
    return RdmaPlan(targets=targets, namespace=op.bandwidth.namespace, service_account=TEST_ACCOUNT,
                    image=op.bandwidth.image,
                    min_gbps=float(op.bandwidth.min_gbps), tolerations=tuple(pod_tolerations(inv)),
                    gpu_namespace=settings(inv).operator_namespace, network_namespace=op.namespace)
