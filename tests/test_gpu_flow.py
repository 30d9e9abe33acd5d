"""`upi gpu` against the fake GPU cluster: install, idempotence, verification, every failure path.

The fake (tests/fake_apiserver.py + tests/fake_gpu.py) validates every object
upi writes against the real CRD schemas; each test also asserts that nothing
was rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_gpu import DRIVER_LOAD_FAIL, FakeGpuCluster, SimNode
from gpu_support import clean_cluster, gpu_args, gpu_inventory, gpu_once, sim_nodes

from upi.cli import app


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def test_installs_and_verifies_every_gpu_node(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output + cluster.dump()
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["changed"] is True
    rows = {n["node"]: n for n in doc["nodes"]}
    assert sorted(rows) == ["worker-0", "worker-1"]
    for row in rows.values():
        assert (row["label"], row["expected"], row["allocatable"]) == ("pci-10de.present", 8, 8)
        assert (row["product"], row["validation"]) == ("NVIDIA-H100-80GB-HBM3", "passed")
    # Only the chosen CSV's InstallPlan was approved; upi wrote with server-side apply as `upi`.
    assert len(cluster.approved_plans) == 2
    applies = [
        r for r in cluster.api.requests if r[0] == "PATCH" and r[2].startswith("application/apply-patch")
    ]
    assert applies
    sub = cluster.api.get(
        "operators.coreos.com/v1alpha1", "Subscription", "gpu-operator-certified", "nvidia-gpu-operator"
    )
    assert sub is not None
    assert (sub["spec"]["channel"], sub["spec"]["startingCSV"]) == ("v26.3", "gpu-operator-certified.v26.3.1")
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None and policy["spec"]["operator"]["use_ocp_driver_toolkit"] is True
    # Validation pods: one per GPU node, pinned, one GPU each, deleted afterwards.
    pods = cluster.validation_pods
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods) == [
        "worker-0",
        "worker-1",
    ]
    assert all(p["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"} for p in pods)
    # All at once: each pulls its image first, and one after the other 32 DGXs wait 32 pulls.
    assert cluster.most_validation_pods_at_once == 2
    assert not [p for p in cluster.api.list("v1", "Pod") if p["metadata"]["name"].startswith("upi-gpu")]


def test_a_second_run_changes_nothing_and_says_so(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    before = {
        k: o["metadata"]["resourceVersion"]
        for k, o in cluster.api.objects.items()
        if k[0].kind not in ("Pod", "Node")
    }
    plans = list(cluster.approved_plans)
    result = runner.invoke(app, gpu_args(inv, cluster))
    assert result.exit_code == 0, result.output
    assert "GPUs verified on every GPU node (nothing changed: already installed)" in result.output
    after = {
        k: o["metadata"]["resourceVersion"]
        for k, o in cluster.api.objects.items()
        if k[0].kind not in ("Pod", "Node")
    }
    assert after == before
    assert cluster.approved_plans == plans
    assert not re.search(r": (created|configured|approved)", result.output), result.output
    # 2 x (namespace, group, subscription) + 2 operands + the GPU pool and its KubeletConfig
    # + the metrics ServiceAccount and its cluster-monitoring-view binding
    assert result.output.count(": unchanged") == 12


def test_overrides_and_pinned_channel_reach_the_cluster(
    runner, tmp_path: Path, cluster: FakeGpuCluster
) -> None:
    extra = "gpu:\n  operator_channel: v26.7\n"
    # driver.rdma.enabled without rdma: nodes needs a host NIC driver (else the GPU driver pods wait).
    extra += ("  cluster_policy: {mig.strategy: mixed, driver.rdma.enabled: true,"
              " driver.rdma.useHostMofed: true}\n")
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, extra), cluster))
    assert result.exit_code == 0, result.output
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None
    assert policy["spec"]["mig"] == {"strategy": "mixed"} and policy["spec"]["driver"]["rdma"] == {
        "enabled": True, "useHostMofed": True
    }
    csvs = [
        c["metadata"]["name"]
        for c in cluster.api.list("operators.coreos.com/v1alpha1", "ClusterServiceVersion")
    ]
    assert "gpu-operator-certified.v26.7.0" in csvs


def test_dry_run_changes_nothing(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    before = len(cluster.api.objects)
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--dry-run"))
    assert result.exit_code == 0, result.output
    assert (
        "kind: Subscription" in result.output
        and "startingCSV: gpu-operator-certified.v26.3.1" in result.output
    )
    assert not [r for r in cluster.api.requests if r[0] in ("PATCH", "POST", "PUT", "DELETE")]
    assert len(cluster.api.objects) == before


def test_registry_storage_missing_fails_preflight_with_the_fix(
    runner, tmp_path: Path, cluster: FakeGpuCluster
) -> None:
    cluster.set_registry_storage(False)
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 1
    assert "GPU step 'pre-flight' failed at image registry storage" in result.output
    assert "oc patch configs.imageregistry.operator.openshift.io cluster" in result.output
    assert not [r for r in cluster.api.requests if r[0] in ("PATCH", "POST")]


def test_csv_never_succeeding_times_out_naming_it(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    cluster.csv_succeeds["gpu-operator-certified"] = False
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, timeout="0.05"))
    assert result.exit_code == 1
    assert (
        "GPU step 'wait for CSV' failed at ClusterServiceVersion "
        "nvidia-gpu-operator/gpu-operator-certified.v26.3.1: never reached Succeeded; phase Installing"
    ) in result.output


def test_node_without_the_label_fails_verification(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 0)  # the DGX's GPUs are not seen on PCI
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path))
    assert result.exit_code == 1
    assert "GPU step 'verify nodes' failed at Node worker-1: no NVIDIA PCI label" in result.output
    assert fake.api.schema_violations == []


def test_allocatable_7_of_8_fails(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[3] = SimNode("worker-0", 8, allocatable_gpus=7)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    row = next(n for n in doc["nodes"] if n["node"] == "worker-0")
    assert row["problem"] == "allocatable nvidia.com/gpu is 7, the inventory says 8"
    assert doc["diagnosis"]["object"] == "Node worker-0"


def test_validation_pod_failing_shows_its_log(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode(
        "worker-1",
        8,
        validation_fails="Failed to allocate device vector A\nCUDA error: system not yet initialized\n",
    )
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path))
    assert result.exit_code == 1
    assert "failed at Node worker-1: validation pod upi-gpu-validate-worker-1-" in result.output
    assert "  CUDA error: system not yet initialized" in result.output
    assert not [p for p in fake.api.list("v1", "Pod") if p["metadata"]["name"].startswith("upi-gpu")]


def test_secure_boot_blocks_the_driver_and_the_diagnosis_says_so(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[3] = SimNode("worker-0", 8, secure_boot=True)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), timeout="0.05")
    assert result.exit_code == 1
    assert "GPU step 'wait for ClusterPolicy ready' failed at Pod nvidia-gpu-operator/" in result.output
    assert "likely cause: Secure Boot is on" in result.output
    assert DRIVER_LOAD_FAIL.splitlines()[-1] in result.output


def test_unreachable_api_is_a_failed_preflight(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    cluster.stop()
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 1
    assert "GPU step 'pre-flight' failed" in result.output


def test_bad_input_exits_2(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path, "gpu:\n  cluster_policy: [x]\n")
    result = runner.invoke(app, gpu_args(inv, cluster))
    assert result.exit_code == 2
    assert f"{inv}:40: gpu.cluster_policy:" in result.output
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, timeout="0"))
    assert result.exit_code == 2


@pytest.mark.parametrize("label", ["pci-10de", "pci-0302_10de", "pci-0300_10de"])
def test_any_of_the_three_nvidia_pci_label_forms_counts(tmp_path: Path, label: str) -> None:
    from upi.gpu.verify import NodeResult, _labels_problem
    from upi.inventory import load_inventory

    inv = load_inventory(gpu_inventory(tmp_path), check_files=False)
    node = next(n for n in inv.nodes if n.name == "worker-0")
    labels = {f"feature.node.kubernetes.io/{label}.present": "true", "nvidia.com/gpu.present": "true",
              "nvidia.com/gpu.product": "NVIDIA-H100"}
    obj = {"metadata": {"labels": labels},
           "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    result = NodeResult("worker-0")
    assert _labels_problem(node, obj, result) == ""
    assert result.label == f"{label}.present"


def test_node_option_verifies_only_the_named_gpu_node(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 0)  # broken, but not the node asked about (a day-2 DGX check)
    fake, result = gpu_once(runner, tmp_path, nodes, gpu_inventory(tmp_path), "--node", "worker-0", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [n["node"] for n in doc["nodes"]] == ["worker-0"]
    assert fake.api.schema_violations == []


@pytest.mark.parametrize(("name", "shown"), [
    ("master-0", "master-0"), ("worker-9", "worker-9"), ("", "''"), ("a\nb", "'a\\nb'")])
def test_node_option_names_a_gpu_node_or_exits_2(runner, tmp_path: Path, cluster: FakeGpuCluster,
                                                name: str, shown: str) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--node", name))
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr  # one paragraph, whatever the name
    assert f"--node {shown}: not a gpu: true node of" in result.stderr
    assert "GPU nodes: worker-0, worker-1" in result.stderr
