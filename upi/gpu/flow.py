"""`upi gpu` as a library flow: pre-flight, install, instances, ready, verify every GPU node.

`upi wait --gpu` calls `run_gpu` after install-complete; the CLI adapter only
connects, shows and exits. A hook runs before the first change (e.g. a
Secure Boot warning from the BMCs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from upi.errors import ClusterError, UsageError
from upi.gpu.dcgm import diagnose, verdict
from upi.gpu.install import (
    apply_all,
    choose,
    install_operator,
    instances,
    operator_objects,
    wait_policy_ready,
)
from upi.gpu.kube import Kube
from upi.gpu.mig import mig_nodes, relabel, wait_mig
from upi.gpu.objects import Obj, dump, packages
from upi.gpu.pool import plan_pool, setup_pool
from upi.gpu.preflight import Check, preflight
from upi.gpu.rdma import (
    apply_rdma_policy,
    install_network,
    peermem_stuck,
    plan_network,
    rdma_split,
    wait_peermem,
)
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter
from upi.gpu.verify import NodeResult, check_labels, record, run_validations
from upi.inventory.gpu import settings
from upi.inventory.model import Inventory
from upi.inventory.rdma import rdma_nodes

if TYPE_CHECKING:
    from upi.gpu.rdma_verify import RdmaReport

OLM = "operators.coreos.com/v1alpha1"
SCC_REFUSED = "unable to validate against any security context constraint"  # SCC admission's 403
STAGES = ("pre-flight", "GPU pool", "NFD operator", "GPU operator", "operands", "Network Operator",
          "ClusterPolicy ready", "verify nodes", "diagnose", "verify RDMA", "metrics")
# Called with the inventory and the reporter before anything is changed (i13: Secure Boot via Redfish).
BeforeInstall = Callable[[Inventory, Reporter], None]


@dataclass
class GpuReport:
    """What a run did and found: checks, changes, per-node results, the failure if any."""

    checks: list[Check] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    nodes: list[NodeResult] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    planned: list[str] = field(default_factory=list)  # --dry-run: the YAML it would apply
    dry_run: bool = False
    stage: str = ""  # the stage running now: the one a failure marks failed
    rdma: RdmaReport | None = None  # with rdma: nodes, the per-node and per-pair RDMA verification

    @property
    def ok(self) -> bool:
        """Every check passed, nothing failed and every GPU node verified."""
        if self.diagnosis is not None or not all(c.ok for c in self.checks):
            return False
        if self.rdma is not None and not self.rdma.ok:
            return False
        return self.dry_run or (bool(self.nodes) and all(n.ok for n in self.nodes))

    @property
    def changed(self) -> bool:
        """Whether the run changed anything on the cluster."""
        return any(c.action != "unchanged" for c in self.changes)

    def to_json(self) -> dict[str, object]:
        """The report for --json."""
        return {
            "ok": self.ok,
            "dry_run": self.dry_run,
            "changed": self.changed,
            "checks": [c.__dict__ for c in self.checks],
            "changes": [c.__dict__ for c in self.changes],
            "nodes": [n.to_json() for n in self.nodes],
            "rdma": self.rdma.to_json() if self.rdma is not None else None,
            "diagnosis": self.diagnosis.__dict__ | {"log": list(self.diagnosis.log)}
            if self.diagnosis
            else None,
        }


def run_gpu(
    inv: Inventory,
    kube: Kube,
    clock: Clock,
    reporter: Reporter,
    *,
    dry_run: bool = False,
    before_install: BeforeInstall | None = None,
    only: frozenset[str] = frozenset(),
) -> GpuReport:
    """The whole GPU day 2 for the inventory's `gpu: true` nodes; never raises GpuFailed.

    `only`: verify these GPU nodes alone (`upi gpu --node`); the default is every one.
    """
    report = GpuReport(dry_run=dry_run)
    tracked = _Tracking(reporter, report)
    try:
        _run(inv, kube, clock, tracked, report, before_install, only)
    except GpuFailed as exc:
        report.diagnosis = exc.diagnosis
    except ClusterError as exc:  # the API failed mid-run: name the stage it failed in
        report.diagnosis = Diagnosis(
            report.stage or "pre-flight", "the API server", str(exc),
            fix="check the cluster answers (oc get clusterversion), then run again: every step is idempotent",
        )
    if report.diagnosis is not None:
        reporter.stage(report.stage or STAGES[0], "failed")
    return report


class _Tracking:
    """Passes everything on to the reporter and remembers the stage that is running."""

    def __init__(self, reporter: Reporter, report: GpuReport) -> None:
        self.reporter, self.report = reporter, report

    def stage(self, name: str, message: str) -> None:
        self.report.stage = name if message == "started" else self.report.stage
        self.reporter.stage(name, message)

    def note(self, message: str) -> None:
        self.reporter.note(message)

    def warn(self, message: str) -> None:
        self.reporter.warn(message)


def _run(
    inv: Inventory,
    kube: Kube,
    clock: Clock,
    reporter: Reporter,
    report: GpuReport,
    before_install: BeforeInstall | None,
    only: frozenset[str] = frozenset(),
) -> None:
    if not any(n.gpu for n in inv.nodes):
        raise GpuFailed(Diagnosis("pre-flight", "inventory", "no node is marked gpu: true"))
    if inv.mirror is not None:  # disconnected: oc-mirror's resources, then the mirror holds every image
        from upi.mirror.day2 import prepare

        prepare(inv, kube, clock, reporter, dry_run=report.dry_run)
    reporter.stage("pre-flight", "started")
    report.checks = preflight(kube, inv)
    for check in report.checks:
        (reporter.note if check.ok else reporter.warn)(
            f"{'ok' if check.ok else 'FAIL'} {check.name}: {check.detail}"
            + (f" -> {check.fix}" if check.fix else "")
        )
    failed = [c for c in report.checks if not c.ok]
    if failed:
        first = failed[0]
        raise GpuFailed(Diagnosis("pre-flight", first.name, first.detail, fix=first.fix))
    reporter.stage("pre-flight", "done")
    if report.dry_run:
        report.planned = plan(inv, kube)
        return
    if before_install is not None:
        before_install(inv, reporter)
    reporter.stage("GPU pool", "started")
    setup_pool(kube, inv, clock, report.changes, reporter)
    reporter.stage("GPU pool", "done")
    gpu = settings(inv)
    nfd_pkg, gpu_pkg = packages(gpu)
    cat_ns = gpu.catalog_sources.namespace
    csvs = []
    for stage, pkg in (("NFD operator", nfd_pkg), ("GPU operator", gpu_pkg)):
        reporter.stage(stage, "started")
        csvs.append(install_operator(kube, pkg, cat_ns, clock, report.changes, reporter))
        reporter.stage(stage, "done")
    reporter.stage("operands", "started")
    relabel(kube, inv, report.changes, reporter)
    # With rdma: the ClusterPolicy (driver.rdma.enabled) waits for the NIC driver (upi.gpu.rdma).
    now, deferred = rdma_split(inv, instances(inv, csvs[0], csvs[1]))
    apply_all(kube, now, report.changes, reporter)
    reporter.stage("operands", "done")
    install_network(kube, inv, clock, report.changes, reporter)  # without rdma: nothing
    reporter.stage("ClusterPolicy ready", "started")
    apply_rdma_policy(kube, inv, deferred, report.changes, reporter)
    _policy_ready(kube, inv, gpu.operator_namespace, clock)
    wait_peermem(kube, inv, gpu.operator_namespace, clock)
    wait_mig(kube, inv, gpu.operator_namespace, clock, reporter)
    reporter.stage("ClusterPolicy ready", "done")
    reporter.stage("verify nodes", "started")
    report.nodes = list(check_labels(kube, inv, clock, only).values())
    ready = [r for r in report.nodes if not r.problem]  # the others failed on their labels already
    if ready:
        run_validations(kube, inv, ready, gpu.operator_namespace, clock, reporter)
    for result in report.nodes:
        record(kube, result)
        reporter.note(f"{result.node}: {'verified' if result.ok else result.problem}")
    bad = next((r for r in report.nodes if not r.ok), None)
    if bad is not None:
        raise GpuFailed(Diagnosis("verify nodes", f"Node {bad.node}", bad.problem, "", bad.log))
    reporter.stage("verify nodes", "done")
    reporter.stage("diagnose", "started")
    # DCGM's diagnostics do not run on GPUs in MIG mode: those nodes are skipped and say so.
    partitioned = {n.name for n in mig_nodes(inv)}
    diags = diagnose(kube, inv, [r.node for r in report.nodes if r.node not in partitioned],
                     gpu.operator_namespace, csvs[1], clock, reporter)
    for result in report.nodes:  # the table shows each node's verdict, a failed one too
        result.diagnosis = diags[result.node].summary() if result.node in diags else (
            "skipped (MIG)" if result.node in partitioned else "skipped")
    verdict(diags)
    reporter.stage("diagnose", "done")
    _verify_rdma(inv, kube, clock, reporter, report, only)
    _metrics(inv, kube, clock, reporter, report, partitioned, gpu.operator_namespace)
    reporter.note(
        "GPUs verified"
        + ("" if report.changed else "; no changes: the cluster already matched the inventory")
    )


def _policy_ready(kube: Kube, inv: Inventory, namespace: str, clock: Clock) -> None:
    """The ClusterPolicy ready; with rdma: a peermem that never loads (what keeps it notReady) is named."""
    try:
        wait_policy_ready(kube, namespace, clock)
    except GpuFailed as exc:
        raise GpuFailed(peermem_stuck(kube, inv, namespace) or exc.diagnosis) from None


def _verify_rdma(inv: Inventory, kube: Kube, clock: Clock, reporter: Reporter, report: GpuReport,
                 only: frozenset[str]) -> None:
    """With rdma: nodes, GPUDirect RDMA proven per node and per pair (upi.gpu.rdma_verify).

    The bandwidth test is a measurement: it runs on every `upi gpu`, its pods
    deleted afterwards; the account they run under is applied like every object.
    """
    if not rdma_nodes(inv):
        return  # the display marks the stage skipped
    from dataclasses import replace

    from upi.gpu.rdma import apply_test_account, verify_plan
    from upi.gpu.rdma_verify import verify_rdma

    reporter.stage("verify RDMA", "started")
    plan = verify_plan(inv)
    if only:  # --node: the named DGXs alone, paired among themselves
        plan = replace(plan, targets=tuple(t for t in plan.targets if t.node in only))
    apply_test_account(kube, inv, report.changes, reporter)
    try:
        report.rdma = verify_rdma(kube, plan, reporter, clock)
    except ClusterError as exc:
        if SCC_REFUSED not in str(exc):
            raise
        raise GpuFailed(Diagnosis(
            "verify RDMA", f"ServiceAccount {plan.namespace}/{plan.service_account}", str(exc),
            cause="OpenShift's SCC admission refused the bandwidth test pod: its account may not use an "
                  "SCC that allows IPC_LOCK and running as root",
            fix=f"oc get rolebinding -n {plan.namespace} -o wide: the account must be bound to the "
                f"ClusterRole system:openshift:scc:privileged (upi gpu applies that binding; "
                f"gpu/37-rdma-test-scc-rolebinding.yaml)")) from None
    if report.rdma.diagnosis is not None:
        raise GpuFailed(report.rdma.diagnosis)
    reporter.stage("verify RDMA", "done")


def _metrics(inv: Inventory, kube: Kube, clock: Clock, reporter: Reporter, report: GpuReport,
             partitioned: set[str], namespace: str) -> None:
    """With gpu_pool.metrics on: Prometheus has a utilisation series per GPU (upi.gpu.metrics)."""
    from upi.gpu.metrics import prove_series
    from upi.inventory.gpupool import pool_settings

    reporter.stage("metrics", "started")
    if not pool_settings(inv).metrics:
        reporter.note("gpu_pool.metrics is false: the GPU metrics are not checked")
        reporter.stage("metrics", "done")
        return
    gpus = {n.name: n.gpus for n in inv.nodes}
    found = prove_series(kube, {r.node: gpus.get(r.node) for r in report.nodes if r.node not in partitioned},
                         namespace, clock, report.changes, reporter)
    for result in report.nodes:
        result.metrics = found[result.node].summary() if result.node in found else "skipped (MIG)"
    reporter.stage("metrics", "done")


def plan(inv: Inventory, kube: Kube) -> list[str]:
    """--dry-run: the YAML of every object a run would apply, read-only against the cluster."""
    gpu = settings(inv)
    cat_ns = gpu.catalog_sources.namespace
    out: list[Obj] = plan_pool(inv)
    for pkg in packages(gpu):
        out += operator_objects(pkg, choose(kube, pkg, cat_ns), cat_ns)
    docs = [dump(o) for o in out]
    installed = [_installed_csv(kube, pkg.name, pkg.namespace) for pkg in packages(gpu)]
    if all(installed):
        docs += [dump(o) for o in instances(inv, installed[0] or {}, installed[1] or {})]
    else:
        docs.append(
            "# NodeFeatureDiscovery and ClusterPolicy: built from the operators' CSVs once installed\n"
        )
    if rdma_nodes(inv):  # the Network Operator's objects, then the bandwidth test's account and SCC binding
        from upi.gpu.rdma import test_account_objects

        docs += plan_network(inv, kube) + [dump(o) for o in test_account_objects(inv)]
    return docs


def _installed_csv(kube: Kube, package: str, ns: str) -> Obj | None:
    sub = kube.get(OLM, "Subscription", package, ns) or {}
    name = (sub.get("status") or {}).get("installedCSV")
    return kube.get(OLM, "ClusterServiceVersion", name, ns) if name else None


def check_pace(timeout_minutes: float, poll: float, flag: str = "--timeout") -> None:
    """Refuse a deadline or a polling pace that cannot work (exit 2)."""
    if timeout_minutes <= 0:
        raise UsageError(f"{flag} must be a positive number of minutes")
    if poll <= 0:
        raise UsageError("--poll must be a positive number of seconds")
