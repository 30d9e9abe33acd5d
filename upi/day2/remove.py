"""`upi nodes remove`: workers taken out of an installed cluster (docs/day2.md).

As `oc adm drain` does (kubernetes.io, "Safely Drain a Node"; "API-initiated
Eviction"): cordon (spec.unschedulable), then evict every pod bound to the
node through the Eviction API so PodDisruptionBudgets are honoured (429 is
retried until the drain timeout), leaving DaemonSet pods and static (mirror)
pods, naming each pod whose emptyDir data is lost. Then the Node is deleted,
the machine powered off over Redfish (unless kept on) and its records in
the render dir cleared (installed.json, own-ignition.json). Each step is
skipped when already done, so a second run is harmless.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from upi.csr.api import ApiStatus
from upi.errors import ClusterError
from upi.gpu.kube import Kube, Obj

Say = Callable[[str], None]
MIRROR = "kubernetes.io/config.mirror"  # a static pod's API mirror: the kubelet owns it, never evicted


@dataclass(frozen=True)
class RemoveRequest:
    """What `upi nodes remove` was asked to do."""

    inventory: Path
    names: Sequence[str]
    out: Path | None = None
    kubeconfig: Path | None = None
    assets: Path | None = None
    keep_power: bool = False
    drain_timeout: float = 600.0
    dry_run: bool = False
    poll: float = 2.0


@dataclass
class Removed:
    """What was done for one node."""

    name: str
    evicted: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # DaemonSet and static pods
    empty_dir: list[str] = field(default_factory=list)
    node_deleted: bool = False
    power: str = ""
    record_cleared: bool = False

    def as_json(self) -> dict[str, Any]:
        """One object for --json."""
        return dict(vars(self))


class DrainKube(Kube):
    """The reads and writes a drain needs beyond upi.gpu.kube's (pods by node, evictions)."""

    def pods_on(self, node: str) -> list[Obj]:
        """Every pod bound to `node`, in all namespaces."""
        params = {"fieldSelector": f"spec.nodeName={node}"}
        found = self._call(lambda: self.api.list("/api/v1/pods", params=params)[1], f"list pods on {node}")
        return [p for p in found or [] if isinstance(p, dict)]

    def evict(self, namespace: str, name: str) -> bool:
        """Ask the API to evict the pod: True when accepted (or gone), False on 429 (a PDB blocks)."""
        url = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/eviction"
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        def attempt() -> bool:
            try:
                self.api.request("POST", url, body=body)
            except ApiStatus as exc:
                if exc.code == 429:  # TooManyRequests: a PodDisruptionBudget allows no disruption now
                    return False
                raise
            return True

        # A 404 (None): the pod is gone already, as good as evicted.
        return self._call(attempt, f"evict pod {namespace}/{name}", missing_ok=True) is not False

    def pod_gone(self, namespace: str, name: str, uid: str) -> bool:
        """The pod no longer exists (or another pod of that name replaced it)."""
        pod = self.get("v1", "Pod", name, namespace)
        return pod is None or (pod.get("metadata") or {}).get("uid") != uid


def _owner_kind(pod: Obj) -> str:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    ctl = [r for r in refs if isinstance(r, dict) and r.get("controller")]
    return str(ctl[0].get("kind", "")) if ctl else ""


def _ident(pod: Obj) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))


def _evictable(kube: DrainKube, node: str, out: Removed, say: Say) -> list[Obj]:
    """The pods a drain evicts; DaemonSet and static pods are left, emptyDir users named."""
    pending: list[Obj] = []
    for pod in kube.pods_on(node):
        ns, name, _ = _ident(pod)
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if _owner_kind(pod) == "DaemonSet" or MIRROR in annotations:
            out.left.append(f"{ns}/{name}")
            continue
        volumes = (pod.get("spec") or {}).get("volumes") or []
        lost = [v.get("name") for v in volumes if isinstance(v, dict) and "emptyDir" in v]
        if lost:
            out.empty_dir.append(f"{ns}/{name}")
            say(f"{node}: pod {ns}/{name} has emptyDir data ({', '.join(map(str, lost))}): "
                "it is lost with the eviction")
        pending.append(pod)
    if out.left:
        say(f"{node}: left in place (DaemonSet or static pods): {', '.join(out.left)}")
    return pending


