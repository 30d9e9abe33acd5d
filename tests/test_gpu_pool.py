"""The DGX pool (issue 31): the `gpu_pool:` section, and `upi gpu` making the GPU nodes a tuned pool.

The fake cluster's machine config operator (tests/fake_mco.py) renders the
pool's config and rolls it out node by node, as the real one does; every object
upi writes is checked against the real CRDs (tests/data/tuning).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_gpu import FakeGpuCluster, SimNode
from gpu_support import clean_cluster, gpu_args, gpu_inventory, gpu_once, sim_nodes, start_cluster

from upi.cli import app
from upi.inventory.loader import load_inventory


def test_the_pool_defaults_when_the_section_is_absent(tmp_path: Path) -> None:
    from upi.inventory.gpupool import pool_settings

    pool = pool_settings(load_inventory(gpu_inventory(tmp_path), check_files=False))
    assert (pool.name, pool.taint and pool.taint.key, pool.taint and pool.taint.effect) == (
        "dgx", "nvidia.com/gpu", "NoSchedule")
    assert (pool.tuning.cpu_manager, pool.tuning.topology_manager, pool.diagnosis_level, pool.metrics) == (
        "static", "restricted", 1, True)


def test_taint_none_means_no_taint(tmp_path: Path) -> None:
    from upi.inventory.gpupool import pool_taint

    inv = load_inventory(gpu_inventory(tmp_path, "gpu_pool:\n  taint: none\n"), check_files=False)
    assert pool_taint(inv) is None


def test_a_pool_section_without_gpu_nodes_is_warned(runner, example_dir: Path) -> None:
    inv = example_dir / "compact.yaml"
    inv.write_text(inv.read_text() + "gpu_pool: {diagnosis_level: 3}\n")
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "gpu_pool is set but no node has gpu: true, so there is no GPU pool" in said


def test_the_schema_offers_none_for_the_taint_and_not_an_empty_value(runner) -> None:
    import jsonschema

    doc = json.loads(runner.invoke(app, ["schema"]).stdout)
    taint = {"$defs": doc["$defs"], "$ref": "#/$defs/GpuPool/properties/taint"}
    jsonschema.validate("none", taint)
    jsonschema.validate({"key": "nvidia.com/gpu", "effect": "NoExecute"}, taint)
    for wrong in (None, "None", False):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, taint)


@pytest.mark.parametrize(
    ("section", "line", "message"),
    [
        ("  name: worker\n", 2, "gpu_pool.name: 'worker' is not a pool name"),
        ("  taint: {key: 'bad key!'}\n", 2, "gpu_pool.taint.key: 'bad key!' is not a taint key"),
        ("  taint: {effect: Never}\n", 2, "gpu_pool.taint.effect"),
        ("  tuning:\n    reserved_cpus: 3-1\n", 3,
         "gpu_pool.tuning.reserved_cpus: '3-1': the range 3-1 runs"),
        ("  tuning:\n    hugepages: [{size: 1G, count: 4}, {size: 1G, count: 2}]\n", 3,
         "gpu_pool.tuning.hugepages: the size 1G is given twice"),
        ("  tuning:\n    hugepages: [{size: 4M, count: 4}]\n", 3, "gpu_pool.tuning.hugepages[0].size"),
        ("  tuning:\n    performance_profile: {cpu: {reserved: 0-1}}\n", 3,
         "gpu_pool.tuning.performance_profile: a PerformanceProfile spec needs cpu.reserved"),
        ("  diagnosis_level: 7\n", 2, "gpu_pool.diagnosis_level: 7 is out of range: it must be at most 4"),
        ("  metrics: maybe\n", 2, "gpu_pool.metrics"),
        ("  max_unavailable: 0\n", 2, "gpu_pool.max_unavailable: 0 is not a node count"),
        ("  max_unavailable: 150%\n", 2, "gpu_pool.max_unavailable: '150%' is not a percentage"),
        ("  tunning: {}\n", 2, "gpu_pool"),
        # Hostile values: each names the key and says what to write instead.
        ("  taint:\n", 2, "gpu_pool.taint: empty is not a taint: write none (lowercase) for no taint"),
        ("  taint: null\n", 2, "gpu_pool.taint: empty is not a taint"),
        ("  taint: None\n", 2, "gpu_pool.taint: 'None' is not a taint: write none (lowercase)"),
        ("  taint: false\n", 2, "gpu_pool.taint: false is not a taint"),
        ("  tuning:\n    reserved_cpus: '\u0660-\u0661'\n", 3,
         "gpu_pool.tuning.reserved_cpus: '\u0660-\u0661' is not a CPU list"),
        ("  tuning:\n    reserved_cpus: 0-99999999999999999999999999999\n", 3,
         "gpu_pool.tuning.reserved_cpus: '0-99999999999999999999999999999': CPU 99999999999999999999 is "
         "past the last CPU id"),
        ("  tuning:\n    reserved_cpus: 0,8192\n", 3,
         "gpu_pool.tuning.reserved_cpus: '0,8192': CPU 8192 is past the last CPU id Linux numbers (8191"),
        ("  tuning:\n    hugepages: [{size: 1G, count: 1}, {size: 2M, count: 1}, {size: 1G, count: 1}]\n", 3,
         "gpu_pool.tuning.hugepages: must list at most 2 items"),
        ("  tuning:\n    hugepages: [{size: 1G, count: 5000}]\n", 3,
         "gpu_pool.tuning.hugepages: 5000 GiB of hugepages is more than the memory of the largest DGX"),
        ("  tuning:\n    performance_profile: {cpu: {reserved: zz, isolated: 2-9}}\n", 3,
         "gpu_pool.tuning.performance_profile: cpu.reserved: 'zz' is not a CPU list"),
        ("  tuning:\n    performance_profile: {cpu: {reserved: 0-3, isolated: 2-9}}\n", 3,
         "gpu_pool.tuning.performance_profile: CPU 2 is in both cpu.reserved and cpu.isolated"),
    ],
)
def test_a_bad_pool_section_is_exit_2_naming_file_field_and_line(
    runner, tmp_path: Path, section: str, line: int, message: str
) -> None:
    inv = gpu_inventory(tmp_path)
    base = len(inv.read_text().splitlines())
    inv.write_text(inv.read_text() + "gpu_pool:\n" + section)
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2, result.output
    assert f"{inv}:{base + line}: {message}" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output  # one problem, one paragraph


def test_a_gpu_master_is_refused_as_the_pool_cannot_hold_it(runner, tmp_path: Path) -> None:
    from rdma_support import rdma_inventory  # dgxpod with the files validate reads

    inv = rdma_inventory(tmp_path, w0="", w1="")
    master = '{name: master-1, role: master, mac: "52:54:00:21:03:51", ip: 10.33.3.51}'
    inv.write_text(inv.read_text().replace(master, master[:-1] + ", gpu: true}"))
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"upi: error: {inv}:33: nodes[2].gpu: master-1 is a master: gpu: true is for workers (the DGXs join "
        "the GPU pool, a custom MachineConfigPool, and the machine config operator keeps control-plane nodes "
        "out of custom pools)"]


# --- upi gpu: the pool on the fake cluster ---------------------------------------------------

MCO = "machineconfiguration.openshift.io/v1"
STATE = "machineconfiguration.openshift.io/state"
CURRENT = "machineconfiguration.openshift.io/currentConfig"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def _node(cluster: FakeGpuCluster, name: str) -> dict[str, Any]:
    node = cluster.api.get("v1", "Node", name)
    assert node is not None
    return node


def test_upi_gpu_makes_the_gpu_nodes_a_tuned_pool_before_the_operators(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--json"))
    assert result.exit_code == 0, result.output + cluster.dump()
    mcp = cluster.api.get(MCO, "MachineConfigPool", "dgx")
    assert mcp is not None
    assert mcp["spec"]["nodeSelector"] == {"matchLabels": {"node-role.kubernetes.io/dgx": ""}}
    assert mcp["spec"]["machineConfigSelector"]["matchExpressions"] == [
        {"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "dgx"]}]
    kc = cluster.api.get(MCO, "KubeletConfig", "dgx-kubelet")
    assert kc is not None and kc["spec"]["kubeletConfig"] == {
        "cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted",
        "cpuManagerReconcilePeriod": "5s", "reservedSystemCPUs": "0-1"}
    rendered = mcp["status"]["configuration"]["name"]
    assert rendered.startswith("rendered-dgx-")
    assert "99-dgx-generated-kubelet" in [s["name"] for s in mcp["spec"]["configuration"]["source"]]
    for name in ("worker-0", "worker-1"):
        node = _node(cluster, name)
        assert node["metadata"]["labels"]["node-role.kubernetes.io/dgx"] == ""
        assert (node["metadata"]["annotations"][CURRENT], node["metadata"]["annotations"][STATE]) == (
            rendered, "Done")
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    # The masters are not in the pool and carry no taint.
    assert "taints" not in _node(cluster, "master-0")["spec"]
    assert "node-role.kubernetes.io/dgx" not in _node(cluster, "master-0")["metadata"]["labels"]
    # One node at a time (maxUnavailable 1), and each reboot is said.
    assert mcp["spec"]["maxUnavailable"] == 1
    assert cluster.mco.reboots == ["worker-0", "worker-1"] and cluster.mco.most_updating == 1
    assert f"Node worker-0: updating to {rendered} (drains and reboots)" in result.stderr
    assert f"Node worker-1: on {rendered}" in result.stderr
    # The pool before the operators: the KubeletConfig is written before the first Subscription.
    paths = [r[1] for r in cluster.api.requests if r[0] == "PATCH"]
    first_sub = next(i for i, p in enumerate(paths) if "/subscriptions/" in p)
    assert any("/kubeletconfigs/dgx-kubelet" in p for p in paths[:first_sub])
    # Everything upi runs on a GPU node tolerates the taint; metrics go to the cluster's monitoring.
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in policy["spec"][
        "daemonsets"]["tolerations"]
    assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    ns = cluster.api.get("v1", "Namespace", "nvidia-gpu-operator")
    assert ns is not None and ns["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"
    assert all({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in p["spec"][
        "tolerations"] for p in cluster.validation_pods)


def test_a_second_run_reboots_nothing_and_changes_nothing(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    reboots = list(cluster.mco.reboots)
    nodes = {n: json.dumps(_node(cluster, n), sort_keys=True) for n in ("worker-0", "worker-1")}
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["changed"] is False
    assert cluster.mco.reboots == reboots
    for name, before in nodes.items():  # labels, taints, MCO annotations: all as they were
        after = _node(cluster, name)
        assert (after["metadata"]["labels"], after["spec"]) == (
            json.loads(before)["metadata"]["labels"], json.loads(before)["spec"])


WRITES = ("PATCH", "PUT", "POST", "DELETE")


def _allowed_on_a_second_run(path: str) -> bool:
    """The pods upi runs to verify and diagnose (created, then deleted) and the metrics token."""
    return "/pods" in path or path.endswith("/token")


@pytest.mark.parametrize("extra", [
    "",
    "gpu_pool:\n  name: gpu\n  taint: {key: example.com/dgx, value: reserved, effect: NoExecute}\n"
    "  tuning: {reserved_cpus: '0-3', hugepages: [{size: 1G, count: 8}, {size: 2M, count: 512}]}\n"
    "  max_unavailable: 50%\n  diagnosis_level: 2\n",
    "gpu_pool:\n  taint: none\n  tuning: {performance_profile: {cpu: {reserved: 0-1, isolated: 2-9}}}\n"
    "  metrics: false\n",
], ids=["defaults", "own-pool-taint-hugepages", "profile-untainted"])
def test_a_second_run_sends_no_write_but_its_pods_and_token(
        runner, tmp_path: Path, cluster: FakeGpuCluster, extra: str) -> None:
    # Counted on the wire: a no-op server-side apply is still a PATCH the cluster must authorise,
    # audit and run admission on; the second run sends none (rdma: nodes too, so every stage runs).
    from rdma_support import rdma_inventory

    inv = rdma_inventory(tmp_path, extra)
    assert runner.invoke(app, gpu_args(inv, cluster, timeout="2")).exit_code == 0
    first = len(cluster.api.requests)
    result = runner.invoke(app, gpu_args(inv, cluster, "--json", timeout="2"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["changed"] is False
    writes = [f"{m} {p}" for m, p, _ in cluster.api.requests[first:] if m in WRITES]
    assert [w for w in writes if not _allowed_on_a_second_run(w)] == []


def test_an_inventory_change_still_reaches_the_cluster_and_drops_what_upi_no_longer_sets(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    kubelet = cluster.api.get(MCO, "KubeletConfig", "dgx-kubelet")
    assert kubelet is not None and kubelet["spec"]["kubeletConfig"]["reservedSystemCPUs"] == "0-1"
    inv.write_text(inv.read_text() + "gpu_pool:\n  tuning: {cpu_manager: none}\n")
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    changes = json.loads(result.stdout)["changes"]
    assert {"object": "KubeletConfig dgx-kubelet", "action": "configured"} in changes
    spec = cluster.api.get(MCO, "KubeletConfig", "dgx-kubelet")["spec"]["kubeletConfig"]  # type: ignore[index]
    assert spec["cpuManagerPolicy"] == "none" and "reservedSystemCPUs" not in spec


def test_a_degraded_node_is_exit_1_naming_it_and_the_pools_message(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    fake.mco.degrades["worker-1"] = "unexpected on-disk state validating against rendered-dgx-0"
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert ("GPU step 'GPU pool' failed at Node worker-1: the machine config daemon reports Degraded: "
            "unexpected on-disk state validating against rendered-dgx-0") in result.output
    assert "MachineConfigPool dgx: 1 nodes are reporting degraded status" in result.output
    assert "Traceback" not in result.output
    # Nothing after the pool ran: no operator, no taint on a node that is not tuned.
    assert fake.api.list("operators.coreos.com/v1alpha1", "Subscription") == []
    assert "taints" not in (fake.api.get("v1", "Node", "worker-1") or {})["spec"]


POOL = """gpu_pool:
  name: gpu
  taint: {key: example.com/dgx, value: reserved, effect: NoExecute}
  tuning:
    topology_manager: single-numa-node
    hugepages: [{size: 1G, count: 16}]
    performance_profile:
      cpu: {reserved: 0-3, isolated: 4-111}
  metrics: false
