"""`upi gpu`'s other paths against the fake GPU cluster: every pre-flight check failing with its
fix, the default channel read from the cluster, only the chosen CSV's InstallPlan approved, the
driver pods' logs deciding the diagnosis, and --dry-run on an installed cluster.

Each run asserts that the fake rejected nothing against the real CRD schemas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_gpu import DRIVER_LOAD_FAIL, MARKETPLACE, OLM, REGISTRY_STALL, RHCOS, FakeGpuCluster, SimNode
from gpu_support import clean_cluster, gpu_args, gpu_inventory, gpu_once, sim_nodes, start_cluster

from upi.cli import app

PACKAGES = "packages.operators.coreos.com/v1"
WRITES = ("PATCH", "POST", "PUT", "DELETE")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def _writes(cluster: FakeGpuCluster) -> list[tuple[str, str, str]]:
    return [r for r in cluster.api.requests if r[0] in WRITES]


def _catalog_not_ready(c: FakeGpuCluster) -> None:
    c.api.set_status(OLM, "CatalogSource", "certified-operators", MARKETPLACE,
                     {"connectionState": {"lastObservedState": "TRANSIENT_FAILURE"}})


def _catalog_missing(c: FakeGpuCluster) -> None:
    c.api.delete(OLM, "CatalogSource", "redhat-operators", MARKETPLACE)


def _no_driver_toolkit(c: FakeGpuCluster) -> None:
    c.api.delete("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift")


def _registry_removed(c: FakeGpuCluster) -> None:
    cfg = c.api.get("imageregistry.operator.openshift.io/v1", "Config", "cluster")
    assert cfg is not None
    cfg["spec"]["managementState"] = "Removed"
    c.api.put(cfg)


def _package_missing(c: FakeGpuCluster) -> None:
    c.api.delete(PACKAGES, "PackageManifest", "gpu-operator-certified", MARKETPLACE)


def _broken_release(c: FakeGpuCluster) -> None:
    cv = c.api.get("config.openshift.io/v1", "ClusterVersion", "version")
    assert cv is not None
    cv["status"]["desired"]["version"] = "4.18.22"
    c.api.put(cv)


@pytest.mark.parametrize(("breaks", "check", "seen", "fix"), [
    (_catalog_not_ready, "catalog sources",
     "openshift-marketplace/certified-operators is TRANSIENT_FAILURE", "gpu.catalog_sources"),
    (_catalog_missing, "catalog sources", "openshift-marketplace/redhat-operators missing",
     "oc patch operatorhub cluster"),
    (_package_missing, "operator packages", "gpu-operator-certified not in any catalog",
     "oc get packagemanifests -n openshift-marketplace"),
    (_no_driver_toolkit, "driver-toolkit imagestream", "openshift/driver-toolkit is missing",
     "mirror the driver-toolkit image"),
    (_registry_removed, "image registry storage", "managementState Removed",
     "oc patch configs.imageregistry.operator.openshift.io cluster"),
    (_broken_release, "OpenShift version", "4.18.22: a crun change breaks every GPU Operator version",
     "oc adm upgrade"),
])
def test_each_failed_preflight_check_stops_before_any_change_with_its_fix(
        runner, tmp_path: Path, cluster: FakeGpuCluster, breaks: Callable[[FakeGpuCluster], None],
        check: str, seen: str, fix: str) -> None:
    breaks(cluster)
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--json"))
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    failed = [c for c in doc["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == [check]
    assert seen in failed[0]["detail"] and fix in failed[0]["fix"]
    assert "\n" not in failed[0]["fix"]  # a one-line fix
    assert (doc["diagnosis"]["step"], doc["diagnosis"]["object"]) == ("pre-flight", check)
    assert f"upi: warning: FAIL {check}: " in result.stderr and "== pre-flight: failed" in result.stderr
    assert _writes(cluster) == []


def test_registry_without_storage_is_fine_before_4_15(runner, tmp_path: Path) -> None:
    fake = FakeGpuCluster(tmp_path / "kube", sim_nodes(), version="4.14.30").start()
    try:
        fake.set_registry_storage(False)
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, "--json"))
    finally:
        fake.stop()
    assert result.exit_code == 0, result.output
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "image registry storage")
    assert check == {"name": "image registry storage", "ok": True,
                     "detail": "none; not needed on 4.14.30", "fix": ""}


@pytest.mark.parametrize(("nodes", "seen"), [
    ([*sim_nodes()[:4], SimNode("worker-1", 8, ready=False)], "worker-1 not Ready"),
    (sim_nodes()[:4], "worker-1 missing"),
])
def test_a_gpu_node_missing_or_not_ready_fails_preflight(runner, tmp_path: Path, nodes: list[SimNode],
                                                          seen: str) -> None:
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path))
    assert result.exit_code == 1
    assert f"GPU step 'pre-flight' failed at GPU nodes Ready: {seen}" in result.stderr
    assert "fix: join and approve the node first: upi approve-csr INVENTORY --once" in result.stderr
    assert _writes(fake) == []


def test_the_operator_channel_defaults_to_the_packages_default_on_the_cluster(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    pm = cluster.api.get(PACKAGES, "PackageManifest", "gpu-operator-certified", MARKETPLACE)
    assert pm is not None
    pm["status"]["defaultChannel"] = "v26.7"  # not the first channel listed
    cluster.api.put(pm)
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 0, result.output
    sub = cluster.api.get(OLM, "Subscription", "gpu-operator-certified", "nvidia-gpu-operator")
    assert sub is not None
    assert (sub["spec"]["channel"], sub["spec"]["startingCSV"]) == ("v26.7", "gpu-operator-certified.v26.7.0")
    assert sub["spec"]["installPlanApproval"] == "Manual"


def _stray_plan(cluster: FakeGpuCluster, name: str, csv: str) -> None:
    cluster.api.put({
        "apiVersion": OLM, "kind": "InstallPlan",
        "metadata": {"name": name, "namespace": "nvidia-gpu-operator"},
        "spec": {"approval": "Manual", "approved": False, "clusterServiceVersionNames": [csv]},
        "status": {"phase": "RequiresApproval", "catalogSources": ["certified-operators"], "plan": []},
    })


def test_only_the_chosen_csvs_install_plan_is_approved(runner, tmp_path: Path,
                                                       cluster: FakeGpuCluster) -> None:
    cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nvidia-gpu-operator"}})
    _stray_plan(cluster, "install-stray", "gpu-operator-certified.v26.7.0")
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 0, result.output
    stray = cluster.api.get(OLM, "InstallPlan", "install-stray", "nvidia-gpu-operator")
    assert stray is not None and stray["spec"]["approved"] is False
    assert "install-stray" not in cluster.approved_plans and len(cluster.approved_plans) == 2
    approvals = [r for r in cluster.api.requests if r[0] == "PATCH" and "/installplans/" in r[1]]
    assert len(approvals) == 1 and "install-stray" not in approvals[0][1]


def test_a_pending_plan_for_another_csv_is_refused_not_approved(runner, tmp_path: Path,
                                                                cluster: FakeGpuCluster) -> None:
    # An existing Subscription whose pending InstallPlan would install another CSV (an upgrade).
    ns = "nvidia-gpu-operator"
    cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.api.put({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                     "metadata": {"name": "nvidia-gpu-operator-group", "namespace": ns},
                     "spec": {"targetNamespaces": [ns]}})
    _stray_plan(cluster, "install-upgrade", "gpu-operator-certified.v26.7.0")
    cluster.api.put({
        "apiVersion": OLM, "kind": "Subscription",
        "metadata": {"name": "gpu-operator-certified", "namespace": ns},
        "spec": {"channel": "v26.3", "name": "gpu-operator-certified", "source": "certified-operators",
                 "sourceNamespace": MARKETPLACE, "installPlanApproval": "Manual"},
        "status": {"installPlanRef": {"apiVersion": OLM, "kind": "InstallPlan", "name": "install-upgrade",
                                      "namespace": ns}, "lastUpdated": "2026-01-01T00:00:00Z"},
    })
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 1, result.output
    assert ("GPU step 'approve InstallPlan' failed at InstallPlan nvidia-gpu-operator/install-upgrade: "
            "it would install gpu-operator-certified.v26.7.0, not gpu-operator-certified.v26.3.1"
            ) in result.stderr
    assert "== GPU operator: failed" in result.stdout
    plan = cluster.api.get(OLM, "InstallPlan", "install-upgrade", ns)
    assert plan is not None and plan["spec"]["approved"] is False


BUILD_FAIL = ("nvidia/nv.c:42:10: fatal error: linux/foo.h: No such file or directory\n"
              "make[2]: *** [scripts/Makefile.build:243: nvidia/nv.o] Error 1\n")
LOAD_FAIL = "modprobe: ERROR: could not insert 'nvidia': No such device\n"
DTK = "openshift-driver-toolkit-ctr"


@pytest.mark.parametrize(("sim", "container", "cause", "last"), [
    # With the Driver Toolkit (the default) the build runs in its container, the load in the driver's.
    (SimNode("worker-1", 8, build_error=BUILD_FAIL), DTK, "the driver failed to build against this kernel",
     BUILD_FAIL),
    (SimNode("worker-1", 8, load_error=LOAD_FAIL), "nvidia-driver-ctr",
     "the driver was built but failed to load", LOAD_FAIL),
    (SimNode("worker-1", 8, secure_boot=True), "nvidia-driver-ctr", "Secure Boot is on", DRIVER_LOAD_FAIL),
    (SimNode("worker-1", 8, build_error=BUILD_FAIL, rhcos="417.94.202409120000-0"), "nvidia-driver-ctr",
     "the driver failed to build against this kernel", BUILD_FAIL),  # no DTK tag: one container does both
])
def test_the_driver_pods_log_decides_the_diagnosis(runner, tmp_path: Path, sim: SimNode, container: str,
                                                   cause: str, last: str) -> None:
    nodes = sim_nodes()
    nodes[4] = sim
    fake = FakeGpuCluster(tmp_path / "kube", nodes).start()
    if sim.rhcos != RHCOS:  # the release ships no Driver Toolkit tag for this node's build
        stream = fake.api.get("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift")
        assert stream is not None
        stream["spec"]["tags"] = [t for t in stream["spec"]["tags"] if t["name"] != sim.rhcos]
        fake.api.put(stream)
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, "--json", timeout="0.05"))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    diagnosis = json.loads(result.stdout)["diagnosis"]
    assert diagnosis["step"] == "wait for ClusterPolicy ready"
    pod = r"Pod nvidia-gpu-operator/nvidia-driver-daemonset-[-.0-9]*[a-f0-9]{5}"
    assert re.fullmatch(rf"{pod} \({container}\) on worker-1", diagnosis["object"]), diagnosis["object"]
    assert diagnosis["cause"].startswith(cause)
    assert diagnosis["log"][-len(last.splitlines()):] == last.splitlines()
    assert fake.api.schema_violations == [] and fake.api.controller_errors == []


def test_a_cluster_without_registry_storage_stalls_the_driver_toolkit_build(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    fake.registry_storage = False  # storage went away after the pre-flight checks passed
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, "--json", timeout="0.05"))
    finally:
        fake.stop()
    diagnosis = json.loads(result.stdout)["diagnosis"]
    assert diagnosis["object"].endswith(f"({DTK}) on worker-0")
    assert diagnosis["cause"].startswith("the image registry has no storage")
    assert diagnosis["log"] == REGISTRY_STALL.splitlines()


def test_dry_run_on_an_installed_cluster_shows_the_operands_and_writes_nothing(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    # rdma.enabled passed through needs a NIC driver: the host's here (the GPU driver pods wait for one).
    policy = "{driver.rdma: {enabled: true, useHostMofed: true}}"
    inv = gpu_inventory(tmp_path, f"gpu:\n  cluster_policy: {policy}\n")
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    before = len(_writes(cluster))
    result = runner.invoke(app, gpu_args(inv, cluster, "--dry-run", "--json"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["dry_run"] is True and doc["changes"] == [] and doc["nodes"] == []
    kinds = [text.split("kind: ", 1)[1].split("\n", 1)[0] for text in doc["planned"]]
    # The pool first (node labels, MachineConfigPool, KubeletConfig, node taints), then the operators.
    assert kinds == ["Node"] * 2 + ["MachineConfigPool", "KubeletConfig"] + ["Node"] * 2 + [
        "Namespace", "OperatorGroup", "Subscription"] * 2 + ["NodeFeatureDiscovery", "ClusterPolicy"]
    assert "rdma:\n      enabled: true" in doc["planned"][-1]
    assert len(_writes(cluster)) == before


@pytest.mark.parametrize(("package", "kind"), [("gpu-operator-certified", "ClusterPolicy"),
                                               ("nfd", "NodeFeatureDiscovery")])
def test_the_operand_is_picked_from_alm_examples_by_kind_not_position(package: str, kind: str) -> None:
    from kube_schema import csv

    from upi.gpu.install import example_of

    doc = csv(package)
    notes = doc["metadata"]["annotations"]
    examples = json.loads(notes["alm-examples"])
    assert kind in [e["kind"] for e in examples]
    # Put every other kind first: a reader taking the first example would pick the wrong one.
    others = [e for e in examples if e["kind"] != kind]
    decoy = others or [{"apiVersion": "example.com/v1", "kind": "Decoy", "spec": {}}]
    notes["alm-examples"] = json.dumps(decoy + [e for e in examples if e["kind"] == kind])
    assert example_of(doc, kind) == next(e for e in examples if e["kind"] == kind)


def test_a_rerun_after_the_catalog_moved_on_keeps_the_installed_operator(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    # A newer CSV in the same channel, and a new default channel: upgrades are the admin's call.
    pm = cluster.api.get(PACKAGES, "PackageManifest", "gpu-operator-certified", MARKETPLACE)
    assert pm is not None
    pm["status"]["defaultChannel"] = "v26.7"
    pm["status"]["channels"][0]["currentCSV"] = "gpu-operator-certified.v26.3.2"
    cluster.api.put(pm)
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["changed"] is False, doc["changes"]
    assert "gpu-operator-certified: channel v26.3, CSV gpu-operator-certified.v26.3.1" in result.stderr
    sub = cluster.api.get(OLM, "Subscription", "gpu-operator-certified", "nvidia-gpu-operator")
    assert sub is not None
    assert (sub["spec"]["channel"], sub["spec"]["startingCSV"]) == ("v26.3", "gpu-operator-certified.v26.3.1")
    dry = runner.invoke(app, gpu_args(inv, cluster, "--dry-run"))
    assert dry.exit_code == 0 and "startingCSV: gpu-operator-certified.v26.3.1" in dry.stdout


def test_a_validation_pod_that_never_finishes_times_out_and_is_deleted(
        runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import upi.gpu.verify

    monkeypatch.setattr(upi.gpu.verify, "POD_LIMIT", 0.0)  # wait only the settle time (30 polls)
    nodes = sim_nodes()
    nodes[3] = SimNode("worker-0", 8, validation_hangs=True)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    rows = {n["node"]: n for n in doc["nodes"]}
    assert (rows["worker-0"]["validation"], rows["worker-1"]["validation"]) == ("timed out", "passed")
    assert rows["worker-0"]["problem"].startswith("validation pod upi-gpu-validate-worker-0-")
    image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubi8"
    assert rows["worker-0"]["problem"].endswith(f" did not finish: the image {image} cannot be pulled "
                                                f'(ImagePullBackOff: Back-off pulling image "{image}")')
    assert doc["diagnosis"]["object"] == "Node worker-0"
    assert not [p for p in fake.api.list("v1", "Pod") if p["metadata"]["name"].startswith("upi-gpu")]
    assert fake.api.schema_violations == []


def test_an_override_the_real_schema_refuses_is_refused_by_the_server_and_named(
        runner, tmp_path: Path) -> None:
    # A field the CRD lacks is refused at validate (tests/test_crd_overrides.py); a value outside an
    # enum is not, and the API server's refusal is what names it.
    inv = gpu_inventory(tmp_path, "gpu:\n  cluster_policy: {mig.strategy: sometimes}\n")
    fake, result = gpu_once(runner, tmp_path, None, inv)
    assert result.exit_code == 1, result.output
    assert "== operands: failed" in result.stdout
    assert ("GPU step 'operands' failed at the API server: apply ClusterPolicy gpu-cluster-policy: "
            'ClusterPolicy.nvidia.com "gpu-cluster-policy" is invalid: spec.mig.strategy: '
            "'sometimes' is not one of ['none', 'single', 'mixed']") in result.stderr
    assert len(fake.api.schema_violations) == 1  # the only write that broke the schema: the override's
    assert fake.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is None


def test_mirrored_catalogs_and_another_operator_namespace(runner, tmp_path: Path,
                                                          cluster: FakeGpuCluster) -> None:
    for source in ("mirror-redhat", "mirror-certified"):
        cluster.api.put({"apiVersion": OLM, "kind": "CatalogSource",
                         "metadata": {"name": source, "namespace": MARKETPLACE},
                         "spec": {"sourceType": "grpc"},
                         "status": {"connectionState": {"lastObservedState": "READY"}}})
    extra = ("gpu:\n  operator_namespace: gpu-ops\n"
             "  catalog_sources: {nfd: mirror-redhat, gpu_operator: mirror-certified}\n")
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, extra), cluster))
    assert result.exit_code == 0, result.output
    nfd = cluster.api.get(OLM, "Subscription", "nfd", "openshift-nfd")
    gpu = cluster.api.get(OLM, "Subscription", "gpu-operator-certified", "gpu-ops")
    assert nfd is not None and gpu is not None
    assert (nfd["spec"]["source"], gpu["spec"]["source"]) == ("mirror-redhat", "mirror-certified")
    ns = cluster.api.get("v1", "Namespace", "gpu-ops")
    assert ns is not None and ns["metadata"]["labels"] == {"openshift.io/cluster-monitoring": "true"}
    assert {p["metadata"]["namespace"] for p in cluster.validation_pods} == {"gpu-ops"}
    plans = cluster.api.list(OLM, "InstallPlan", "gpu-ops")
    assert [(p["spec"]["clusterServiceVersionNames"], p["spec"]["approved"]) for p in plans] == [
        (["gpu-operator-certified.v26.3.1"], True)]


def test_olm_making_no_install_plan_is_diagnosed_with_the_subscriptions_condition(
        runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    ns = "nvidia-gpu-operator"
    fake.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    fake.api.put({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                  "metadata": {"name": "someone-elses-group", "namespace": ns},
                  "spec": {"targetNamespaces": [ns]}})
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, "--json", timeout="0.05"))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    diagnosis = json.loads(result.stdout)["diagnosis"]
    assert (diagnosis["step"], diagnosis["object"]) == (
        "subscribe", "Subscription nvidia-gpu-operator/gpu-operator-certified")
    assert diagnosis["problem"] == ("OLM made no InstallPlan (ResolutionFailed: found 2 operatorgroups in "
                                    "namespace nvidia-gpu-operator; want exactly one)")
    assert "exactly one OperatorGroup" in diagnosis["fix"]
    assert len(fake.approved_plans) == 1  # NFD's (automatic); the GPU Operator never got a plan
    assert fake.api.schema_violations == []


def test_a_pinned_channel_the_package_lacks_names_the_channels_it_has(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path, "gpu:\n  operator_channel: v99.1\n")
    result = runner.invoke(app, gpu_args(inv, cluster))
    assert result.exit_code == 1, result.output
    assert ("GPU step 'resolve channel' failed at PackageManifest openshift-marketplace/"
            "gpu-operator-certified: no channel 'v99.1' (channels: v26.3, v26.7)") in result.stderr
    assert "fix: set gpu.operator_channel" in result.stderr
    assert cluster.api.get(OLM, "Subscription", "gpu-operator-certified", "nvidia-gpu-operator") is None


def test_a_cluster_policy_with_an_empty_spec_is_refused_by_the_real_schema() -> None:
    # The write-ups' trap (`spec: {}` never deploys) is caught by the fake before any operator acts.
    from kube_schema import schema_errors

    errors = schema_errors({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                            "metadata": {"name": "gpu-cluster-policy"}, "spec": {}})
    assert "spec: 'driver' is a required property" in errors
    assert "spec: 'operator' is a required property" in errors


def test_an_inventory_without_gpu_nodes_is_bad_input(runner, tmp_path: Path,
                                                     cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    inv.write_text(inv.read_text().replace("gpu: true, gpus: 8", "gpu: false"))
    result = runner.invoke(app, gpu_args(inv, cluster))
    assert result.exit_code == 2
    assert result.stderr == f"upi: error: {inv} marks no node gpu: true; upi gpu has nothing to set up\n"
    assert cluster.api.requests == []
