"""`upi render` writes the Network Operator's objects under gpu/ when a DGX has `rdma:`.

Every rendered object of a kind with a CRD is checked against the real schema
kept in tests/data/ (tests/kube_schema.py, jsonschema); the NicClusterPolicy
starts from the real CSV's alm-examples one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kube_schema import csv, has_schema, schema_errors
from rdma_support import rdma_inventory

from upi.cli import app

NETWORK_FILES = ["30-network-operator-namespace.yaml", "31-network-operator-operatorgroup.yaml",
                 "32-network-operator-subscription.yaml", "33-nic-cluster-policy.yaml"]
TEST_FILES = ["35-rdma-test-namespace.yaml", "36-rdma-test-serviceaccount.yaml",
              "37-rdma-test-scc-rolebinding.yaml"]


def _rendered(runner, tmp_path: Path, inv: Path) -> dict[str, dict]:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inv), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((out / "gpu").glob("*.yaml"))}


def _plugin_config(policy: dict) -> dict:
    return json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])


def _affinity(policy: dict) -> list[str]:
    required = policy["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return list(required["nodeSelectorTerms"][0]["matchExpressions"][0]["values"])


def test_infiniband_objects_pass_the_real_crd_schemas(runner, tmp_path: Path) -> None:
    objs = _rendered(runner, tmp_path, rdma_inventory(tmp_path))
    assert [n for n in objs if n.startswith("3")] == [*NETWORK_FILES, "34-ipoibnetwork-rdma-ipoib.yaml",
                                                      *TEST_FILES]
    for name, obj in objs.items():
        if has_schema(obj["apiVersion"], obj["kind"]):
            assert schema_errors(obj) == [], name
    policy = objs["33-nic-cluster-policy.yaml"]
    notes = csv("nvidia-network-operator")["metadata"]["annotations"]
    example = next(e for e in json.loads(notes["alm-examples"]) if e["kind"] == "NicClusterPolicy")
    # The CSV's NIC driver (the DOCA driver in ofedDriver) as it stands; the plugin's selectors are upi's.
    assert policy["spec"]["ofedDriver"] == example["spec"]["ofedDriver"]
    entry = _plugin_config(policy)["configList"][0]
    assert entry["resourceName"] == "rdma_shared_device_a"
    names = entry["selectors"]["ifNames"]
    assert names[:2] == ["ibp24s0", "ibp64s0"] and len(names) == 8
    # The driver runs on the RDMA nodes only: a ConnectX port elsewhere may carry a node's traffic.
    assert _affinity(policy) == ["worker-0", "worker-1"]
    assert policy["spec"]["secondaryNetwork"]["ipoib"]["image"] == "ipoib-cni"
    net = objs["34-ipoibnetwork-rdma-ipoib.yaml"]
    assert net["spec"]["master"] == "ibp24s0"
    assert json.loads(net["spec"]["ipam"]) == {"type": "whereabouts", "range": "192.168.100.0/24"}
    sub = objs["32-network-operator-subscription.yaml"]["spec"]
    assert (sub["name"], sub["channel"], sub["source"], sub["installPlanApproval"]) == (
        "nvidia-network-operator", "stable", "certified-operators", "Manual")


def test_roce_by_pci_address_gets_a_macvlan_network_and_named_ports(runner, tmp_path: Path) -> None:
    w0 = 'rdma: {interfaces: ["0000:18:00.1", ens2f0np0], link_type: ethernet, node_interface: eno1}'
    extra = ("network_operator:\n  channel: v26.4\n  resource_name: roce\n"
             "  bandwidth: {namespace: training}\n"  # Multus: the test pods in the networks' namespace
             "  secondary_network:\n    namespace: training\n"
             "    ethernet: {name: roce-net, cidr: 10.9.0.0/16, exclude: [10.9.0.0/24], mtu: 9000}\n"
             "  nic_cluster_policy:\n    ofedDriver.version: doca3.4.1-26.04-1.1.0.0-1\n"
             "    ofedDriver.env: [{name: UNLOAD_STORAGE_MODULES, value: 'true'}]\n")
    objs = _rendered(runner, tmp_path, rdma_inventory(tmp_path, extra, w0=w0, w1=w0))
    # The network's own namespace is created first (the operator writes its attachment there).
    assert [n for n in objs if n.startswith("3")] == [*NETWORK_FILES, "34-fabric-namespace-training.yaml",
                                                      "34-macvlannetwork-roce-net.yaml",
                                                      *TEST_FILES]
    for name, obj in objs.items():
        if has_schema(obj["apiVersion"], obj["kind"]):
            assert schema_errors(obj) == [], name
    policy = objs["33-nic-cluster-policy.yaml"]
    entry = _plugin_config(policy)["configList"][0]
    assert entry["resourceName"] == "roce"
    pci = ["enp24s0", "enp24s0f1", "enp24s0np0", "enp24s0f1np0"]  # 0000:18:00.1 by udev's path policy
    assert entry["selectors"]["ifNames"] == [*pci, "ens2f0np0"]
    assert policy["spec"]["ofedDriver"]["env"] == [{"name": "UNLOAD_STORAGE_MODULES", "value": "true"}]
    assert "ipoib" not in (policy["spec"].get("secondaryNetwork") or {})
    assert _affinity(policy) == ["worker-0", "worker-1"]
    net = objs["34-macvlannetwork-roce-net.yaml"]["spec"]
    assert (net["master"], net["mode"], net["mtu"], net["networkNamespace"]) == (
        "ens2f0np0", "bridge", 9000, "training")
    assert json.loads(net["ipam"])["exclude"] == ["10.9.0.0/24"]
    assert objs["32-network-operator-subscription.yaml"]["spec"]["channel"] == "v26.4"


def test_a_custom_pool_taint_is_tolerated_by_the_nic_driver(runner, tmp_path: Path) -> None:
    extra = "gpu_pool:\n  taint: {key: example.com/dgx, effect: NoExecute}\n"
    policy = _rendered(runner, tmp_path, rdma_inventory(tmp_path, extra))["33-nic-cluster-policy.yaml"]
    keys = [(t["key"], t["effect"]) for t in policy["spec"]["tolerations"]]
    assert keys == [("nvidia.com/gpu", "NoSchedule"), ("example.com/dgx", "NoExecute")]


def test_without_rdma_nothing_of_the_network_operator_is_rendered(runner, tmp_path: Path) -> None:
    objs = _rendered(runner, tmp_path, rdma_inventory(tmp_path, w0="", w1=""))
    assert not [n for n in objs if n.startswith("3")]


def test_nfd_reports_the_fabric_nics_the_nic_driver_selects_by(runner, tmp_path: Path) -> None:
    from fake_gpu import MELLANOX_PCI, nfd_labels

    # A ConnectX port in InfiniBand mode is PCI class 0207: NFD must report it for pci-15b3.present,
    # the label the Network Operator's driver DaemonSet selects nodes by.
    nfd = _rendered(runner, tmp_path, rdma_inventory(tmp_path))["13-nfd-instance.yaml"]
    labels = nfd_labels(nfd["spec"]["workerConfig"]["configData"], [MELLANOX_PCI])
    assert labels == {"feature.node.kubernetes.io/pci-15b3.present": "true"}
    plain_inv = rdma_inventory(tmp_path, w0="", w1="")
    plain = _rendered(runner, tmp_path / "plain", plain_inv)["13-nfd-instance.yaml"]
    assert nfd_labels(plain["spec"]["workerConfig"]["configData"], [MELLANOX_PCI]) == {}


def test_rdma_nodes_put_the_network_operator_in_the_mirror(tmp_path: Path) -> None:
    from upi.inventory import load_inventory
    from upi.mirror.imageset import NETWORK_PACKAGE, operator_packages

    plain = load_inventory(rdma_inventory(tmp_path, w0="", w1=""), check_files=False)
    assert NETWORK_PACKAGE not in [p for _, p, _ in operator_packages(plain)]
    (tmp_path / "pinned").mkdir()
    pinned = load_inventory(rdma_inventory(tmp_path / "pinned", "network_operator:\n  channel: v26.4\n"),
                            check_files=False)
    assert [(p, c) for _, p, c in operator_packages(pinned) if p == NETWORK_PACKAGE] == [
        (NETWORK_PACKAGE, "v26.4")]


def test_two_fabrics_get_an_ipoib_and_a_macvlan_network(runner, tmp_path: Path) -> None:
    roce = "rdma: {interfaces: [ens1f0np0, ens1f1np1], link_type: ethernet, node_interface: eno1}"
    objs = _rendered(runner, tmp_path, rdma_inventory(tmp_path, w1=roce))
    assert [n for n in objs if n.startswith("34-")] == ["34-ipoibnetwork-rdma-ipoib.yaml",
                                                        "34-macvlannetwork-rdma-macvlan.yaml"]
    assert objs["34-ipoibnetwork-rdma-ipoib.yaml"]["spec"]["master"] == "ibp24s0"
    assert objs["34-macvlannetwork-rdma-macvlan.yaml"]["spec"]["master"] == "ens1f0np0"
    names = _plugin_config(objs["33-nic-cluster-policy.yaml"])["configList"][0]["selectors"]["ifNames"]
    assert names[-2:] == ["ens1f0np0", "ens1f1np1"] and len(names) == 10
    for obj in objs.values():
        if has_schema(obj["apiVersion"], obj["kind"]):
            assert schema_errors(obj) == []


def test_render_with_an_override_the_crd_lacks_writes_nothing(runner, tmp_path: Path) -> None:
    extra = "network_operator:\n  nic_cluster_policy: {rdmaSharedDevicePlugin.selectors: {}}\n"
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(rdma_inventory(tmp_path, extra)), "-o", str(out)])
    assert result.exit_code == 2
    assert "rdmaSharedDevicePlugin.selectors: the NicClusterPolicy CRD" in " ".join(result.output.split())
    assert "Traceback" not in result.output and not out.exists()


def test_the_verification_plan_comes_from_the_inventory(tmp_path: Path) -> None:
    from upi.gpu.rdma import verify_plan
    from upi.inventory import load_inventory

    roce = "rdma: {interfaces: [ens1f0np0], link_type: ethernet, node_interface: eno1}"
    extra = ("network_operator:\n  resource_name: fabric\n  bandwidth: {image: example.com/perftest:1, "
             "min_gbps: 180, namespace: rdma-bw}\n  secondary_network: {namespace: rdma-bw}\n"
             "gpu_pool:\n  taint: {key: example.com/dgx, effect: NoSchedule}\n")
    plan = verify_plan(load_inventory(rdma_inventory(tmp_path, extra, w1=roce), check_files=False))
    assert [(t.node, t.fabric, t.resource, t.network) for t in plan.targets] == [
        ("worker-0", "infiniband", "rdma/fabric", "rdma-bw/rdma-ipoib"),
        ("worker-1", "ethernet", "rdma/fabric", "rdma-bw/rdma-macvlan")]
    assert (plan.namespace, plan.image, plan.min_gbps) == ("rdma-bw", "example.com/perftest:1", 180.0)
    assert plan.service_account == "upi-rdma-bandwidth"
    assert (plan.gpu_namespace, plan.network_namespace) == ("nvidia-gpu-operator", "nvidia-network-operator")
    assert {"key": "example.com/dgx", "operator": "Exists", "effect": "NoSchedule"} in plan.tolerations


def test_the_bandwidth_image_is_among_the_images_to_mirror(tmp_path: Path) -> None:
    from upi.inventory import load_inventory
    from upi.mirror.imageset import additional_images

    inv = load_inventory(rdma_inventory(tmp_path, "network_operator:\n  bandwidth: {image: "
                                                  "example.com/perftest:cuda12}\n"), check_files=False)
    assert "example.com/perftest:cuda12" in [n.image for n in additional_images(inv)]
    (tmp_path / "plain").mkdir()
    plain = load_inventory(rdma_inventory(tmp_path / "plain", w0="", w1=""), check_files=False)
    assert all("perftest" not in n.image for n in additional_images(plain))


def test_the_bandwidth_test_account_is_bound_to_the_privileged_scc_in_its_own_namespace(runner,
                                                                                      tmp_path: Path) -> None:
    extra = "network_operator:\n  bandwidth: {namespace: rdma-bw}\n"
    objs = _rendered(runner, tmp_path, rdma_inventory(tmp_path, extra))
    ns, account, binding = (objs[name] for name in TEST_FILES)
    assert (ns["kind"], ns["metadata"]["name"]) == ("Namespace", "rdma-bw")
    assert (account["kind"], account["metadata"]["namespace"], account["metadata"]["name"]) == (
        "ServiceAccount", "rdma-bw", "upi-rdma-bandwidth")
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "rdma-bw"
    # OpenShift's per-SCC ClusterRole, bound in the namespace only: no cluster-wide grant.
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "system:openshift:scc:privileged"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "upi-rdma-bandwidth",
                                    "namespace": "rdma-bw"}]


@pytest.mark.parametrize("ns", ["default", "openshift-config", "kube-system"])
def test_validate_refuses_a_bandwidth_namespace_where_no_scc_can_be_granted(runner, tmp_path: Path,
                                                                           ns: str) -> None:
    inv = rdma_inventory(tmp_path, f"network_operator:\n  bandwidth:\n    namespace: {ns}\n")
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2, result.output
    assert "network_operator.bandwidth.namespace" in result.output and f"'{ns}'" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("networks", "tests", "refused"), [
    ("fabric", None, True),  # the test pods in upi-rdma-test
    ("fabric", "rdma-bw", True),
    ("fabric", "fabric", False),  # the pods in the networks' own namespace
    ("default", "rdma-bw", False),  # Multus global namespaces
    ("openshift-multus", None, False),
    ("openshift-sriov-network-operator", "rdma-bw", False),
])
def test_validate_refuses_fabric_networks_the_test_pods_cannot_attach(
        runner, tmp_path: Path, networks: str, tests: str | None, refused: bool) -> None:
    extra = f"network_operator:\n  secondary_network: {{namespace: {networks}}}\n"
    if tests is not None:
        extra += f"  bandwidth: {{namespace: {tests}}}\n"
    result = runner.invoke(app, ["validate", str(rdma_inventory(tmp_path, extra))])
    assert "Traceback" not in result.output
    if not refused:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "network_operator.secondary_network.namespace" in text
    assert f"the bandwidth test pods in '{tests or 'upi-rdma-test'}'" in text
    assert f"network_operator.bandwidth.namespace: {networks}" in text


def test_a_fabric_namespace_of_its_own_is_rendered_before_its_network(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path, "network_operator:\n  secondary_network: {namespace: fabric}\n"
                                   "  bandwidth: {namespace: fabric}\n")
    objs = _rendered(runner, tmp_path, inv)
    names = [n for n in objs if n.startswith("34-")]
    assert names == ["34-fabric-namespace-fabric.yaml", "34-ipoibnetwork-rdma-ipoib.yaml"]
    assert objs[names[0]]["kind"] == "Namespace" and objs[names[0]]["metadata"]["name"] == "fabric"
    # default and openshift-multus exist on every cluster: nothing rendered for them (upi would
    # otherwise label OpenShift's own namespace).
    (tmp_path / "plain").mkdir()
    plain = _rendered(runner, tmp_path / "plain", rdma_inventory(tmp_path / "plain"))
    assert not [n for n in plain if n.startswith("34-fabric-namespace")]
    (tmp_path / "multus").mkdir()
    multus = _rendered(runner, tmp_path / "multus", rdma_inventory(
        tmp_path / "multus", "network_operator:\n  secondary_network: {namespace: openshift-multus}\n"))
    assert not [n for n in multus if n.startswith("34-fabric-namespace")]
    # The test's namespace and the networks' are one object, rendered the same in both files.
    assert objs["34-fabric-namespace-fabric.yaml"] == objs["35-rdma-test-namespace.yaml"]
