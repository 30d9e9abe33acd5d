"""`upi gpu` with rdma: DGXs end to end: installed, then proven per node and per pair, on ONE fake cluster.

The fake cluster (tests/fake_gpu.py) runs the GPU Operator, the Network
Operator (tests/fake_network.py: NIC driver pods, the RDMA device plugin's
allocatable, the IPoIB/macvlan networks) and upi's bandwidth test pods
(tests/fake_rdma.py: SCC admission, scheduler, Multus over those networks,
ib_write_bw); nothing here seeds RDMA state by hand: what the verification
reads is what the install made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_gpu import FakeGpuCluster
from fake_rdma import POD_LABEL
from gpu_support import clean_cluster, gpu_args, second_run
from rdma_support import dgx_inventory, dgx_nodes, roce_ports

from upi.cli import app

MIXED = ["infiniband", "infiniband", "infiniband", "ethernet", "ethernet"]
RESOURCE = "rdma/rdma_shared_device_a"


def _cluster(tmp_path: Path, fabrics: list[str]) -> Iterator[FakeGpuCluster]:
    for cluster in clean_cluster(tmp_path, dgx_nodes(fabrics)):
        roce_ports(cluster, fabrics)
        yield cluster


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from _cluster(tmp_path, MIXED)


def _args(tmp_path: Path, fabrics: list[str], cluster: FakeGpuCluster, timeout: str) -> list[str]:
    return gpu_args(dgx_inventory(tmp_path, fabrics), cluster, "--json", timeout=timeout)


def _test_pods(cluster: FakeGpuCluster) -> list[dict]:
    return [p for p in cluster.api.list("v1", "Pod") if POD_LABEL in (p["metadata"].get("labels") or {})]


def test_upi_gpu_proves_each_fabric_per_node_and_per_pair_and_prints_both_tables(
        runner, tmp_path: Path, mixed: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(dgx_inventory(tmp_path, MIXED), mixed, timeout="2"))
    assert result.exit_code == 0, result.output + mixed.dump()
    out = result.stdout
    assert "== verify RDMA: started" in out and "== verify RDMA: done" in out
    lines = out.splitlines()
    nodes = lines[lines.index("RDMA nodes") + 2:lines.index("RDMA nodes") + 7]
    assert [line.split() for line in nodes] == [
        [f"worker-{i}", fabric, RESOURCE, "63", "loaded", "ready", "-"] for i, fabric in enumerate(MIXED)]
    pairs = {line.split()[0]: line.split() for line in lines if "<->" in line and "Gb/s" not in line
             and not line.startswith(" ")}
    # InfiniBand with InfiniBand in a ring of three (three rounds), RoCE with RoCE: never across.
    assert {k: v[1:3] for k, v in pairs.items()} == {
        "worker-0<->worker-1": ["infiniband", "1"], "worker-1<->worker-2": ["infiniband", "2"],
        "worker-2<->worker-0": ["infiniband", "3"], "worker-3<->worker-4": ["ethernet", "1"]}
    assert all(v[3:8] == ["392.00", "392.20", "350", "passed", v[7]] for v in pairs.values())
    assert "GPUs verified on every GPU node, GPUDirect RDMA on every DGX and pair" in out
    assert mixed.rdma.overlaps == []
    assert len(mixed.rdma.measured) == 4
    assert {frozenset(m) for m in mixed.rdma.measured} == {frozenset(p.split("<->")) for p in pairs}
    # Each test pod: on its fabric's network, under upi's account (the SCC admitted it), then deleted.
    seen = list(mixed.rdma.pods_seen.values())
    assert len(seen) == 8 and mixed.rdma.refused == []
    for pod in seen:
        node = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        net = "default/rdma-macvlan" if node in ("worker-3", "worker-4") else "default/rdma-ipoib"
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == net
        assert (pod["metadata"]["namespace"], pod["spec"]["serviceAccountName"]) == (
            "upi-rdma-test", "upi-rdma-bandwidth")
    assert _test_pods(mixed) == []


def test_json_carries_the_figures_per_node_and_per_pair(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband"]
    for cluster in _cluster(tmp_path, fabrics):
        cluster.rdma.bandwidth[frozenset(("worker-0", "worker-1"))] = 371.5
        result = runner.invoke(app, _args(tmp_path, fabrics, cluster, timeout="2"))
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        rdma = doc["rdma"]
        assert (doc["ok"], rdma["ok"], rdma["min_gbps"]) == (True, True, 350.0)
        rows = [(n["node"], n["allocatable"], n["peermem"], n["nic_driver"], n["ok"]) for n in rdma["nodes"]]
        assert rows == [
            ("worker-0", 63, "loaded", "ready", True), ("worker-1", 63, "loaded", "ready", True)]
        assert [(p["pair"], p["fabric"], p["average_gbps"], p["peak_gbps"], p["verdict"])
                for p in rdma["pairs"]] == [("worker-0<->worker-1", "infiniband", 371.5, 371.69, "passed")]


def test_a_second_run_changes_nothing_but_measures_again(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband"]
    for cluster in _cluster(tmp_path, fabrics):
        doc = second_run(runner, dgx_inventory(tmp_path, fabrics), cluster, timeout="2")
        objects = {c["object"] for c in doc["changes"]}
        assert {"Namespace upi-rdma-test", "ServiceAccount upi-rdma-test/upi-rdma-bandwidth",
                "RoleBinding upi-rdma-test/upi-rdma-bandwidth-scc-privileged"} <= objects
        # The bandwidth test is a measurement: it ran on both runs, and its pods are gone after each.
        assert len(cluster.rdma.measured) == 2 and _test_pods(cluster) == []


def test_a_pair_below_the_minimum_exits_1_naming_the_pair_and_both_figures(runner, tmp_path: Path,
                                                                          mixed: FakeGpuCluster) -> None:
    mixed.rdma.bandwidth[frozenset(("worker-1", "worker-2"))] = 180.5
    result = runner.invoke(app, gpu_args(dgx_inventory(tmp_path, MIXED), mixed, timeout="2"))
    assert result.exit_code == 1, result.output
    assert ("upi: error: GPU step 'verify RDMA' failed at pair worker-1<->worker-2 (infiniband): "
            "average 180.50 Gb/s (peak 180.59) is below the minimum 350 Gb/s") in result.stderr
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith("worker-1<->worker-2"))
    assert row[3:9] == ["180.50", "180.59", "350", "below", "minimum", row[8]]
    # The other pairs passed and say so: a slow link shows in one pair only.
    assert sum(1 for line in result.stdout.splitlines() if "<->" in line and " passed " in line) == 3
    assert "== verify RDMA: failed" in result.stdout


def test_rdma_resource_zero_names_the_node(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband", "infiniband"]
    for cluster in _cluster(tmp_path, fabrics):
        cluster.network.ports["worker-1"] = ["ibp999s0"]  # no port the plugin's ifNames select
        result = runner.invoke(app, _args(tmp_path, fabrics, cluster, timeout="2"))
        assert result.exit_code == 1, result.output
        doc = json.loads(result.stdout)
        diag = doc["diagnosis"]
        assert (diag["step"], diag["object"], diag["problem"]) == (
            "verify RDMA", "Node worker-1", f"allocatable {RESOURCE} is 0")
        assert "rdmaSharedDevicePlugin" in diag["cause"]
        verdicts = {p["pair"]: p["verdict"] for p in doc["rdma"]["pairs"]}
        assert verdicts == {"worker-0<->worker-1": "skipped", "worker-1<->worker-2": "skipped",
                            "worker-2<->worker-0": "passed"}


def test_peermem_that_never_loads_names_the_node(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband"]
    for cluster in _cluster(tmp_path, fabrics):
        cluster.nodes["worker-1"].peermem_fails = True
        result = runner.invoke(app, gpu_args(dgx_inventory(tmp_path, fabrics), cluster, "--json",
                                             timeout="0.08"))
        assert result.exit_code == 1, result.output
        diag = json.loads(result.stdout)["diagnosis"]
        assert diag["step"] == "ClusterPolicy ready"
        assert diag["object"].endswith("(GPU driver on worker-1)")
        assert diag["problem"] == "nvidia-peermem-ctr is not ready"
        assert diag["log"][-1] == "waiting for mellanox ofed and nvidia drivers to be installed"


def test_a_failing_nic_driver_names_its_pod_and_last_log_lines(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband"]
    error = "make: *** [mlx5_core] Error 2: missing kernel headers in the Driver Toolkit image\n"
    for cluster in _cluster(tmp_path, fabrics):
        cluster.network.failing["worker-1"] = error
        result = runner.invoke(app, gpu_args(dgx_inventory(tmp_path, fabrics), cluster, timeout="0.3"))
        assert result.exit_code == 1, result.output
        assert "failed at Pod nvidia-network-operator/mofed-rhcos4.16-" in result.stderr
        assert "(NIC driver on worker-1)" in result.stderr
        assert f"  {error.strip()}" in result.stderr.splitlines()


def test_unschedulable_test_pods_quote_the_scheduler(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "infiniband"]
    for cluster in _cluster(tmp_path, fabrics):
        node = cluster.api.get("v1", "Node", "worker-1")
        assert node is not None
        node.setdefault("spec", {})["taints"] = [
            {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}]
        cluster.api.put(node)
        # The pod stays Pending until the round's wait ends, bounded by the run's --timeout (6 s here).
        result = runner.invoke(app, _args(tmp_path, fabrics, cluster, timeout="0.1"))
        assert result.exit_code == 1, result.output
        doc = json.loads(result.stdout)
        assert doc["rdma"]["pairs"][0]["verdict"] == "unschedulable"
        assert doc["diagnosis"]["problem"].startswith(
            "the client pod cannot be scheduled: 0/5 nodes are available: 1 node(s) had untolerated taint "
            "{example.com/maintenance: true}")


def test_a_fabric_of_one_dgx_gets_the_node_checks_only(runner, tmp_path: Path) -> None:
    fabrics = ["infiniband", "ethernet"]
    for cluster in _cluster(tmp_path, fabrics):
        result = runner.invoke(app, _args(tmp_path, fabrics, cluster, timeout="2"))
        assert result.exit_code == 0, result.output
        rdma = json.loads(result.stdout)["rdma"]
        assert [(n["node"], n["fabric"], n["ok"]) for n in rdma["nodes"]] == [
            ("worker-0", "infiniband", True), ("worker-1", "ethernet", True)]
        assert rdma["pairs"] == [] and cluster.rdma.pods_seen == {}


def test_without_the_scc_binding_the_pods_are_refused_in_the_admissions_words(
        runner, tmp_path: Path, monkeypatch) -> None:
    import upi.gpu.rdma as rdma

    fabrics = ["infiniband", "infiniband"]
    unbound = rdma.test_account_objects
    monkeypatch.setattr(rdma, "test_account_objects", lambda inv: unbound(inv)[:2])  # no RoleBinding
    for cluster in _cluster(tmp_path, fabrics):
        result = runner.invoke(app, _args(tmp_path, fabrics, cluster, timeout="2"))
        assert result.exit_code == 1, result.output
        diag = json.loads(result.stdout)["diagnosis"]
        assert (diag["step"], diag["object"]) == (
            "verify RDMA", "ServiceAccount upi-rdma-test/upi-rdma-bandwidth")
        assert diag["problem"].startswith(
            'create Pod upi-rdma-test/upi-rdma-server-: pods "upi-rdma-server-" is forbidden: unable to '
            'validate against any security context constraint: [provider "anyuid": Forbidden: not usable by '
            'user or serviceaccount, provider restricted-v2: .containers[0].capabilities.add: Invalid value: '
            '"IPC_LOCK": capability may not be added')
        assert "system:openshift:scc:privileged" in diag["fix"]
        assert cluster.rdma.refused == ["upi-rdma-server-"] and _test_pods(cluster) == []