"""


def test_a_performance_profile_pool_with_its_own_taint(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, POOL), cluster))
    assert result.exit_code == 0, result.output + cluster.dump()
    pp = cluster.api.get("performance.openshift.io/v2", "PerformanceProfile", "gpu")
    assert pp is not None
    assert pp["spec"] == {
        "cpu": {"reserved": "0-3", "isolated": "4-111"},
        "nodeSelector": {"node-role.kubernetes.io/gpu": ""},
        "machineConfigPoolSelector": {"pools.operator.machineconfiguration.openshift.io/gpu": ""},
        "numa": {"topologyPolicy": "single-numa-node"},
        "hugepages": {"defaultHugepagesSize": "1G", "pages": [{"size": "1G", "count": 16}]},
    }
    assert cluster.api.get(MCO, "KubeletConfig", "gpu-kubelet") is None
    mcp = cluster.api.get(MCO, "MachineConfigPool", "gpu")
    assert mcp is not None
    assert "50-performance-gpu" in [s["name"] for s in mcp["spec"]["configuration"]["source"]]
    own = {"key": "example.com/dgx", "operator": "Exists", "effect": "NoExecute"}
    assert _node(cluster, "worker-0")["spec"]["taints"] == [
        {"key": "example.com/dgx", "effect": "NoExecute", "value": "reserved"}]
    assert all(own in p["spec"]["tolerations"] for p in cluster.validation_pods)
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None and own in policy["spec"]["daemonsets"]["tolerations"]
    assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is False


def test_a_profile_written_with_dotted_keys_is_the_same_profile(tmp_path: Path) -> None:
    from upi.inventory import load_inventory

    nested = ("gpu_pool:\n  tuning:\n    performance_profile:\n"
              "      cpu: {reserved: 0-3, isolated: 4-111}\n      numa: {topologyPolicy: single-numa-node}\n")
    dotted = ("gpu_pool:\n  tuning:\n    performance_profile:\n"
              "      cpu.reserved: 0-3\n      cpu.isolated: 4-111\n"
              "      numa.topologyPolicy: single-numa-node\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = load_inventory(gpu_inventory(tmp_path / "a", nested), check_files=False)
    b = load_inventory(gpu_inventory(tmp_path / "b", dotted), check_files=False)
    assert a.gpu_pool is not None and b.gpu_pool is not None
    assert b.gpu_pool.tuning.performance_profile == a.gpu_pool.tuning.performance_profile == {
        "cpu": {"reserved": "0-3", "isolated": "4-111"}, "numa": {"topologyPolicy": "single-numa-node"}}


def test_taint_none_leaves_the_nodes_untainted(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, "gpu_pool:\n  taint: none\n"), cluster))
    assert result.exit_code == 0, result.output
    assert "taints" not in _node(cluster, "worker-0")["spec"]


def test_a_profile_field_the_crd_lacks_is_refused_before_anything_is_applied(
        runner, tmp_path: Path) -> None:
    # Checked against the CRD's field names (upi/inventory/performance-profile.json, tests/carried_facts.py)
    # at load, as network_operator.nic_cluster_policy is: exit 2 naming it, the cluster untouched.
    extra = ("gpu_pool:\n  tuning:\n"
             "    performance_profile: {cpu: {reserved: 0-1, isolated: 2-9}, turbo: true}\n")
    fake = start_cluster(tmp_path)
    try:
        inv = gpu_inventory(tmp_path, extra)
        result = runner.invoke(app, gpu_args(inv, fake))
    finally:
        fake.stop()
    assert result.exit_code == 2, result.output
    line = len(inv.read_text().splitlines())
    assert (f"{inv}:{line}: gpu_pool.tuning.performance_profile: turbo: the PerformanceProfile CRD "
            "(performance.openshift.io/v2) has no field 'turbo' in spec") in " ".join(result.output.split())
    assert fake.api.get("performance.openshift.io/v2", "PerformanceProfile", "dgx") is None
    assert [r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")] == []


@pytest.mark.parametrize(("profile", "fragment"), [
    ("{cpu: {reserved: 0-1, isolated: 2-9, turbo: 1}}", "cpu.turbo: the PerformanceProfile CRD "
     "(performance.openshift.io/v2) has no field 'turbo' in spec.cpu"),
    ("{cpu: {reserved: 0-1, isolated: 2-9}, numa: single}", "numa: the PerformanceProfile CRD "
     "(performance.openshift.io/v2) has an object at spec.numa (fields topologyPolicy), not a value"),
])
def test_render_refuses_a_profile_the_crd_lacks_and_writes_nothing(
        runner, tmp_path: Path, profile: str, fragment: str) -> None:
    from rdma_support import rdma_inventory  # dgxpod with the files validate reads

    extra = f"gpu_pool:\n  tuning:\n    performance_profile: {profile}\n"
    inv = rdma_inventory(tmp_path, extra, w0="", w1="")
    result = runner.invoke(app, ["render", str(inv), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert fragment in " ".join(result.output.split()) and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_dry_run_shows_the_pool_and_writes_nothing(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--dry-run", "--json"))
    assert result.exit_code == 0, result.output
    planned = "\n".join(json.loads(result.stdout)["planned"])
    assert "kind: MachineConfigPool" in planned and "kind: KubeletConfig" in planned
    assert "node-role.kubernetes.io/dgx: ''" in planned
    assert cluster.api.get(MCO, "MachineConfigPool", "dgx") is None
    assert "taints" not in _node(cluster, "worker-0")["spec"]


# --- DCGM diagnostics -------------------------------------------------------------------------

# `dcgmi diag -r 2` as DCGM 4.4 printed it (quoted in NVIDIA/DCGM issue 124), one GPU.
DCGM_REPORT = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.4.2                                          |
| Driver Version Detected   | 580.105.08                                     |
| GPU Device IDs Detected   | 2237                                           |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Pass                                           |
|                           | GPU0: Pass                                     |
+-----  Integration  -------+------------------------------------------------+
| pcie                      | Pass                                           |
|                           | GPU0: Pass                                     |
+---------------------------+------------------------------------------------+
"""