def drain(kube: DrainKube, node: str, out: Removed, *, timeout: float, poll: float, say: Say,
          dry_run: bool = False) -> None:
    """Evict every evictable pod from `node`; ClusterError naming the pod a PDB still blocks at the end."""
    deadline = time.monotonic() + timeout
    pending = _evictable(kube, node, out, say)
    if dry_run:
        out.evicted = [f"{_ident(p)[0]}/{_ident(p)[1]}" for p in pending]
        return
    accepted: list[tuple[str, str, str]] = []
    while pending:
        blocked = []
        for pod in pending:
            ns, name, uid = _ident(pod)
            if kube.evict(ns, name):
                accepted.append((ns, name, uid))
                out.evicted.append(f"{ns}/{name}")
                say(f"{node}: evicted pod {ns}/{name}")
            else:
                blocked.append(pod)
        pending = blocked
        if pending and time.monotonic() >= deadline:
            ns, name, _ = _ident(pending[0])
            raise ClusterError(f"{node}: stage drain: pod {ns}/{name} could not be evicted within "
                               f"{timeout:g} s: a PodDisruptionBudget allows no disruption (429); "
                               "the node stays cordoned, run this again when the budget allows")
        if pending:
            time.sleep(poll)
    while any(not kube.pod_gone(*a) for a in accepted):
        if time.monotonic() >= deadline:
            left = [f"{a[0]}/{a[1]}" for a in accepted if not kube.pod_gone(*a)]
            raise ClusterError(f"{node}: stage drain: pods still terminating after {timeout:g} s: "
                               f"{', '.join(left)}")
        time.sleep(poll)


def remove_nodes(req: RemoveRequest, say: Say, warn: Say) -> dict[str, Removed]:
    """Cordon, drain, delete, power off and forget each named worker; per node what was done."""
    from upi.bmc import power
    from upi.csr.connect import connect, find_kubeconfig
    from upi.day2.add import _registered, chosen_workers
    from upi.day2.cluster import node_states
    from upi.inventory import load_inventory
    from upi.inventory.rules import bmc_files

    inv = load_inventory(req.inventory, check_files=False,
                         extra_rules=[] if req.keep_power else [lambda i: bmc_files(i, req.names or None)])
    names = chosen_workers(inv, req.names, adding=False)
    done = {n: Removed(n) for n in names}
    conn = connect(find_kubeconfig(req.kubeconfig, req.assets))
    try:
        kube = DrainKube(conn)
        states = node_states(kube)
        for name in names:
            node = _registered(inv, name, states)
            if node is None:
                say(f"{name}: not a Node of the cluster (removed already)")
                continue
            if not req.dry_run:
                kube.merge_patch("v1", "Node", node, None, {"spec": {"unschedulable": True}})
            say(f"{name}: cordoned" if not req.dry_run else f"{name}: would cordon and drain")
            drain(kube, node, done[name], timeout=req.drain_timeout, poll=req.poll, say=say,
                  dry_run=req.dry_run)
            if not req.dry_run:
                kube.delete("v1", "Node", node)
                done[name].node_deleted = True
                say(f"{name}: Node deleted")
    finally:
        conn.close()
    by_name = {n.name: n for n in inv.nodes}
    if not req.keep_power:
        driven = [n for n in names if by_name[n].bmc is not None]
        for name in names:
            if name not in driven:
                done[name].power = "by hand"
                say(f"{name}: no bmc section: power it off by hand")
        if driven:
            result = power(inv, driven, None if req.dry_run else "off", dry_run=req.dry_run, warn=warn)
            for name, state in result.states.items():
                done[name].power = result.sent.get(name, state.power)
            if result.errors:
                first = next(iter(result.errors))
                raise ClusterError(f"{first}: stage power: {result.errors[first]}")
    if req.out is not None and not req.dry_run:
        _clear_records(inv, req.out, names, done, say)
    return done


def _clear_records(inv: Any, out: Path, names: list[str], done: dict[str, Removed], say: Say) -> None:
    """Take the nodes out of DIR's records (under DIR's lock, one commit), so a re-added machine installs.

    installed.json: its PXE file installs again. own-ignition.json
    (upi.ownignition): its own ignition file is no longer published (the next
    push takes it off the HTTP server) and a re-added machine gets the
    ignition the cluster serves then, not a record of the old one.
    """
    from upi.installed import updated
    from upi.ownignition import RECORD
    from upi.renderdir import transaction

    with transaction(out) as txn:
        installed = [n for n in names if n in txn.records.installed]
        own = [n for n in names if n in txn.records.own]
        if installed or own:
            record = updated(inv, txn.records.installed, remove=installed) if installed else None
            txn.commit(None, record=record,
                       own={k: v for k, v in txn.records.own.items() if k not in own} if own else None)
    for name in names:
        cleared = [f for f, kept in (("installed.json", installed), (RECORD, own)) if name in kept]
        if cleared:
            done[name].record_cleared = True
            say(f"{name}: forgotten in {' and '.join(cleared)}")
