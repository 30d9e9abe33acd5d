"""`upi render` writes gpu/ and the inventory's GPU keys are validated like every other key.

Every rendered object of a kind with a CRD is checked against the real schema
kept in tests/data/ (tests/kube_schema.py); the NFD worker config is run
through the fake NFD's labeller to prove it yields the `pci-10de` label.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path
from fake_gpu import nfd_labels
from kube_schema import csv, has_schema, schema_errors

from upi.cli import app
from upi.gpu.objects import cluster_policy
from upi.inventory import load_inventory

W0 = "install_disk: /dev/nvme0n1, gpu: true}\n  - {name: worker-1"
H100 = [{"class": "0302", "vendor": "10de", "device": "2330"}] * 8


def _inventory(tmp_path: Path, extra: str = "", node_keys: str = "", name: str = "dgxpod") -> Path:
    text = inventory_path(name).read_text()
    if node_keys:
        text = text.replace(W0, W0.replace("gpu: true}", f"gpu: true, {node_keys}}}"))
    inv = tmp_path / "inv.yaml"
    inv.write_text(text + extra)
    for f in ("pull-secret.json", "id_rsa.pub"):
        (tmp_path / f).write_text(inventory_path(name).with_name(f).read_text())
    return inv


def _rendered(runner, tmp_path: Path, inv: Path) -> dict[str, dict]:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inv), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((out / "gpu").glob("*.yaml"))}


def test_gpu_objects_pass_the_real_crd_schemas(runner, tmp_path: Path) -> None:
    objs = _rendered(runner, tmp_path, _inventory(tmp_path))
    assert sorted(objs) == ["00-pool-machineconfigpool.yaml", "01-pool-kubeletconfig.yaml",
                            "10-nfd-namespace.yaml", "11-nfd-operatorgroup.yaml", "12-nfd-subscription.yaml",
                            "13-nfd-instance.yaml", "20-gpu-operator-namespace.yaml",
                            "21-gpu-operator-operatorgroup.yaml"]
    for name, obj in objs.items():
        if obj["kind"] == "Namespace":
            assert obj["metadata"]["labels"] == {"openshift.io/cluster-monitoring": "true"}, name
        else:
            assert has_schema(obj["apiVersion"], obj["kind"]), name
            assert schema_errors(obj) == [], name


def test_nfd_instance_labels_nvidia_gpus_pci_10de(runner, tmp_path: Path) -> None:
    nfd = _rendered(runner, tmp_path, _inventory(tmp_path))["13-nfd-instance.yaml"]
    labels = nfd_labels(nfd["spec"]["workerConfig"]["configData"], H100)
    assert labels == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert nfd["spec"]["operand"]["image"] == (
        "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.16")


def test_subscriptions_follow_the_pinned_channels_and_catalogs(runner, tmp_path: Path) -> None:
    extra = ("gpu:\n  operator_channel: v26.3\n  nfd_channel: stable-4.16\n"
             "  catalog_sources: {nfd: mirror-redhat, gpu_operator: mirror-certified, namespace: mirrors}\n")
    objs = _rendered(runner, tmp_path, _inventory(tmp_path, extra))
    nfd, gpu = objs["12-nfd-subscription.yaml"]["spec"], objs["22-gpu-operator-subscription.yaml"]["spec"]
    assert (nfd["channel"], nfd["source"]) == ("stable-4.16", "mirror-redhat")
    assert nfd["sourceNamespace"] == "mirrors"
    assert (gpu["channel"], gpu["source"]) == ("v26.3", "mirror-certified")
    assert gpu["installPlanApproval"] == "Manual"
    assert schema_errors(objs["22-gpu-operator-subscription.yaml"]) == []


def test_no_gpu_nodes_no_gpu_dir(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("compact")), "-o", str(out)]).exit_code == 0
    assert not (out / "gpu").exists()
    assert "gpu/" not in (out / "manifest.json").read_text()


def test_cluster_policy_overrides_merge_onto_the_csv_example(tmp_path: Path) -> None:
    extra = "gpu:\n  cluster_policy:\n    mig: {strategy: mixed}\n    driver.rdma.enabled: true\n"
    inv = load_inventory(_inventory(tmp_path, extra))
    examples = json.loads(csv("gpu-operator-certified")["metadata"]["annotations"]["alm-examples"])
    example = next(e for e in examples if e["kind"] == "ClusterPolicy")
    policy = cluster_policy(inv, example)
    assert policy["spec"]["mig"] == {"strategy": "mixed"}
    assert policy["spec"]["driver"]["rdma"] == {"enabled": True}
    assert policy["spec"]["driver"]["kernelModuleType"] == example["spec"]["driver"]["kernelModuleType"]
    assert schema_errors(policy) == []


def test_a_bad_override_fails_the_real_schema(tmp_path: Path) -> None:
    inv = load_inventory(_inventory(tmp_path, "gpu:\n  cluster_policy: {mig.strategy: sometimes}\n"))
    example = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "spec": {}}
    assert any("'sometimes' is not one of" in e for e in schema_errors(cluster_policy(inv, example)))


def test_gpu_keys_validate(runner, tmp_path: Path) -> None:
    extra = "gpu:\n  validation: {success_log: all good}\n"
    inv = _inventory(tmp_path, extra, "gpus: 8, mig_config: all-1g.10gb")
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 0, result.output
    loaded = load_inventory(inv)
    assert (loaded.nodes[4].gpus, loaded.nodes[4].mig_config) == (8, "all-1g.10gb")
    assert loaded.gpu is not None and loaded.gpu.validation.success_log == "all good"


BROKEN = [
    ("gpus: 0", "", 36, "nodes[4].gpus", "0 is out of range: it must be at least 1"),
    ("gpus: eight", "", 36, "nodes[4].gpus", "must be a whole number"),
    ("mig_config: All_1g", "", 36, "nodes[4].mig_config", "is not a Kubernetes name"),
    ("", "gpu:\n  operator_chanel: v26.3\n", 40, "gpu.operator_chanel", "unknown key"),
    ("", "gpu:\n  catalog_sources: {gpu_operator: Certified}\n", 40, "gpu.catalog_sources.gpu_operator",
     "is not a Kubernetes name"),
    ("", "gpu:\n  validation: {image: 'bad image'}\n", 40, "gpu.validation.image",
     "is not a container image reference"),
    ("", "gpu:\n  validation: {success_log: ''}\n", 40, "gpu.validation.success_log", "must not be empty"),
    ("", "gpu:\n  cluster_policy: [mig]\n", 40, "gpu.cluster_policy", "must be a mapping"),
    ("", "gpu:\n  cluster_policy: {mig: single, mig.strategy: mixed}\n", 40, "gpu.cluster_policy",
     "which is not a mapping"),
    ("", "gpu:\n  cluster_policy: {driver..rdma: true}\n", 40, "gpu.cluster_policy",
     "is not a ClusterPolicy spec field"),
]


@pytest.mark.parametrize(("node_keys", "extra", "line", "field", "fragment"), BROKEN)
def test_broken_gpu_keys_exit_2_naming_file_line_field(runner, tmp_path: Path, node_keys: str, extra: str,
                                                       line: int, field: str, fragment: str) -> None:
    inv = _inventory(tmp_path, extra, node_keys)
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2, result.output
    assert f"{inv}:{line}: {field}: " in result.output
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_gpus_without_gpu_true_is_refused(runner, tmp_path: Path) -> None:
    inv = _inventory(tmp_path)
    inv.write_text(inv.read_text().replace('ip: 10.33.3.51}', 'ip: 10.33.3.51, gpus: 2}'))
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2
    assert f"{inv}:33: nodes[2].gpus: master-1 sets gpus but not gpu: true (add gpu: true)" in result.output