def test_the_dcgm_report_is_read_per_test_and_gpu() -> None:
    from upi.gpu.dcgm import parse

    found = [(r.category, r.test, r.gpu, r.result) for r in parse(DCGM_REPORT.splitlines())]
    assert found == [("Deployment", "software", "0", "Pass"), ("Hardware", "memory", "0", "Pass"),
                     ("Integration", "pcie", "0", "Pass")]
    # The DCGM 3 form, a result for all GPUs on the test's row.
    old = ["|-----  Integration  -------+-----|", "| PCIe                      | Pass - All |",
           "| GPU Memory                | Fail - GPU: 3 |"]
    assert [(r.test, r.gpu, r.result) for r in parse(old)] == [("PCIe", "all", "Pass"),
                                                                 ("GPU Memory", "all", "Fail")]


def test_every_gpu_node_is_diagnosed_at_once_and_the_table_shows_it(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, "gpu_pool:\n  diagnosis_level: 2\n"),
                                         cluster, "--json"))
    assert result.exit_code == 0, result.output
    rows = {n["node"]: n for n in json.loads(result.stdout)["nodes"]}
    assert rows["worker-0"]["diagnosis"] == rows["worker-1"]["diagnosis"] == "level 2: 8 GPUs pass"
    pods = cluster.diag_pods
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods) == [
        "worker-0", "worker-1"]
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["command"] == ["dcgmi", "diag", "-r", "2"]
        assert container["image"].startswith("nvcr.io/nvidia/cloud-native/dcgm:")  # the CSV's dcgm-image
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        assert gpu_taint in pod["spec"]["tolerations"]
    assert "DCGM diagnostics level 2 on 2 node(s) at once: about 2 minutes" in result.stderr
    assert not [p for p in cluster.api.list("v1", "Pod") if p["metadata"]["name"].startswith("upi-gpu-dcgm")]


