"""`upi nodes add`: workers written into the inventory join an installed cluster (docs/day2.md).

The same steps as day 1's metal workers, scoped to the named nodes: the
worker ignition the cluster serves now (not day 1's files), render + push,
a one-time network boot over Redfish, only these nodes' CSRs approved, each
PXE file flipped to local boot as its Node registers. Every step looks at
what is already done first, so a second run (after Ctrl-C, a failure or a
success) changes nothing that is already right.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from upi.console import shown_name
from upi.errors import ClusterError, UsageError
from upi.inventory.model import Inventory, Machine, Role

Say = Callable[[str], None]
CONTROL_PLANE = ("replacing a control-plane node is another procedure (OpenShift docs: "
                 "\"Replacing an unhealthy etcd member\"; docs/day2.md)")


@dataclass(frozen=True)
class AddRequest:
    """What `upi nodes add` was asked to do."""

    inventory: Path
    names: Sequence[str]
    out: Path
    kubeconfig: Path | None = None
    assets: Path | None = None
    metal: bool = True
    dry_run: bool = False
    timeout: float = 3600.0
    poll: float = 10.0
    gpu: bool = True


@dataclass
class NodeOutcome:
    """Where one node got to."""

    name: str
    stage: str = "check"  # check | ignition | push | boot | join | ready | done
    booted: str = ""  # what the BMC was sent, or what to do by hand
    registered: bool = False
    ready: bool = False
    gpu: str = ""  # verified, the problem found, or "" (not a GPU node, or --no-gpu)
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        """One object for --json."""
        return dict(vars(self))


@dataclass
class AddReport:
    """What `upi nodes add` did: per node, the files the push changed, CSRs left alone."""

    nodes: dict[str, NodeOutcome]
    changed: list[str] = field(default_factory=list)  # host:path of each file the push changed
    unchanged: int = 0
    left_pending: list[str] = field(default_factory=list)  # CSRs of names outside the command

    @property
    def ok(self) -> bool:
        """Every node Ready."""
        return all(n.stage == "done" for n in self.nodes.values())

    def as_json(self) -> dict[str, Any]:
        """The report for --json."""
        return {"nodes": [n.as_json() for n in self.nodes.values()], "changed": self.changed,
                "unchanged": self.unchanged, "left_pending": self.left_pending, "ok": self.ok}


def chosen_workers(inv: Inventory, names: Sequence[str], *, adding: bool = True) -> list[str]:
    """The named nodes, each a worker of the inventory (exit 2 otherwise, a master's naming its procedure)."""
    by_name = {n.name: n for n in inv.nodes}
    unknown = [shown_name(n) for n in dict.fromkeys(names) if n not in by_name]
    if unknown:
        hint = ("write the new worker into the inventory's nodes: first" if adding else
                "a node is removed while the inventory still names it, and taken out of nodes: after")
        raise UsageError(f"{', '.join(unknown)}: not a node of {inv.source}; {hint} (docs/day2.md)")
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        role = by_name[name].role
        if role is not Role.worker:
            raise UsageError(f"{name} is a {role.value} in {inv.source}: `upi nodes` adds and removes "
                             f"workers only; {CONTROL_PLANE}")
    return wanted


def add_nodes(req: AddRequest, say: Say, warn: Say) -> AddReport:
    """Run every step for the request's nodes; the report says where each got to."""
    from upi.csr.connect import connect, find_kubeconfig
    from upi.day2.cluster import cluster_installed, node_states
    from upi.gpu.kube import Kube
    from upi.inventory import load_inventory
    from upi.inventory.rules import bmc_files

    inv = load_inventory(req.inventory, check_files=False,
                         extra_rules=[lambda i: bmc_files(i, req.names or None)] if req.metal else [])
    names = chosen_workers(inv, req.names)
    report = AddReport({n: NodeOutcome(n) for n in names})
    conn = connect(find_kubeconfig(req.kubeconfig, req.assets))
    try:
        kube = Kube(conn)
        cluster_installed(kube)
        say("cluster: installed (ClusterVersion Available)")
        resumed = _not_yet_nodes(inv, req.out, names, node_states(kube), report)
        _publish_ignition(kube, inv, req, names, say)
        _render_and_push(inv, req, report, say)
        if req.dry_run:
            return report
        _boot(inv, req, [n for n in names if n not in resumed], report, say, warn)
        started = time.monotonic()
        _join(conn, kube, inv, req, report, say)
        if req.gpu:
            _gpu(kube, inv, req, report, say, warn, left=req.timeout - (time.monotonic() - started))
    finally:
        conn.close()
    return report


def _registered(inv: Inventory, name: str, states: dict[str, bool]) -> str | None:
    """The Node name `name` registered as (short name or FQDN), if any."""
    for candidate in (name, f"{name}.{inv.cluster.domain}"):
        if candidate in states:
            return candidate
    return None


def _not_yet_nodes(inv: Inventory, out: Path, names: list[str], states: dict[str, bool],
                   report: AddReport) -> set[str]:
    """The named nodes that are Nodes from an earlier run (resumed); a Node from elsewhere is an error."""
    from upi.installed import load_record
    from upi.ownignition import load_record as load_own
    from upi.ownignition import own_nodes

    record = load_record(out)
    mine = own_nodes(inv, load_own(out))  # recorded by an earlier run, never guessed from files
    resumed = set()
    for name in names:
        if _registered(inv, name, states) is None:
            continue
        if name not in mine:
            raise ClusterError(f"{name}: stage check: it is already a Node of the cluster, not one "
                               "`upi nodes add` joined: nothing to add (to replace a failed machine: "
                               "`upi nodes remove` it first, docs/day2.md)")
        resumed.add(name)
        report.nodes[name].registered = True
        report.nodes[name].booted = "already joined" if name in record else "joined, not yet flipped"
    return resumed


def _publish_ignition(kube: Any, inv: Inventory, req: AddRequest, names: list[str], say: Say) -> None:
    """The cluster's worker ignition, checked, as each node's own file in DIR/http/ (pushed next)."""
    from upi.day2.cluster import SECRET_NAME, SECRET_NS, worker_ignition
    from upi.facts.boot import own_ignition_path
    from upi.ownignition import with_nodes
    from upi.push.sources import HTTP_DIR
    from upi.render import SECRET, RenderedFile
    from upi.renderdir import transaction

    try:
        raw = worker_ignition(kube, inv.cluster.domain)
    except ClusterError as exc:
        raise ClusterError(f"{', '.join(names)}: stage ignition: {exc}") from None
    say(f"ignition: the worker pointer config from secret {SECRET_NS}/{SECRET_NAME} checked")
    if req.dry_run:
        return
    # 0600 here, as `upi ignition` keeps its files; push publishes ignition 0644 by design.
    files = [RenderedFile(f"{HTTP_DIR}/{own_ignition_path(name)}", raw, SECRET) for name in names]
    # The files and the record naming their nodes in one commit of DIR (upi.ownignition).
    with transaction(req.out) as txn:
        txn.commit(None, own=with_nodes(txn.records.own, names), published=files)


def _render_and_push(inv: Inventory, req: AddRequest, report: AddReport, say: Say) -> None:
    """Render DIR (the new nodes' entries appear) and push it; every other file stays as it is."""
    from upi.push import push
    from upi.renderdir import render

    for outcome in report.nodes.values():
        outcome.stage = "push"
    # The bootstrap stays as the last render had it (retired by upi wait), installed nodes stay local.
    result = render(req.inventory, req.out, dry_run=req.dry_run, retire_bootstrap=None)
    rendered = [c.path for c in result.changes if c.status != "unchanged"]
    if req.dry_run:
        say(f"render: would change {', '.join(rendered) or 'nothing'}")
        return
    pushed = push(inv, req.out)
    report.changed = [f"{f.host}:{f.dest} ({f.status})" for f in pushed.changed]
    report.unchanged = len(pushed.files) - len(pushed.changed)
    say(f"push: {len(report.changed)} file(s) changed, {report.unchanged} unchanged"
        + "".join(f"\n  {line}" for line in report.changed))


def _boot(inv: Inventory, req: AddRequest, names: list[str], report: AddReport, say: Say,
          warn: Say) -> None:
    """A one-time network boot for each node with a BMC; the others are said to need a hand."""
    from upi.bmc import boot_metal

    by_name = {n.name: n for n in inv.nodes}
    driven = [n for n in names if req.metal and by_name[n].bmc is not None
              and by_name[n].machine_kind is Machine.metal]
    for name in names:
        report.nodes[name].stage = "boot"
        if name not in driven:
            report.nodes[name].booted = "by hand"
            say(f"{name}: no BMC driven (--no-metal or no bmc section): power it on with a one-time "
                "UEFI network boot by hand")
    if not driven:
        return
    result = boot_metal(inv, driven, warn=warn)
    for name, done in result.booted.items():
        report.nodes[name].booted = done.reset
        say(f"{name}: one-time network boot set, {done.reset} sent (power {done.power})")
    if result.errors:
        for name, why in result.errors.items():
            report.nodes[name].error = why
        first = next(iter(result.errors))
        raise ClusterError(f"{first}: stage boot: {result.errors[first]}")


class _Reporter:
    """The GPU verification's reporter, on the command's progress lines."""

    def __init__(self, say: Say, warn: Say) -> None:
        self.note, self.warn = say, warn

    def stage(self, name: str, message: str) -> None:
        """Stages of the GPU flow: said like the others."""
        self.note(f"gpu: {name} {message}")


def _gpu(kube: Any, inv: Inventory, req: AddRequest, report: AddReport, say: Say, warn: Say, *,
         left: float) -> None:
    """The new GPU nodes verified (labels, allocatable, a validation pod each) with day 1's operators."""
    from upi.day2.gpu import verify_gpu_nodes
    from upi.gpu.steps import Clock

    gpu_nodes = [n.name for n in inv.nodes if n.gpu and n.name in report.nodes]
    if not gpu_nodes:
        return
    for name in gpu_nodes:
        report.nodes[name].stage = "gpu"
    clock = Clock(max(left, req.poll), poll=req.poll, settle=30 * req.poll)
    results = verify_gpu_nodes(kube, inv, gpu_nodes, clock, _Reporter(say, warn))
    for result in results:
        outcome = report.nodes[result.node]
        said = "; ".join(["verified"] + ([f"DCGM {result.diagnosis}"] if result.diagnosis else [])
                         + ([f"metrics {result.metrics}"] if result.metrics else []))
        outcome.gpu = said if result.ok else result.problem
        outcome.stage = "done" if result.ok else "gpu"
    bad = [r for r in results if not r.ok]
    if bad:
        raise ClusterError("; ".join(f"{r.node}: stage gpu: {r.problem}" for r in bad))


def _join(conn: Any, kube: Any, inv: Inventory, req: AddRequest, report: AddReport, say: Say) -> None:
    """Approve only these nodes' CSRs, flip each PXE file as its Node registers, until all are Ready."""
    from upi.csr.client import run_once
    from upi.day2.cluster import node_states
    from upi.facts.identity import node_identities
    from upi.installed import load_record
    from upi.localboot import flip_to_disk

    names = set(report.nodes)
    scoped = {k: v for k, v in node_identities(inv).items() if v.name in names}
    others: set[str] = set()
    deadline = time.monotonic() + req.timeout
    for outcome in report.nodes.values():
        outcome.stage = "join" if not outcome.registered else "ready"
    while True:
        for rec in run_once(conn, scoped):
            if rec.action in ("approved", "held"):
                say(f"csr {rec.action} {rec.csr}: {rec.reason}")
            elif rec.node not in names and rec.csr not in others:
                others.add(rec.csr)
                report.left_pending.append(rec.csr)
                say(f"csr {rec.csr} left pending: not one of {', '.join(sorted(names))} ({rec.reason})")
        states = node_states(kube)
        record = load_record(req.out)
        joined = [n for n in sorted(names) if _registered(inv, n, states) and n not in record]
        if joined:
            flipped = flip_to_disk(req.inventory, inv, req.out, joined, how="Node registered (upi nodes add)")
            say(f"{', '.join(joined)} joined: PXE file boots its disk from now on "
                f"({'; '.join(flipped.pushed) or 'nothing to push'})")
        for name, outcome in report.nodes.items():
            node = _registered(inv, name, states)
            outcome.registered = node is not None
            outcome.ready = node is not None and states[node]
            outcome.stage = "done" if outcome.ready else ("ready" if node else "join")
        if report.ok:
            say(f"{', '.join(sorted(names))}: Ready")
            return
        if time.monotonic() >= deadline:
            late = [o for o in report.nodes.values() if o.stage != "done"]
            raise ClusterError("; ".join(
                f"{o.name}: stage {o.stage}: " + ("its Node is not Ready" if o.registered
                                                  else "no Node registered")
                + f" within {req.timeout:g} s" for o in late))
        time.sleep(req.poll)
