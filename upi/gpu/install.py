"""Install NFD and the GPU Operator through OLM, then their instances (gpu-day2.md §1-2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from upi.gpu.kube import Kube, describe
from upi.gpu.mig import mig_labels
from upi.gpu.objects import (
    CLUSTER_POLICY,
    NFD_INSTANCE,
    NFD_NAMESPACE,
    Obj,
    Package,
    cluster_policy,
    namespace,
    nfd_instance,
    operator_group,
    subscription,
)
from upi.gpu.pods import driver_diagnosis
from upi.gpu.pool import for_pool
from upi.gpu.steps import Change, Clock, Diagnosis, GpuFailed, Reporter
from upi.inventory.model import Inventory

OLM = "operators.coreos.com/v1alpha1"
PACKAGES = "packages.operators.coreos.com/v1"


def resolve_channel(kube: Kube, pkg: Package, catalog_ns: str) -> tuple[str, str]:
    """(channel, that channel's current CSV) from the PackageManifest; the default channel if unpinned."""
    pm = kube.get(PACKAGES, "PackageManifest", pkg.name, catalog_ns)
    what = describe(PACKAGES, "PackageManifest", pkg.name, catalog_ns)
    if pm is None:
        raise GpuFailed(Diagnosis("resolve channel", what, "the package is in no catalog"))
    st = pm.get("status") or {}
    channel = pkg.channel or st.get("defaultChannel")
    entry = next((c for c in st.get("channels") or [] if c.get("name") == channel), None)
    if entry is None:
        known = ", ".join(c.get("name", "?") for c in st.get("channels") or [])
        key = "network_operator.channel" if pkg.name == "nvidia-network-operator" else (
            "gpu.operator_channel (or gpu.nfd_channel)")
        raise GpuFailed(Diagnosis("resolve channel", what, f"no channel {channel!r} (channels: {known})",
                                  fix=f"set {key} to one of those"))
    return str(channel), str(entry["currentCSV"])


@dataclass(frozen=True)
class Choice:
    """What to subscribe to: the channel, the CSV to wait for, the Subscription's startingCSV."""

    channel: str
    csv: str
    starting: str | None


def choose(kube: Kube, pkg: Package, catalog_ns: str) -> Choice:
    """The channel and CSV of a package: kept from an installed Subscription, else from the catalog.

    Once installed, a later run keeps the Subscription's channel and startingCSV
    and waits for its installed CSV, even after the catalog has moved on: an
    upgrade of a Manual subscription is the admin's decision, and a re-run
    must change nothing. Pinning another channel in the inventory re-resolves.
    """
    sub = kube.get(OLM, "Subscription", pkg.name, pkg.namespace) or {}
    spec, st = sub.get("spec") or {}, sub.get("status") or {}
    installed, channel = st.get("installedCSV"), spec.get("channel")
    if installed and channel and pkg.channel in (None, channel):
        return Choice(str(channel), str(installed), spec.get("startingCSV"))
    channel, csv = resolve_channel(kube, pkg, catalog_ns)
    # A Manual subscription names its starting CSV, so the one InstallPlan to approve is known.
    return Choice(channel, csv, csv if pkg.approval == "Manual" else None)


def operator_objects(pkg: Package, choice: Choice, catalog_ns: str) -> list[Obj]:
    """Namespace, OperatorGroup and Subscription of one package, in apply order."""
    chosen = Package(pkg.name, pkg.namespace, pkg.group, pkg.source, choice.channel, pkg.approval)
    sub = subscription(chosen, catalog_ns, choice.starting)
    return [namespace(pkg.namespace), operator_group(chosen), sub]


def apply_all(kube: Kube, objs: list[Obj], changes: list[Change], reporter: Reporter) -> None:
    """Server-side apply each object and record what changed."""
    for obj in objs:
        result = kube.apply(obj)
        meta = obj["metadata"]
        what = describe(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        action = "created" if result.created else ("configured" if result.changed else "unchanged")
        changes.append(Change(what, action))
        reporter.note(f"{what}: {action}")


def install_operator(
    kube: Kube, pkg: Package, catalog_ns: str, clock: Clock, changes: list[Change], reporter: Reporter
) -> Obj:
    """Subscribe, approve only the chosen CSV's InstallPlan, wait for the CSV to succeed; the CSV."""
    choice = choose(kube, pkg, catalog_ns)
    csv_name = choice.csv
    reporter.note(f"{pkg.name}: channel {choice.channel}, CSV {csv_name}")
    apply_all(kube, operator_objects(pkg, choice, catalog_ns), changes, reporter)
    csv = kube.get(OLM, "ClusterServiceVersion", csv_name, pkg.namespace)
    if csv is not None and (csv.get("status") or {}).get("phase") == "Succeeded":
        return csv
    sub_what = describe(OLM, "Subscription", pkg.name, pkg.namespace)
    plan_name = clock.wait_for(lambda: _plan_ref(kube, pkg), lambda: _sub_diagnosis(kube, pkg, sub_what))
    plan = kube.get(OLM, "InstallPlan", plan_name, pkg.namespace) or {}
    _approve(kube, plan, csv_name, pkg, changes, reporter)
    csv_what = describe(OLM, "ClusterServiceVersion", csv_name, pkg.namespace)

    def succeeded() -> Obj | None:
        found = kube.get(OLM, "ClusterServiceVersion", csv_name, pkg.namespace)
        return found if found and (found.get("status") or {}).get("phase") == "Succeeded" else None

    def stuck() -> Diagnosis:
        found = kube.get(OLM, "ClusterServiceVersion", csv_name, pkg.namespace) or {}
        st = found.get("status") or {}
        seen = f"phase {st.get('phase', 'absent')}" + (
            f" ({st.get('reason')}: {st.get('message')})" if st.get("reason") else ""
        )
        return Diagnosis(
            "wait for CSV",
            csv_what,
            f"never reached Succeeded; {seen}",
            "the operator's deployment is not becoming ready: oc get pods -n " + pkg.namespace,
        )

    csv = clock.wait_for(succeeded, stuck)
    reporter.note(f"{csv_what}: Succeeded")
    return csv


def _plan_ref(kube: Kube, pkg: Package) -> str | None:
    sub = kube.get(OLM, "Subscription", pkg.name, pkg.namespace) or {}
    ref = (sub.get("status") or {}).get("installPlanRef") or {}
    return ref.get("name") or None


def _sub_diagnosis(kube: Kube, pkg: Package, what: str) -> Diagnosis:
    sub = kube.get(OLM, "Subscription", pkg.name, pkg.namespace) or {}
    conds = [
        f"{c.get('type')}: {c.get('message')}"
        for c in (sub.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    ]
    return Diagnosis(
        "subscribe",
        what,
        "OLM made no InstallPlan" + (f" ({'; '.join(conds)})" if conds else ""),
        fix=f"check the catalog source and that {pkg.namespace} has exactly one OperatorGroup",
    )


def _approve(
    kube: Kube, plan: Obj, csv_name: str, pkg: Package, changes: list[Change], reporter: Reporter
) -> None:
    spec = plan.get("spec") or {}
    name = plan.get("metadata", {}).get("name", "?")
    what = describe(OLM, "InstallPlan", name, pkg.namespace)
    if spec.get("approved"):
        return
    names = list(spec.get("clusterServiceVersionNames") or [])
    if names != [csv_name]:
        raise GpuFailed(
            Diagnosis(
                "approve InstallPlan",
                what,
                f"it would install {', '.join(names) or 'nothing'}, not {csv_name}; "
                "upi approves only the chosen CSV",
                fix=f"approve or delete it by hand (oc get installplan -n {pkg.namespace} {name})",
            )
        )
    kube.merge_patch(OLM, "InstallPlan", name, pkg.namespace, {"spec": {"approved": True}})
    changes.append(Change(what, "approved"))
    reporter.note(f"{what}: approved ({csv_name})")


def example_of(csv: Obj, kind: str) -> Obj:
    """The object of `kind` in a CSV's alm-examples annotation (it holds several kinds)."""
    what = describe(OLM, "ClusterServiceVersion", csv["metadata"]["name"], csv["metadata"].get("namespace"))
    raw = (csv["metadata"].get("annotations") or {}).get("alm-examples") or "[]"
    try:
        examples: list[Any] = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise GpuFailed(Diagnosis("read alm-examples", what, f"the annotation is not JSON ({exc})")) from None
    found = next((e for e in examples if isinstance(e, dict) and e.get("kind") == kind), None)
    if found is None:
        raise GpuFailed(Diagnosis("read alm-examples", what, f"no {kind} among its alm-examples"))
    return found


def instances(inv: Inventory, nfd_csv: Obj, gpu_csv: Obj) -> list[Obj]:
    """The NodeFeatureDiscovery and the ClusterPolicy, each from its CSV's example; MIG node labels."""
    return [
        nfd_instance(inv, example_of(nfd_csv, "NodeFeatureDiscovery")),
        for_pool(inv, cluster_policy(inv, example_of(gpu_csv, "ClusterPolicy"))),
        *mig_labels(inv),
    ]


def wait_policy_ready(kube: Kube, operator_ns: str, clock: Clock) -> None:
    """Wait for ClusterPolicy state ready; on timeout, diagnose from the driver pods' logs."""
    what = describe("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY)

    def ready() -> bool | None:
        policy = kube.get("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY) or {}
        return True if (policy.get("status") or {}).get("state") == "ready" else None

    def stuck() -> Diagnosis:
        policy = kube.get("nvidia.com/v1", "ClusterPolicy", CLUSTER_POLICY) or {}
        state = (policy.get("status") or {}).get("state", "no state")
        found = driver_diagnosis(kube, operator_ns, "wait for ClusterPolicy ready", f"{what} is {state}")
        if found is not None:
            return found
        return Diagnosis(
            "wait for ClusterPolicy ready",
            what,
            f"state is {state}",
            fix=f"oc get pods -n {operator_ns}: look for pods not Running",
        )

    clock.wait_for(ready, stuck)


__all__ = ["NFD_INSTANCE", "NFD_NAMESPACE", "apply_all", "install_operator", "instances", "wait_policy_ready"]
