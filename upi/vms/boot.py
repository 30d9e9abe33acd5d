"""boot-vms end to end: plan every VM, change nothing on a conflict, create, start, shepherd.

Each hypervisor gets its own thread (and connection), so VMs on different
hosts are handled concurrently; within one host they go in inventory order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from upi.errors import MissingExtra, UsageError, VmError
from upi.facts import VmSpec
from upi.inventory import Inventory
from upi.vms import libvirt_ops as ops
from upi.vms.plan import Action, VmPlan, targets
from upi.vms.status import Report, VmEvent, ignore
from upi.vms.watch import ensure_event_loop, watch_hypervisor

T = TypeVar("T")
DEFAULT_TIMEOUT = 3600.0
DEFAULT_POLL = 5.0


@dataclass
class BootResult:
    """What boot-vms found and did: a plan per VM, and (with --watch) who never came back."""

    plans: list[VmPlan]
    not_back: list[str] = field(default_factory=list)

    def as_json(self) -> list[dict[str, Any]]:
        """One object per VM for --json."""
        return [{"name": p.spec.name, "hypervisor": p.spec.uri, "action": p.action.value,
                 "plan": p.summary} for p in self.plans]


@dataclass(frozen=True)
class DestroyResult:
    """What destroy_vm removed."""

    name: str
    uri: str
    domain_removed: bool
    disk_removed: bool
    disk_path: str


def by_hypervisor(specs: list[VmSpec]) -> dict[str, list[VmSpec]]:
    """Specs grouped by URI, inventory order kept within each group."""
    groups: dict[str, list[VmSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.uri, []).append(spec)
    return groups


def per_hypervisor(groups: dict[str, list[VmSpec]], job: Callable[[str, list[VmSpec]], T],
                   on_abort: Callable[[], None] | None = None) -> dict[str, T]:
    """Run `job(uri, specs)` for every hypervisor at once; every failure is reported, not just the first.

    `on_abort` runs when the caller is interrupted (Ctrl-C), before waiting for the jobs to end.
    """
    libvirt = ops.libvirt_module()
    pool = ThreadPoolExecutor(max_workers=max(1, len(groups)))
    try:
        futures = {uri: pool.submit(job, uri, specs) for uri, specs in groups.items()}
        wait(futures.values())
    except BaseException:
        if on_abort:
            on_abort()
        raise
    finally:
        pool.shutdown(wait=True)
    results: dict[str, T] = {}
    errors: list[str] = []
    for uri, future in futures.items():
        exc = future.exception()
        if exc is None:
            results[uri] = future.result()
        elif isinstance(exc, libvirt.libvirtError):
            errors.append(str(ops.failed(uri, "libvirt", exc)))
        elif isinstance(exc, VmError):
            errors.append(str(exc))
        else:
            raise exc
    if errors:
        raise VmError("\n".join(errors))
    return results


def boot_vms(inv: Inventory, *, connect: str | None = None, replace: bool = False,
             watch: bool = False, dry_run: bool = False, timeout: float = DEFAULT_TIMEOUT,
             poll: float = DEFAULT_POLL, report: Report = ignore,
             connections: ops.Connections | None = None) -> BootResult:
    """Define and start every `machine: vm` node; with `watch`, shepherd them to their disks.

    Nothing changes when any VM conflicts (raises VmError listing every
    problem). With `dry_run` only the plans are returned. `connections` lets
    a caller share (and own) the libvirt connections; otherwise they are
    opened here and closed on return.
    """
    specs = targets(inv, connect)
    groups = by_hypervisor(specs)
    if watch and not dry_run:
        ensure_event_loop()  # before any connection opens, or it delivers no events
    conns = connections or ops.Connections()
    try:
        plans = _plan(conns, groups, replace, dry_run=dry_run)
        problems = [f"{p.spec.name} on {p.spec.uri}: {m}" for p in plans for m in p.problems]
        if problems:
            raise VmError("nothing changed:\n  " + "\n  ".join(problems))
        if dry_run:
            return BootResult(plans)
        _apply(conns, groups, plans, report)
        result = BootResult(plans)
        if watch:
            result.not_back = watch_vms_on(conns, groups, timeout=timeout, poll=poll, report=report)
        return result
    finally:
        if connections is None:
            conns.close()


def _plan(conns: ops.Connections, groups: dict[str, list[VmSpec]], replace: bool, *,
          dry_run: bool = False) -> list[VmPlan]:
    def job(uri: str, specs: list[VmSpec]) -> list[VmPlan]:
        try:
            conn = conns.get(uri)
        except (VmError, MissingExtra) as exc:
            if not dry_run:
                raise
            # A preview still shows the XML and the plan: say what was not checked.
            return [VmPlan(s, Action.create, unchecked=str(exc)) for s in specs]
        return [ops.inspect(conn, s, replace=replace) for s in specs]

    found = {p.spec.name: p for ps in per_hypervisor(groups, job).values() for p in ps}
    return [found[s.name] for ss in groups.values() for s in ss]


def _apply(conns: ops.Connections, groups: dict[str, list[VmSpec]], plans: list[VmPlan],
           report: Report) -> None:
    libvirt = ops.libvirt_module()
    plan_of = {p.spec.name: p for p in plans}

    def job(uri: str, specs: list[VmSpec]) -> None:
        conn = conns.get(uri)
        for spec in specs:
            plan = plan_of[spec.name]
            if plan.action is Action.keep:
                report(VmEvent(spec.name, uri, "exists", plan.summary))
                continue
            try:
                ops.apply(conn, plan, _reporter(report, spec))
            except libvirt.libvirtError as exc:
                raise ops.failed(uri, spec.name, exc) from None

    per_hypervisor(groups, job)


def _reporter(report: Report, spec: VmSpec) -> Callable[[str, str], None]:
    def tell(state: str, detail: str) -> None:
        report(VmEvent(spec.name, spec.uri, state, detail))

    return tell


def watch_vms_on(conns: ops.Connections, groups: dict[str, list[VmSpec]], *, timeout: float,
                 poll: float = DEFAULT_POLL, report: Report = ignore,
                 stop: threading.Event | None = None) -> list[str]:
    """Shepherd every VM until it runs from its disk, `timeout` passes or `stop` is set.

    Returns the names not back yet.
    """
    deadline = time.monotonic() + timeout
    stop = stop or threading.Event()

    def job(uri: str, specs: list[VmSpec]) -> list[str]:
        return watch_hypervisor(conns.get(uri), specs, deadline=deadline, poll=poll,
                                report=report, stop=stop)

    # Ctrl-C: every watcher ends at its next look instead of at the deadline.
    left = per_hypervisor(groups, job, on_abort=stop.set)
    return sorted(name for names in left.values() for name in names)


def watch_vms(inv: Inventory, *, connect: str | None = None, timeout: float = DEFAULT_TIMEOUT,
              poll: float = DEFAULT_POLL, report: Report = ignore,
              stop: threading.Event | None = None,
              connections: ops.Connections | None = None) -> list[str]:
    """Shepherd the inventory's (already defined) VMs to their disks; the names not back in time.

    `stop` ends the watch early (`upi wait` runs it in a thread); `connections`
    shares the caller's libvirt connections (then left open for the caller).
    """
    ensure_event_loop()
    groups = by_hypervisor(targets(inv, connect))
    if connections is not None:
        return watch_vms_on(connections, groups, timeout=timeout, poll=poll, report=report, stop=stop)
    with ops.Connections() as conns:
        return watch_vms_on(conns, groups, timeout=timeout, poll=poll, report=report, stop=stop)


def destroy_vm(inv: Inventory, name: str, *, connect: str | None = None, dry_run: bool = False,
               report: Report = ignore, connections: ops.Connections | None = None) -> DestroyResult:
    """Stop and undefine the VM node `name` and delete its disk (`upi wait` retires the bootstrap).

    Refuses (VmError) when the domain of that name has another MAC: it is not
    the inventory's VM. Removing what is already gone is not an error.
    """
    spec = next((s for s in targets(inv, connect) if s.name == name), None)
    if spec is None:
        vms = ", ".join(s.name for s in targets(inv)) or "none"
        raise UsageError(f"{name} is not a VM node of {inv.source} (VM nodes: {vms})")
    libvirt = ops.libvirt_module()
    conns = connections or ops.Connections()
    try:
        conn = conns.get(spec.uri)
        dom = ops.lookup(conn, name)
        if dom is not None and spec.mac.lower() not in ops.facts_of(dom).macs:
            raise VmError(f"{spec.uri}: domain {name} does not have the inventory's MAC {spec.mac}: "
                          "not destroying a VM the inventory does not describe")
        disk = ops.disk_facts(conn, spec.disk_path).exists
        if not dry_run:
            if dom is not None:
                ops.remove_domain(dom)
            if disk:
                ops.remove_disk(conn, spec.disk_path)
        report(_destroy_event(spec, dom is not None, disk, dry_run))
        return DestroyResult(name, spec.uri, dom is not None, disk, spec.disk_path)
    except libvirt.libvirtError as exc:
        raise ops.failed(spec.uri, f"destroy {name}", exc) from None
    finally:
        if connections is None:
            conns.close()


def _destroy_event(spec: VmSpec, domain: bool, disk: bool, dry_run: bool) -> VmEvent:
    what = [w for w, yes in (("domain", domain), (f"disk {spec.disk_path}", disk)) if yes]
    if not what:
        return VmEvent(spec.name, spec.uri, "absent", "nothing to remove")
    if dry_run:
        return VmEvent(spec.name, spec.uri, "would destroy", "would remove " + " and ".join(what))
    return VmEvent(spec.name, spec.uri, "destroyed", "removed " + " and ".join(what))