def test_a_gpu_failing_a_dcgm_test_is_exit_1_naming_node_gpu_and_test(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, diag_fails=(3, "memory_bandwidth"))
    inv = gpu_inventory(tmp_path, "gpu_pool:\n  diagnosis_level: 3\n")
    fake, result = gpu_once(runner, tmp_path, nodes, inv, timeout="1")
    assert result.exit_code == 1, result.output
    assert ("GPU step 'diagnose' failed at Node worker-1 GPU 3: DCGM level 3 test 'memory_bandwidth' "
            "(Stress) failed") in result.output
    assert "DCGM diagnostics level 3 on 2 node(s) at once: about 30 minutes" in result.output
    assert "GPU 3 memory_bandwidth Fail" in result.output  # worker-1's row in the table
    assert "level 3: 8 GPUs pass" in result.output  # worker-0's


def test_diagnosis_level_0_runs_no_dcgm_pod(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path, "gpu_pool:\n  diagnosis_level: 0\n"),
                                         cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert cluster.diag_pods == []
    assert {n["diagnosis"] for n in json.loads(result.stdout)["nodes"]} == {"skipped"}


def _renderable(tmp_path: Path, extra: str) -> Path:
    """The GPU inventory with the files render reads beside it."""
    from conftest import inventory_path

    inv = gpu_inventory(tmp_path, extra)
    for f in ("pull-secret.json", "id_rsa.pub"):
        (tmp_path / f).write_text(inventory_path("dgxpod").with_name(f).read_text())
    return inv


