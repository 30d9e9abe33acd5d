"""One round of RDMA bandwidth tests (upi.gpu.rdma_verify): every pair of the round at once.

The servers of the round are created first and awaited together for their
address on the secondary network; then every client is created and awaited
together; then each pair is judged by its client's report. Every pod is
deleted afterwards, passed or not. The round shares one wait, bounded by the
plan's timeout and the run's deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from upi.gpu.kube import Kube
from upi.gpu.objects import Obj
from upi.gpu.pods import pull_failure
from upi.gpu.rdma_pairs import Pair
from upi.gpu.rdma_perftest import CONTAINER, command, network_ip, parse, pod
from upi.gpu.steps import Clock, Diagnosis, Reporter

if TYPE_CHECKING:
    from upi.gpu.rdma_verify import PairRow, RdmaPlan, RdmaTarget

STEP = "verify RDMA"
LOG_LINES = 10


def run_round(kube: Kube, plan: RdmaPlan, pairs: list[tuple[Pair, PairRow]], by_node: dict[str, RdmaTarget],
              clock: Clock, reporter: Reporter) -> None:
    """The round's pairs at once: servers created and awaited for their address, then clients; all deleted."""
    started = time.monotonic()
    end = started + min(plan.timeout, clock.left())
    created: list[str] = []
    try:
        servers = {i: _create(kube, plan, ("server", i, pair), by_node[pair.server], None, created, reporter)
                   for i, (pair, _) in enumerate(pairs)}
        ips = _await(kube, plan, servers, end, clock,
                     lambda p, i: _server_ready(p, by_node[pairs[i][0].server].network))
        clients: dict[int, str] = {}
        for i, (pair, row) in enumerate(pairs):
            if ips.get(i):
                clients[i] = _create(kube, plan, ("client", i, pair), by_node[pair.client], ips[i], created,
                                     reporter)
            else:
                _server_failed(kube, plan, row, servers[i], pair.server)
        done = _await(kube, plan, clients, end, clock, lambda p, _: _finished(p))
        for i, (pair, row) in enumerate(pairs):
            if i in clients:
                _judge(kube, plan, row, clients[i], pair.client, done.get(i))
            row.seconds = round(time.monotonic() - started, 1)
            reporter.note(f"{row.name}: {_said(row)}")
    finally:
        for name in created:
            kube.delete("v1", "Pod", name, plan.namespace)


def _create(kube: Kube, plan: RdmaPlan, which: tuple[str, int, Pair], target: RdmaTarget,
            server_ip: str | None, created: list[str], reporter: Reporter) -> str:
    """Create one side's pod on `target`'s node (the client given the server's address); its name."""
    role, index, pair = which
    obj = pod(role=role, pair=f"{pair.round + 1}-{index}", node=target.node, namespace=plan.namespace,
              image=plan.image, argv=command(plan.test, target.device, server_ip), network=target.network,
              resources={plan.gpu_resource: "1", target.resource: "1"}, tolerations=list(plan.tolerations),
              service_account=plan.service_account)
    name = str(kube.create(obj)["metadata"]["name"])
    created.append(name)
    reporter.note(f"RDMA {role} pod {plan.namespace}/{name} on {target.node}"
                  + (f" -> {server_ip}" if server_ip else ""))
    return name


def _said(row: PairRow) -> str:
    if row.average_gbps is not None:
        return f"{row.average_gbps:.2f} Gb/s average ({row.verdict})"
    return f"{row.verdict}: {row.problem}"


def _await(kube: Kube, plan: RdmaPlan, pods: dict[int, str], end: float, clock: Clock,
           check: Callable[[Obj, int], str | None]) -> dict[int, str]:
    """Poll each pod until `check(pod, key)` gives a value or `end`; the values found by key."""
    found: dict[int, str] = {}
    while True:
        for key, name in pods.items():
            if key not in found:
                current = kube.get("v1", "Pod", name, plan.namespace) or {}
                value = check(current, key)
                if value is not None:
                    found[key] = value
        if len(found) == len(pods) or time.monotonic() >= end:
            return found
        time.sleep(min(clock.poll, max(0.0, end - time.monotonic())))


