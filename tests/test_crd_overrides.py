"""An operator object's overrides in the inventory are checked against its CRD at validate.

`gpu.cluster_policy`, `network_operator.nic_cluster_policy` and
`gpu_pool.tuning.performance_profile` go through one check
(upi/inventory/crdfields.py) against the field names upi carries
(tests/carried_facts.py): a field the CRD lacks, or a value of another shape
(a value, a list, an object) than the CRD's, is exit 2 naming the file, the
line, the field and the CRD, before anything is written or applied.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube_schema import csv, schema_errors
from rdma_support import rdma_inventory

from upi.cli import app
from upi.gpu.objects import cluster_policy
from upi.inventory import load_inventory

POLICY = "the ClusterPolicy CRD (nvidia.com/v1, gpu-operator-certified.v26.7.0)"
NIC = "the NicClusterPolicy CRD (mellanox.com/v1alpha1, nvidia-network-operator.v26.4.1)"


def _refused(runner, inv: Path, args: list[str], where: str) -> str:
    """The one problem line of a refused inventory, which names the file and the line of `where`."""
    result = runner.invoke(app, [*args, str(inv)] if args[0] == "validate" else args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    key = where.rsplit(".", 1)[1] + ":"
    line = next(n for n, text in enumerate(inv.read_text().splitlines(), 1) if text.strip().startswith(key))
    assert lines[0].startswith(f"upi: error: {inv}:{line}: {where}: "), result.output
    return " ".join(lines[0].split())


@pytest.mark.parametrize(("policy", "fragment"), [
    ("{bogus: 1}", f"bogus: {POLICY} has no field 'bogus' in spec"),
    ("{driver.rdma.enabled: true, driver.rdma.bogus: 1}",
     f"driver.rdma.bogus: {POLICY} has no field 'bogus' in spec.driver.rdma"),
    ("{driver: {rdma: {enabled: true, bogus: 1}}}",
     f"driver.rdma.bogus: {POLICY} has no field 'bogus' in spec.driver.rdma"),
    ("{driver: 5}", f"driver: {POLICY} has an object at spec.driver (fields args, certConfig, enabled, env, "
     "hostNetwork, ...), not a value"),
    ("{mig: mixed}", f"mig: {POLICY} has an object at spec.mig (fields strategy), not a value"),
    ("{driver.rdma: ~}", f"driver.rdma: {POLICY} has an object at spec.driver.rdma (fields enabled, "
     "useHostMofed), not null"),
    ("{driver: [enabled]}", f"driver: {POLICY} has an object at spec.driver"),
    ("{toolkit.env: [{name: A, value: b}, {name: B, vaule: c}]}",
     f"toolkit.env[1].vaule: {POLICY} has no field 'vaule' in spec.toolkit.env[1]"),
    ("{toolkit.env: {name: A, value: b}}",
     f"toolkit.env: {POLICY} has a list at spec.toolkit.env (of objects with fields name, value), "
     "not an object"),
    ("{toolkit.env: [A=b]}",
     f"toolkit.env[0]: {POLICY} has an object at spec.toolkit.env[0] (fields name, value), not a value"),
    ("{driver.args: --x}", f"driver.args: {POLICY} has a list at spec.driver.args (of values), not a value"),
    ("{driver.version: [580]}", f"driver.version: {POLICY} has a value at spec.driver.version, not a list"),
    ("{daemonsets.labels: team}",
     f"daemonsets.labels: {POLICY} has a map at spec.daemonsets.labels (any keys), not a value"),
    ("{daemonsets.labels: {example.com/team: {name: ml}}}", f"daemonsets.labels.example.com/team: {POLICY} "
     "has a value at spec.daemonsets.labels.example.com/team, not an object"),
])
def test_a_cluster_policy_override_the_crd_has_no_place_for_is_refused(
        runner, tmp_path: Path, policy: str, fragment: str) -> None:
    inv = rdma_inventory(tmp_path, f"gpu:\n  cluster_policy: {policy}\n", w0="", w1="")
    assert fragment in _refused(runner, inv, ["validate"], "gpu.cluster_policy")


def test_a_cluster_policy_written_in_blocks_is_refused_at_its_own_line(runner, tmp_path: Path) -> None:
    extra = ("gpu:\n  operator_namespace: nvidia-gpu-operator\n  cluster_policy:\n"
             "    mig.strategy: mixed\n    dcgmExporter:\n"
             "      serviceMonitor: {enabled: true, intervall: 15s}\n")
    inv = rdma_inventory(tmp_path, extra, w0="", w1="")
    line = _refused(runner, inv, ["validate"], "gpu.cluster_policy")
    assert (f"dcgmExporter.serviceMonitor.intervall: {POLICY} has no field 'intervall' in "
            "spec.dcgmExporter.serviceMonitor") in line


def test_render_refuses_a_cluster_policy_the_crd_lacks_and_writes_nothing(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path, "gpu:\n  cluster_policy: {devicePlugin.confg: {name: x}}\n", w0="", w1="")
    out = tmp_path / "out"
    line = _refused(runner, inv, ["render", str(inv), "-o", str(out)], "gpu.cluster_policy")
    assert f"devicePlugin.confg: {POLICY} has no field 'confg' in spec.devicePlugin" in line
    assert not out.exists()


def test_cluster_policy_overrides_the_crd_has_pass(runner, tmp_path: Path) -> None:
    # Deep dotted keys, a list of objects, a list of values, maps (labels, resource limits) whose
    # keys the CRD leaves open, and an int-or-string value: the shapes the CRD has, all accepted.
    extra = ("gpu:\n  cluster_policy:\n"
             "    driver.rdma.enabled: true\n    driver.rdma.useHostMofed: true\n"
             "    driver.upgradePolicy.maxUnavailable: 25%\n    driver.args: [--a, --b]\n"
             "    toolkit.env: [{name: CONTAINERD_RUNTIME_CLASS, value: nvidia}]\n"
             "    daemonsets: {labels: {example.com/team: ml, any-key: x},\n"
             "                 tolerations: [{key: a, operator: Exists}]}\n"
             "    devicePlugin.resources.limits: {cpu: 500m, memory: 1Gi}\n"
             "    mig: {strategy: mixed}\n")
    result = runner.invoke(app, ["validate", str(rdma_inventory(tmp_path, extra, w0="", w1=""))])
    assert result.exit_code == 0, result.output


def test_a_dotted_key_keeps_its_dots_from_a_map_on(tmp_path: Path) -> None:
    # Label keys and resource names hold dots: below a map (labels, resources.limits) the rest of a
    # dotted key is one key, and the ClusterPolicy upi applies passes the real CRD's schema.
    extra = ("gpu:\n  cluster_policy:\n    daemonsets.labels.example.com/team: ml\n"
             "    daemonsets.annotations: {example.com/owner: gpu-team}\n"
             "    devicePlugin.resources.limits.nvidia.com/gpu: 1\n")
    inv = load_inventory(rdma_inventory(tmp_path, extra, w0="", w1=""))
    examples = json.loads(csv("gpu-operator-certified")["metadata"]["annotations"]["alm-examples"])
    policy = cluster_policy(inv, next(e for e in examples if e["kind"] == "ClusterPolicy"))
    assert policy["spec"]["daemonsets"]["labels"] == {"example.com/team": "ml"}
    assert policy["spec"]["daemonsets"]["annotations"] == {"example.com/owner": "gpu-team"}
    assert policy["spec"]["devicePlugin"]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert schema_errors(policy) == []


@pytest.mark.parametrize(("policy", "fragment"), [
    # A list where the CRD has an object, and an object where it has a list: the API server refuses both.
    ("{ofedDriver: [{version: a}]}", f"ofedDriver: {NIC} has an object at spec.ofedDriver"),
    ("{tolerations: {key: a}}", f"tolerations: {NIC} has a list at spec.tolerations (of objects with fields "
     "effect, key, operator, tolerationSeconds, value), not an object"),
    ("{tolerations: 5}", f"tolerations: {NIC} has a list at spec.tolerations"),
    ("{ofedDriver..version: a}", "'ofedDriver..version' is not a NicClusterPolicy spec field"),
])
def test_a_nic_cluster_policy_override_of_another_shape_than_the_crds_is_refused(
        runner, tmp_path: Path, policy: str, fragment: str) -> None:
    inv = rdma_inventory(tmp_path, f"network_operator:\n  nic_cluster_policy: {policy}\n")
    assert fragment in _refused(runner, inv, ["validate"], "network_operator.nic_cluster_policy")


def test_a_performance_profile_of_another_shape_than_the_crds_is_refused(runner, tmp_path: Path) -> None:
    profile = "{cpu: {reserved: 0-1, isolated: 2-9}, additionalKernelArgs: nosmt}"
    extra = f"gpu_pool:\n  tuning:\n    performance_profile: {profile}\n"
    inv = rdma_inventory(tmp_path, extra, w0="", w1="")
    assert ("additionalKernelArgs: the PerformanceProfile CRD (performance.openshift.io/v2) has a list at "
            "spec.additionalKernelArgs (of values), not a value") in _refused(
                runner, inv, ["validate"], "gpu_pool.tuning.performance_profile")
