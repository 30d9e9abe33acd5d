"""What the real GPU Operator, OLM and API server do, not what an easier fake would (issue 24).

The fake follows upstream (tests/fake_driver.py, tests/fake_images.py, tests/kube_core.py):
with the Driver Toolkit the driver pods' `app` label is renamed per RHCOS build, the build
log is in openshift-driver-toolkit-ctr, an image that cannot be pulled leaves the container
waiting in ImagePullBackOff, an operator's CRDs exist only once its InstallPlan ran, an
unhealthy catalog gets no InstallPlan, a validation pod prints only what its command
prints, and Pods and Nodes are validated as the API server does. upi must cope with each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_driver import COMPONENT, DTK_LABEL
from fake_gpu import DRIVER_LOAD_FAIL, MARKETPLACE, OLM, RHCOS, FakeGpuCluster, SimNode
from gpu_support import clean_cluster, gpu_args, gpu_inventory, gpu_once, sim_nodes, start_cluster

from upi.cli import app
from upi.csr.connect import connect
from upi.errors import ClusterError
from upi.gpu.kube import Kube
from upi.gpu.verify import VERIFIED

NS = "nvidia-gpu-operator"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


@pytest.fixture
def kube(cluster: FakeGpuCluster) -> Iterator[Kube]:
    conn = connect(cluster.kubeconfig)
    yield Kube(conn)
    conn.close()


def _diagnosis(result) -> dict:
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)["diagnosis"]


def test_secure_boot_is_diagnosed_from_the_driver_toolkit_pods(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[3] = SimNode("worker-0", 8, secure_boot=True)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), "--json", timeout="0.05")
    # The operator renamed the DaemonSet and the pods' `app` label after the RHCOS build.
    (pod,) = [p for p in fake.api.list("v1", "Pod", NS) if p["spec"]["nodeName"] == "worker-0"]
    labels = pod["metadata"]["labels"]
    assert labels["app"] == f"nvidia-driver-daemonset-{RHCOS}" and labels[DTK_LABEL] == "true"
    assert labels[COMPONENT] == "nvidia-driver"
    assert [c["name"] for c in pod["spec"]["containers"]] == [
        "nvidia-driver-ctr", "openshift-driver-toolkit-ctr"]
    diagnosis = _diagnosis(result)
    assert diagnosis["object"] == f"Pod {NS}/{pod['metadata']['name']} (nvidia-driver-ctr) on worker-0"
    assert diagnosis["cause"].startswith("Secure Boot is on")
    assert diagnosis["log"][-1] == DRIVER_LOAD_FAIL.strip()
    assert fake.api.schema_violations == []


def test_a_driver_image_that_cannot_be_pulled_is_named(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, driver_image_pull=True)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), "--json", timeout="0.05")
    diagnosis = _diagnosis(result)
    (pod,) = [p for p in fake.api.list("v1", "Pod", NS) if p["spec"]["nodeName"] == "worker-1"]
    image = pod["spec"]["containers"][0]["image"]
    assert image.startswith("nvcr.io/nvidia/driver@sha256:")  # the CSV's related image `driver-image`
    assert diagnosis["object"] == f"Pod {NS}/{pod['metadata']['name']} (nvidia-driver-ctr) on worker-1"
    assert diagnosis["cause"] == (f"the image {image} cannot be pulled "
                                  f'(ImagePullBackOff: Back-off pulling image "{image}")')
    assert "pull secret" in diagnosis["fix"]


def _versions(cluster: FakeGpuCluster) -> dict[tuple[str, str, str], str]:
    return {(k.kind, ns, n): o["metadata"]["resourceVersion"] for (k, ns, n), o in cluster.api.objects.items()
            if k.kind != "Pod"}


def test_a_second_run_changes_nothing_not_even_the_nodes(runner, tmp_path: Path,
                                                        cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    first = "2026-01-01T00:00:00Z"  # as if that run was earlier: a re-run in the same second proves nothing
    for name in ("worker-0", "worker-1"):
        node = cluster.api.get("v1", "Node", name)
        node["metadata"]["annotations"][VERIFIED] = first
        cluster.api.put(node)
    before = _versions(cluster)
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["changed"] is False
    assert _versions(cluster) == before  # Nodes included: the verdict did not change
    assert cluster.api.get("v1", "Node", "worker-0")["metadata"]["annotations"][VERIFIED] == first


def test_a_changed_verdict_is_written(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    cluster.nodes["worker-1"].validation_fails = "CUDA error: system not yet initialized\n"
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 1
    assert cluster.api.get("v1", "Node", "worker-1")["metadata"]["annotations"][VERIFIED] == "failed"
    before = _versions(cluster)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 1
    assert _versions(cluster) == before  # failed again: nothing to write


def test_the_validation_pod_prints_what_its_command_prints(runner, tmp_path: Path,
                                                          cluster: FakeGpuCluster) -> None:
    # nvidia-smi -L in a CUDA base image lists the GPU; it never prints the sample's "Test PASSED".
    extra = "gpu:\n  validation: {image: 'nvcr.io/nvidia/cuda:12.5.0-base-ubi8', command: [nvidia-smi, -L]}\n"
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, extra), cluster, "--json"))
    assert result.exit_code == 1, result.output
    rows = {n["node"]: n for n in json.loads(result.stdout)["nodes"]}
    assert rows["worker-0"]["validation"] == "failed"
    assert rows["worker-0"]["problem"].endswith("Succeeded; its log lacks 'Test PASSED'")
    assert rows["worker-0"]["log"][0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_a_success_log_that_the_command_prints_passes(runner, tmp_path: Path,
                                                      cluster: FakeGpuCluster) -> None:
    extra = ("gpu:\n  validation: {image: 'nvcr.io/nvidia/cuda:12.5.0-base-ubi8',\n"
             "               command: [nvidia-smi, -L], success_log: 'GPU 0: NVIDIA H100'}\n")
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, extra), cluster, "--json"))
    assert result.exit_code == 0, result.output
    pods = cluster.validation_pods
    assert {p["spec"]["containers"][0]["command"][0] for p in pods} == {"nvidia-smi"}


def test_a_validation_command_the_image_lacks_is_named(runner, tmp_path: Path,
                                                       cluster: FakeGpuCluster) -> None:
    extra = "gpu:\n  validation: {command: [nvidia-smii]}\n"
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, extra), cluster, "--json"))
    assert result.exit_code == 1, result.output
    row = json.loads(result.stdout)["nodes"][0]
    assert row["problem"].endswith(' Failed (StartError: exec: "nvidia-smii": executable file not found in '
                                   "$PATH); its log lacks 'Test PASSED'")


def test_a_validation_image_the_registry_lacks_is_named(runner, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import upi.gpu.verify

    monkeypatch.setattr(upi.gpu.verify, "POD_LIMIT", 0.0)
    extra = "gpu:\n  validation: {image: 'registry.example.com/tools/gpu-check:1'}\n"
    fake, result = gpu_once(runner, tmp_path, None, gpu_inventory(tmp_path, extra), "--json")
    assert result.exit_code == 1, result.output
    row = json.loads(result.stdout)["nodes"][0]
    assert row["validation"] == "timed out"
    image = "registry.example.com/tools/gpu-check:1"
    assert row["problem"].endswith(f"did not finish: the image {image} cannot be pulled (ImagePullBackOff: "
                                   f"initializing source docker://{image}: reading manifest: manifest "
                                   "unknown)")


def test_an_operators_crd_is_served_only_once_its_install_plan_ran(
        runner, tmp_path: Path, cluster: FakeGpuCluster, kube: Kube) -> None:
    with pytest.raises(ClusterError, match="list ClusterPolicy: the server could not find the requested"):
        kube.find("nvidia.com/v1", "ClusterPolicy")
    with pytest.raises(ClusterError, match="the server could not find the requested resource"):
        kube.apply({"apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
                    "metadata": {"name": "nfd-instance", "namespace": "openshift"}, "spec": {}})
    assert runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster)).exit_code == 0
    policies = kube.find("nvidia.com/v1", "ClusterPolicy")
    assert [p["metadata"]["name"] for p in policies] == ["gpu-cluster-policy"]


def test_an_unhealthy_catalog_gets_no_install_plan(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)

    def catalog_breaks_after_the_checks() -> None:
        if fake.api.get("v1", "Namespace", NS) is not None:
            source = fake.api.get(OLM, "CatalogSource", "certified-operators", MARKETPLACE)
            if source["status"]["connectionState"]["lastObservedState"] == "READY":
                fake.api.set_status(OLM, "CatalogSource", "certified-operators", MARKETPLACE,
                                    {"connectionState": {"lastObservedState": "TRANSIENT_FAILURE"}})

    fake.api.controllers.insert(0, catalog_breaks_after_the_checks)
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, "--json", timeout="0.3"))
    finally:
        fake.stop()
    diagnosis = _diagnosis(result)
    assert (diagnosis["step"], diagnosis["object"]) == (
        "subscribe", f"Subscription {NS}/gpu-operator-certified")
    assert diagnosis["problem"] == ("OLM made no InstallPlan (CatalogSourcesUnhealthy: targeted "
                                    "catalogsource openshift-marketplace/certified-operators unhealthy)")
    assert fake.api.list(OLM, "InstallPlan", NS) == []


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubi8"}]}}


@pytest.mark.parametrize(("change", "said"), [
    (lambda p: p["spec"]["containers"][0].pop("image"), "spec.containers[0].image: Required value"),
    (lambda p: p["spec"]["containers"][0].update(resources={"requests": {"nvidia.com/gpu": "1"}}),
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable "
     "resources"),
    (lambda p: p["spec"]["containers"][0].update(
        resources={"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}),
     'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "1": must be equal to '
     "nvidia.com/gpu limit of 2"),
    (lambda p: p["spec"].update(restartPolicy="Sometimes"),
     'spec.restartPolicy: Unsupported value: "Sometimes"'),
    (lambda p: p["metadata"].update(labels={"upi.openshift.io/gpu-validation": "worker 0"}),
     'metadata.labels: Invalid value: "worker 0": a valid label must be an empty string'),
])
def test_the_server_refuses_an_invalid_pod(kube: Kube, cluster: FakeGpuCluster, change, said: str) -> None:
    pod = json.loads(json.dumps(POD))
    change(pod)
    with pytest.raises(ClusterError, match="create Pod default/p: Pod \"p\" is invalid: ") as caught:
        kube.create(pod)
    assert said in str(caught.value)
    cluster.api.schema_violations.clear()  # refused on purpose: the fixture's check is for upi's writes


def test_the_server_refuses_an_invalid_node_write_and_a_changed_pod_spec(
        kube: Kube, cluster: FakeGpuCluster) -> None:
    with pytest.raises(ClusterError, match=r'Node "worker-0" is invalid: metadata.annotations: Invalid '
                                           r'value: "upi\.openshift\.io/gpu verified"'):
        kube.merge_patch("v1", "Node", "worker-0", None,
                         {"metadata": {"annotations": {"upi.openshift.io/gpu verified": "x"}}})
    with pytest.raises(ClusterError, match=r'"worker-0" is invalid: spec.taints\[0\].effect: Unsupported'):
        kube.merge_patch("v1", "Node", "worker-0", None,
                         {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "Sometimes"}]}})
    kube.create(json.loads(json.dumps(POD)))
    with pytest.raises(ClusterError, match="spec: Forbidden: pod updates may not change fields other than"):
        kube.merge_patch("v1", "Pod", "p", "default", {"spec": {"nodeName": "worker-1"}})
    image = {"spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/cuda:12.6.0-base-ubi8"}]}}
    patched = kube.merge_patch("v1", "Pod", "p", "default", image)
    assert patched["spec"]["containers"][0]["image"].endswith("12.6.0-base-ubi8")
    cluster.api.schema_violations.clear()