def _server_ready(pod_obj: Obj, network: str) -> str | None:
    """The server's address once it runs with its secondary network; "" when it ended before a client came."""
    phase = (pod_obj.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return ""
    if phase != "Running":
        return None
    return network_ip(pod_obj, network)


def _finished(pod_obj: Obj) -> str | None:
    phase = (pod_obj.get("status") or {}).get("phase")
    return str(phase) if phase in ("Succeeded", "Failed") else None


def _pending_reason(pod_obj: Obj) -> str | None:
    """The scheduler's message when the pod is Pending because it cannot be placed."""
    for cond in (pod_obj.get("status") or {}).get("conditions") or []:
        if (isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"):
            return str(cond.get("message") or "Unschedulable")
    return None


def _stuck(plan: RdmaPlan, row: PairRow, current: Obj, name: str, role: str, node: str) -> bool:
    """A pod that never ran: the scheduler cannot place it (its words), or its image cannot be pulled."""
    where = f"pair {row.name}: Pod {plan.namespace}/{name} ({role} on {node})"
    unplaced = _pending_reason(current)
    if unplaced is not None:
        row.verdict, row.problem = "unschedulable", f"the {role} pod cannot be scheduled: {unplaced}"
        fix = (f"{node} must offer one {plan.gpu_resource} and one {row.fabric} RDMA device free, and the "
               "pods must tolerate its taints")
        row.diagnosis = Diagnosis(STEP, where, row.problem, "", (), fix)
        return True
    pull = pull_failure(current)
    if pull is not None:
        row.verdict, row.problem = "failed", f"the {role} pod cannot start: {pull.text()}"
        row.diagnosis = Diagnosis(STEP, where, row.problem, "", (),
                                  "mirror the perftest image (disconnected: oc-mirror and an "
                                  "ImageDigestMirrorSet) or fix the pull secret")
        return True
    return False


def _server_failed(kube: Kube, plan: RdmaPlan, row: PairRow, name: str, node: str) -> None:
    """Why the server never offered an address: not placed, not pulled, ended, no secondary network, slow."""
    current = kube.get("v1", "Pod", name, plan.namespace) or {}
    if _stuck(plan, row, current, name, "server", node):
        return
    phase = (current.get("status") or {}).get("phase", "Pending")
    where = f"pair {row.name}: Pod {plan.namespace}/{name} (server on {node})"
    row.log = tuple(kube.logs(name, plan.namespace, CONTAINER, tail=LOG_LINES))
    if phase in ("Succeeded", "Failed"):
        row.verdict, row.problem = "failed", f"the server pod ended ({phase}) before its client connected"
    elif phase == "Running":
        row.verdict = "timed out"
        row.problem = "the server pod has no address on the secondary network (Multus network-status)"
    else:
        row.verdict, row.problem = "timed out", f"the server pod did not start within {plan.timeout:g}s"
    row.diagnosis = Diagnosis(STEP, where, row.problem, "", row.log)


def _judge(kube: Kube, plan: RdmaPlan, row: PairRow, name: str, node: str, phase: str | None) -> None:
    """The pair's verdict from its client: the figures against the minimum, or why there are none."""
    current = kube.get("v1", "Pod", name, plan.namespace) or {}
    where = f"pair {row.name}: Pod {plan.namespace}/{name} (client on {node})"
    if phase is None and _stuck(plan, row, current, name, "client", node):
        return
    lines = kube.logs(name, plan.namespace, CONTAINER, tail=60)
    row.log = tuple(lines[-LOG_LINES:])
    figures = parse(lines) if phase == "Succeeded" else None
    if phase is None:
        row.verdict = "timed out"
        row.problem = f"the bandwidth test did not finish within {plan.timeout:g}s"
    elif figures is None:
        row.verdict = "failed"
        row.problem = f"the client pod {phase} without an ib_write_bw report"
    else:
        row.peak_gbps, row.average_gbps = figures.peak, figures.average
        if figures.average >= plan.min_gbps:
            row.verdict = "passed"
            return
        row.verdict = "below minimum"
        row.problem = (f"average {figures.average:.2f} Gb/s (peak {figures.peak:.2f}) is below the "
                       f"minimum {plan.min_gbps:g} Gb/s")
        row.diagnosis = Diagnosis(
            STEP, f"pair {row.name} ({row.fabric})", row.problem,
            "a slow link: a port below its rate (ibstat, ethtool), a cable, or GPU and NIC on different "
            "PCIe switches or NUMA nodes", (),
            "compare this pair with the node's other pair: both slow points at the node, one at the link")
        return
    row.diagnosis = Diagnosis(STEP, where, row.problem, "", row.log)
