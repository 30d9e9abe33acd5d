"""`upi gpu` with GPUDirect RDMA against the fake cluster: Network Operator first, then rdma.enabled.

The fake (tests/fake_network.py beside tests/fake_gpu.py) serves the Network
Operator's kinds only once its CSV is installed and validates every object
upi sends against the real CRDs (tests/data/network/); each test asserts that
nothing was rejected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_gpu import FakeGpuCluster
from fake_network import CONTAINER, DRIVER_FAILED, MELLANOX
from gpu_support import Notes, clean_cluster, gpu_args, second_run
from rdma_support import rdma_inventory

from upi.cli import app

OLM = "operators.coreos.com/v1alpha1"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def _policy(cluster: FakeGpuCluster) -> dict:
    found = cluster.api.get(MELLANOX, "NicClusterPolicy", "nic-cluster-policy")
    assert found is not None
    return found


def test_installs_the_network_operator_then_enables_gpudirect(runner, tmp_path: Path,
                                                               cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(rdma_inventory(tmp_path), cluster, "--json", timeout="1"))
    assert result.exit_code == 0, result.output + cluster.dump()
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    sub = cluster.api.get(OLM, "Subscription", "nvidia-network-operator", "nvidia-network-operator")
    assert sub is not None
    # The package's default channel from the PackageManifest; Manual, only the chosen CSV's plan approved.
    assert (sub["spec"]["channel"], sub["spec"]["startingCSV"], sub["spec"]["installPlanApproval"]) == (
        "stable", "nvidia-network-operator.v26.4.1", "Manual")
    assert len(cluster.approved_plans) == 3
    policy = _policy(cluster)
    assert policy["status"]["state"] == "ready"
    states = {s["name"] for s in policy["status"]["appliedStates"]}
    assert states >= {"state-OFED", "state-RDMA-device-plugin"}
    config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    assert config["configList"][0]["selectors"]["ifNames"][0] == "ibp24s0"
    for name in ("worker-0", "worker-1"):
        node = cluster.api.get("v1", "Node", name)
        assert node is not None and node["status"]["allocatable"]["rdma/rdma_shared_device_a"] == "63"
    # The NIC driver was ready before the ClusterPolicy carried rdma.enabled: the first ClusterPolicy
    # written already had it, and the GPU driver pods never restarted for it.
    cp = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert cp is not None and cp["spec"]["driver"]["rdma"] == {"enabled": True}
    assert cluster.peermem_restarts == []
    # The GPU driver pod of each DGX runs nvidia-peermem-ctr, ready (the verification relies on it).
    for pod in cluster.api.list("v1", "Pod", "nvidia-gpu-operator"):
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "nvidia-driver":
            peermem = [c for c in pod["status"]["containerStatuses"] if c["name"] == "nvidia-peermem-ctr"]
            assert peermem and peermem[0]["ready"] is True
    net = cluster.api.get(MELLANOX, "IPoIBNetwork", "rdma-ipoib")
    assert net is not None and net["status"]["state"] == "ready"
    # Order: the NicClusterPolicy was applied before the ClusterPolicy.
    writes = [r[1] for r in cluster.api.requests if r[0] == "PATCH"]
    first_nic = next(i for i, p in enumerate(writes) if "/nicclusterpolicies/" in p)
    first_cp = next(i for i, p in enumerate(writes) if "/clusterpolicies/" in p)
    assert first_nic < first_cp


def test_a_second_run_changes_nothing(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    doc = second_run(runner, rdma_inventory(tmp_path), cluster, timeout="1")
    objects = {c["object"] for c in doc["changes"]}
    assert {"NicClusterPolicy nic-cluster-policy", "IPoIBNetwork rdma-ipoib",
            "Subscription nvidia-network-operator/nvidia-network-operator"} <= objects


def test_dry_run_shows_the_network_operator_objects(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = rdma_inventory(tmp_path)
    result = runner.invoke(app, gpu_args(inv, cluster, "--dry-run", "--json"))
    assert result.exit_code == 0, result.output
    planned = json.loads(result.stdout)["planned"]
    assert any("name: nvidia-network-operator\n" in p and "kind: Subscription" in p for p in planned)
    assert any(p.startswith("# NicClusterPolicy") for p in planned)
    assert any("kind: RoleBinding" in p and "name: system:openshift:scc:privileged" in p for p in planned)
    assert cluster.api.get(OLM, "Subscription", "nvidia-network-operator", "nvidia-network-operator") is None
    # Installed: the NicClusterPolicy and the network as they would be applied, and nothing written.
    assert runner.invoke(app, gpu_args(inv, cluster, timeout="1")).exit_code == 0
    writes = len([r for r in cluster.api.requests if r[0] in ("PATCH", "POST", "PUT", "DELETE")])
    result = runner.invoke(app, gpu_args(inv, cluster, "--dry-run", "--json"))
    planned = json.loads(result.stdout)["planned"]
    assert any("kind: NicClusterPolicy" in p and "ifNames" in p for p in planned)
    assert any("kind: IPoIBNetwork" in p for p in planned)
    assert len([r for r in cluster.api.requests if r[0] in ("PATCH", "POST", "PUT", "DELETE")]) == writes


def test_nic_driver_never_ready_is_bounded_by_the_timeout(runner, tmp_path: Path,
                                                         cluster: FakeGpuCluster) -> None:
    cluster.network.hanging.add("worker-1")
    result = runner.invoke(app, gpu_args(rdma_inventory(tmp_path), cluster, "--json", timeout="0.1"))
    assert result.exit_code == 1, result.output
    diag = json.loads(result.stdout)["diagnosis"]
    assert diag["step"] == "Network Operator"
    assert diag["object"].startswith("Pod nvidia-network-operator/mofed-rhcos4.16-")
    assert diag["object"].endswith("(NIC driver on worker-1)")
    assert "state is notReady; not ready: state-OFED notReady (driver pods not ready on: worker-1)" in (
        diag["problem"])
    assert diag["log"][-1] == "[INFO] Compiling DOCA driver kernel modules..."
    # GPUDirect was never switched on: the ClusterPolicy waits for the NIC driver.
    assert cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is None


def test_a_failing_nic_driver_pod_stops_the_run_with_its_log(runner, tmp_path: Path,
                                                             cluster: FakeGpuCluster) -> None:
    error = "make[1]: *** [Makefile:1947: /usr/src/ofa_kernel] Error 2\n"
    cluster.network.failing["worker-0"] = error
    result = runner.invoke(app, gpu_args(rdma_inventory(tmp_path), cluster, timeout="1"))
    assert result.exit_code == 1
    out = result.output
    assert "GPU step 'Network Operator' failed at Pod nvidia-network-operator/mofed-rhcos4.16-" in out
    assert "(NIC driver on worker-0): container mofed-container is CrashLoopBackOff" in out
    assert f"  {error.strip()}" in out and f"  {DRIVER_FAILED.strip()}" in out
    assert f"-c {CONTAINER}" in out and "Traceback" not in out
    assert cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is None


def test_rdma_added_to_an_installed_cluster_restarts_the_gpu_driver_and_waits(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    (tmp_path / "plain").mkdir()
    plain = rdma_inventory(tmp_path / "plain", w0="", w1="")
    assert runner.invoke(app, gpu_args(plain, cluster, timeout="1")).exit_code == 0
    result = runner.invoke(app, gpu_args(rdma_inventory(tmp_path), cluster, timeout="1"))
    assert result.exit_code == 0, result.output
    assert ("ClusterPolicy gpu-cluster-policy: setting driver.rdma.enabled: the GPU driver pods restart"
            in result.output)
    # Each DGX's driver pod was replaced by one with nvidia-peermem-ctr, and upi waited for it ready.
    assert len(cluster.peermem_restarts) == 2
    for pod in cluster.api.list("v1", "Pod", "nvidia-gpu-operator"):
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "nvidia-driver":
            assert "nvidia-peermem-ctr" in [c["name"] for c in pod["status"]["containerStatuses"]]


def _verify(cluster: FakeGpuCluster, inv_path: Path, names: list[str]) -> list[str]:
    from upi.csr.connect import connect
    from upi.day2.gpu import verify_gpu_nodes
    from upi.gpu.kube import Kube
    from upi.gpu.steps import Clock
    from upi.inventory import load_inventory

    notes = Notes()
    conn = connect(cluster.kubeconfig)
    try:
        results = verify_gpu_nodes(Kube(conn), load_inventory(inv_path, check_files=False), names,
                                   Clock(60, poll=0.05, settle=0.5), notes)
    finally:
        conn.close()
    assert [(r.node, r.ok) for r in results] == [(n, True) for n in names], notes.lines
    return notes.lines


def test_nodes_add_names_the_new_dgx_in_the_nic_cluster_policy(runner, tmp_path: Path,
                                                              cluster: FakeGpuCluster) -> None:
    # Day 1: worker-1 has not joined yet, and is not in the inventory.
    joined_later = cluster.api.get("v1", "Node", "worker-1")
    assert joined_later is not None
    cluster.api.delete("v1", "Node", "worker-1")
    (tmp_path / "day1").mkdir()
    day1 = rdma_inventory(tmp_path / "day1")
    text = day1.read_text()
    start = text.index("  - {name: worker-1")
    day1.write_text(text[:start])
    assert runner.invoke(app, gpu_args(day1, cluster, timeout="1")).exit_code == 0
    assert _affinity(_policy(cluster)) == ["worker-0"]
    # Day 2: it joins; `upi nodes add` runs the GPU step for it alone.
    cluster.api.put(joined_later)
    said = _verify(cluster, rdma_inventory(tmp_path), ["worker-1"])
    assert "Network Operator started" in said
    assert _affinity(_policy(cluster)) == ["worker-0", "worker-1"]
    assert cluster.network.driver_ready("worker-1") is True
    node = cluster.api.get("v1", "Node", "worker-1")
    assert node is not None and node["status"]["allocatable"]["rdma/rdma_shared_device_a"] == "63"
    assert cluster.peermem_restarts == []  # GPUDirect was on from day 1: no GPU driver restarted
    # Then proven: its node checks, and one bandwidth test against the DGX already there.
    assert cluster.rdma.measured[-1] == ("worker-0", "worker-1")
    assert "worker-1: RDMA ready" in said and "worker-0: RDMA ready" not in said
    assert "worker-0<->worker-1: 392.00 Gb/s average (passed)" in said


def test_nodes_add_pairs_each_new_dgx_with_an_existing_one_not_the_whole_ring(runner, tmp_path: Path) -> None:
    from rdma_support import dgx_inventory, dgx_nodes

    fabrics = ["infiniband"] * 5
    for cluster in clean_cluster(tmp_path, dgx_nodes(fabrics)):
        later = [cluster.api.get("v1", "Node", n) for n in ("worker-3", "worker-4")]
        for node in later:
            assert node is not None
            cluster.api.delete("v1", "Node", node["metadata"]["name"])
        (tmp_path / "day1").mkdir()
        day1 = dgx_inventory(tmp_path / "day1", fabrics)
        text = day1.read_text()
        day1.write_text(text[:text.index("  - {name: worker-3")])
        assert runner.invoke(app, gpu_args(day1, cluster, timeout="2")).exit_code == 0
        assert len(cluster.rdma.measured) == 3  # day 1: the ring of three
        for node in later:
            cluster.api.put(node)
        said = _verify(cluster, dgx_inventory(tmp_path, fabrics), ["worker-3", "worker-4"])
        # Two tests, one per new DGX, in one round (they share no node); not the ring of five.
        assert cluster.rdma.measured[3:] in ([("worker-0", "worker-3"), ("worker-1", "worker-4")],
                                             [("worker-1", "worker-4"), ("worker-0", "worker-3")])
        assert cluster.rdma.overlaps == []
        assert [line for line in said if line.startswith("RDMA bandwidth round")] == [
            "RDMA bandwidth round 1: worker-0<->worker-3, worker-1<->worker-4"]


def test_nodes_add_does_not_switch_gpudirect_on_cluster_wide(runner, tmp_path: Path,
                                                            cluster: FakeGpuCluster) -> None:
    (tmp_path / "day1").mkdir()
    assert runner.invoke(app, gpu_args(rdma_inventory(tmp_path / "day1", w0="", w1=""), cluster,
                                       timeout="1")).exit_code == 0
    from upi.csr.connect import connect
    from upi.day2.gpu import verify_gpu_nodes
    from upi.errors import ClusterError
    from upi.gpu.kube import Kube
    from upi.gpu.steps import Clock
    from upi.inventory import load_inventory

    conn = connect(cluster.kubeconfig)
    try:
        with pytest.raises(ClusterError) as caught:
            verify_gpu_nodes(Kube(conn), load_inventory(rdma_inventory(tmp_path), check_files=False),
                             ["worker-1"], Clock(5, poll=0.05, settle=0.5), Quiet())
    finally:
        conn.close()
    assert str(caught.value) == ("stage gpu rdma: ClusterPolicy gpu-cluster-policy: GPUDirect RDMA "
                                 "(driver.rdma.enabled) is not on")
    assert cluster.api.get(MELLANOX, "NicClusterPolicy", "nic-cluster-policy") is None


class Quiet:
    def stage(self, name: str, message: str) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


def _affinity(policy: dict) -> list[str]:
    required = policy["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return list(required["nodeSelectorTerms"][0]["matchExpressions"][0]["values"])


def test_a_roce_fabric_gets_its_macvlan_network_and_rdma_resource(runner, tmp_path: Path,
                                                                  cluster: FakeGpuCluster) -> None:
    ports = ["ens1f0np0", "ens1f1np1"]
    for node in ("worker-0", "worker-1"):
        cluster.network.ports[node], cluster.network.link[node] = ports, "ether"
        # A ConnectX in Ethernet mode is PCI class 0200 (Ethernet controller), not 0207.
        sim = cluster.nodes[node]
        sim.devices = [{**d, "class": "0200"} if d["vendor"] == "15b3" else d for d in sim.devices]
    roce = f"rdma: {{interfaces: [{', '.join(ports)}], link_type: ethernet, node_interface: eno1}}"
    extra = "network_operator:\n  resource_name: roce\n"
    result = runner.invoke(app, gpu_args(rdma_inventory(tmp_path, extra, w0=roce, w1=roce), cluster,
                                         timeout="1"))
    assert result.exit_code == 0, result.output
    net = cluster.api.get(MELLANOX, "MacvlanNetwork", "rdma-macvlan")
    assert net is not None and net["spec"]["master"] == "ens1f0np0" and net["status"]["state"] == "ready"
    assert cluster.api.get(MELLANOX, "IPoIBNetwork", "rdma-ipoib") is None
    assert "ipoib" not in (_policy(cluster)["spec"].get("secondaryNetwork") or {})
    for name in ("worker-0", "worker-1"):
        node = cluster.api.get("v1", "Node", name)
        assert node is not None and node["status"]["allocatable"]["rdma/roce"] == "63"


def test_a_channel_the_catalog_lacks_names_the_inventory_key(runner, tmp_path: Path,
                                                             cluster: FakeGpuCluster) -> None:
    inv = rdma_inventory(tmp_path, "network_operator:\n  channel: v99.9\n")
    result = runner.invoke(app, gpu_args(inv, cluster, "--json", timeout="1"))
    assert result.exit_code == 1
    diag = json.loads(result.stdout)["diagnosis"]
    assert diag["object"] == "PackageManifest openshift-marketplace/nvidia-network-operator"
    assert diag["problem"] == "no channel 'v99.9' (channels: stable, v26.4)"
    assert diag["fix"] == "set network_operator.channel to one of those"


def test_the_live_panel_shows_the_network_operator_stage_skipped_without_rdma() -> None:
    import io

    from upi.gpu.display import GpuDisplay

    display = GpuDisplay(live=False, out=io.StringIO())
    for stage in ("pre-flight", "GPU pool", "NFD operator", "GPU operator", "operands"):
        display.stage(stage, "started")
        display.stage(stage, "done")
    assert display.states["Network Operator"] == "pending"
    display.stage("ClusterPolicy ready", "started")
    assert display.states["Network Operator"] == "skipped"
    assert display.states["verify nodes"] == "pending"


def test_a_fabric_namespace_of_its_own_is_created_before_its_network(runner, tmp_path: Path,
                                                                     cluster: FakeGpuCluster) -> None:
    # The Network Operator writes the NetworkAttachmentDefinition into networkNamespace: it must exist.
    inv = rdma_inventory(tmp_path, "network_operator:\n  secondary_network: {namespace: fabric}\n"
                                   "  bandwidth: {namespace: fabric}\n")
    result = runner.invoke(app, gpu_args(inv, cluster, "--json", timeout="1"))
    assert result.exit_code == 0, result.output + cluster.dump()
    assert cluster.api.get("v1", "Namespace", "fabric") is not None
    net = cluster.api.get(MELLANOX, "IPoIBNetwork", "rdma-ipoib")
    assert net is not None and net["spec"]["networkNamespace"] == "fabric"
    writes = [r[1] for r in cluster.api.requests if r[0] == "PATCH"]
    assert writes.index("/api/v1/namespaces/fabric") < next(
        i for i, p in enumerate(writes) if "/ipoibnetworks/" in p)