def test_render_writes_the_pool_and_its_tuning_valid_against_the_real_crds(runner, tmp_path: Path) -> None:
    import yaml
    from kube_schema import schema_errors

    inv = _renderable(tmp_path, POOL.replace("  metrics: false\n", ""))
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inv), "-o", str(out)])
    assert result.exit_code == 0, result.output
    pool = sorted(p.name for p in (out / "gpu").glob("0*.yaml"))
    assert pool == ["00-pool-machineconfigpool.yaml", "01-pool-performanceprofile.yaml"]
    for name in pool:
        obj = yaml.safe_load((out / "gpu" / name).read_text())
        assert schema_errors(obj) == [], name
    # The KubeletConfig form, with hugepages as a MachineConfig of the pool's role.
    inv = _renderable(tmp_path, "gpu_pool:\n  tuning:\n    hugepages: [{size: 1G, count: 8}]\n")
    out = tmp_path / "out2"
    assert runner.invoke(app, ["render", str(inv), "-o", str(out)]).exit_code == 0
    pool = sorted(p.name for p in (out / "gpu").glob("0*.yaml"))
    assert pool == ["00-pool-machineconfigpool.yaml", "01-pool-machineconfig.yaml",
                    "02-pool-kubeletconfig.yaml"]
    mc = yaml.safe_load((out / "gpu" / "01-pool-machineconfig.yaml").read_text())
    assert mc["spec"]["kernelArguments"] == ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=8"]
    assert all(schema_errors(yaml.safe_load((out / "gpu" / n).read_text())) == [] for n in pool)


def test_max_unavailable_reboots_that_many_nodes_at_once(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path, "gpu_pool:\n  max_unavailable: 100%\n")
    result = runner.invoke(app, gpu_args(inv, cluster))
    assert result.exit_code == 0, result.output
    mcp = cluster.api.get(MCO, "MachineConfigPool", "dgx")
    assert mcp is not None and mcp["spec"]["maxUnavailable"] == "100%"
    assert cluster.mco.most_updating == 2 and sorted(cluster.mco.reboots) == ["worker-0", "worker-1"]


def test_a_kubelet_config_the_mco_refuses_is_exit_1_with_its_message(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    refused = "Error: could not find any MachineConfigPool set for KubeletConfig dgx-kubelet"
    fake.mco.kubelet_fails["dgx-kubelet"] = refused
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert ("GPU step 'GPU pool' failed at KubeletConfig dgx-kubelet: the machine config operator "
            f"refused it: {refused}") in result.output
    assert fake.mco.reboots == []
