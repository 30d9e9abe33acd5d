"""The inventory's `rdma:` (per DGX) and `network_operator:` (cluster) sections: validate and schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rdma_support import rdma_inventory

from upi.cli import app

ISSUE = "Node NotReady in a loop (network-operator issue 2176)"


def _validate(runner, inv: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", str(inv)])
    return result.exit_code, result.output


def test_rdma_inventory_validates(runner, tmp_path: Path) -> None:
    code, out = _validate(runner, rdma_inventory(tmp_path))
    assert code == 0, out
    assert "Traceback" not in out


def test_fabric_port_that_is_the_node_interface_is_refused(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path, w0="rdma: {interfaces: [ibp24s0, eno1], node_interface: eno1}")
    code, out = _validate(runner, inv)
    assert code == 2
    line = next(x for x in out.splitlines() if "rdma.interfaces[1]" in x)
    # File, line, field, the port, the key that makes it the node's own, and 2176's failure mode.
    assert f"{inv}:37: nodes[4].rdma.interfaces[1]: eno1 is also worker-0's rdma.node_interface" in line
    assert ISSUE in line and "Traceback" not in out


def test_fabric_port_in_the_nodes_bond_is_refused(runner, tmp_path: Path) -> None:
    extra_net = ("network: {bond: {name: bond0, members: [ens1f0np0, ens1f1np1]}}, "
                 "rdma: {interfaces: [ens2f0np0, ens1f1np1], link_type: ethernet}")
    code, out = _validate(runner, rdma_inventory(tmp_path, w1=extra_net))
    assert code == 2
    assert "nodes[5].rdma.interfaces[1]: ens1f1np1 is also worker-1's network.bond.members[1]" in out
    assert ISSUE in out


def test_fabric_port_that_boots_the_node_is_refused_in_either_pci_spelling(runner, tmp_path: Path) -> None:
    rdma = ('rdma: {interfaces: ["18:00.0", ibp64s0], node_interface: eno1, '
            'provisioning_interface: "0000:18:00.0"}')
    code, out = _validate(runner, rdma_inventory(tmp_path, w0=rdma))
    assert code == 2
    assert "nodes[4].rdma.interfaces[0]: 0000:18:00.0 is also worker-0's rdma.provisioning_interface" in out


def test_rdma_on_a_node_without_gpus_is_refused(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path)
    text = inv.read_text()
    inv.write_text(text.replace("nvme0n1, gpu: true, gpus: 8,\n     rdma", "nvme0n1,\n     rdma", 1))
    code, out = _validate(runner, inv)
    assert code == 2
    assert "nodes[4].rdma: worker-0 sets rdma but not gpu: true" in out


def test_a_bad_interface_and_a_duplicate_are_refused(runner, tmp_path: Path) -> None:
    bad = "rdma: {interfaces: [ib/0], node_interface: eno1}"
    code, out = _validate(runner, rdma_inventory(tmp_path, w0=bad))
    assert code == 2 and "nodes[4].rdma.interfaces[0]" in out and "neither a netdev name" in out
    code, out = _validate(runner, rdma_inventory(tmp_path, w0="rdma: {interfaces: [ibp1s0, ibp1s0]}"))
    assert code == 2 and "'ibp1s0' is listed twice" in out


def test_unknown_own_port_is_a_warning(runner, tmp_path: Path) -> None:
    code, out = _validate(runner, rdma_inventory(tmp_path, w1="rdma: {interfaces: [ibp24s0]}"))
    assert code == 0, out
    assert "worker-1: neither network: nor rdma.node_interface names the port of its own traffic" in out


def test_roce_fabric_without_a_named_port_needs_the_network_master(runner, tmp_path: Path) -> None:
    rdma = 'rdma: {interfaces: ["0000:18:00.0"], link_type: ethernet, node_interface: eno1}'
    code, out = _validate(runner, rdma_inventory(tmp_path, w0=rdma, w1=rdma))
    assert code == 2 and "network_operator.secondary_network.ethernet.master" in out
    extra = ("network_operator:\n  secondary_network:\n"
             "    ethernet: {name: roce, cidr: 10.9.0.0/16, master: ens1f0np0}\n")
    code, out = _validate(runner, rdma_inventory(tmp_path, extra, w0=rdma, w1=rdma))
    assert code == 0, out


def test_network_operator_keys_are_validated(runner, tmp_path: Path) -> None:
    extra = "network_operator:\n  bandwidth: {min_gbps: -1}\n  resource_name: 'a b'\n"
    code, out = _validate(runner, rdma_inventory(tmp_path, extra))
    assert code == 2
    assert "network_operator.bandwidth.min_gbps" in out and "network_operator.resource_name" in out


def test_schema_shows_the_network_operator_defaults(runner) -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    defs = json.loads(result.stdout)["$defs"]
    props = defs["NetworkOperator"]["properties"]
    assert props["namespace"]["default"] == "nvidia-network-operator"
    assert props["resource_name"]["default"] == "rdma_shared_device_a"
    assert "PackageManifest" in props["channel"]["description"]
    assert defs["Bandwidth"]["properties"]["min_gbps"]["default"] == 350
    net = defs["SecondaryNetwork"]["properties"]
    assert net["infiniband"]["default"]["name"] == "rdma-ipoib"
    assert net["ethernet"]["default"]["cidr"] == "192.168.101.0/24"
    assert "2176" in defs["NodeRdma"]["properties"]["node_interface"]["description"]


def test_nic_cluster_policy_override_the_crd_lacks_is_refused(runner, tmp_path: Path) -> None:
    head = "network_operator:\n  nic_cluster_policy:\n"
    extra = head + "    ofedDriver.version: doca3.4.1\n    ofedDriver.bogus: 1\n"
    code, out = _validate(runner, rdma_inventory(tmp_path, extra))
    assert code == 2, out
    assert ("network_operator.nic_cluster_policy: ofedDriver.bogus: the NicClusterPolicy CRD "
            "(mellanox.com/v1alpha1, nvidia-network-operator.v26.4.1) has no field 'bogus' in spec.ofedDriver"
            ) in " ".join(out.split())
    for nested in ("    rdmaSharedDevicePlugin: {confg: x}\n",
                   "    tolerations: [{key: a, efect: NoSchedule}]\n"):
        code, out = _validate(runner, rdma_inventory(tmp_path, head + nested))
        assert code == 2 and "has no field" in out, out


def test_nic_cluster_policy_overrides_the_crd_has_pass(runner, tmp_path: Path) -> None:
    extra = ("network_operator:\n  nic_cluster_policy:\n    ofedDriver.version: doca3.4.1-26.04-1.1.0.0-1\n"
             "    ofedDriver.env: [{name: UNLOAD_STORAGE_MODULES, value: 'true'}]\n"
             "    nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms:\n"
             "      - matchExpressions: [{key: a, operator: Exists}]\n")
    code, out = _validate(runner, rdma_inventory(tmp_path, extra))
    assert code == 0, out


def test_every_gpu_node_or_none_has_rdma(runner, tmp_path: Path) -> None:
    code, out = _validate(runner, rdma_inventory(tmp_path, w1=""))
    assert code == 2
    assert ("nodes[5].gpu: worker-1 is a GPU node without rdma: while worker-0 has it: driver.rdma.enabled "
            "is cluster-wide") in " ".join(out.split())


def test_rdma_enabled_without_rdma_nodes_is_warned(runner, tmp_path: Path) -> None:
    extra = "gpu:\n  cluster_policy: {driver.rdma.enabled: true}\n"
    code, out = _validate(runner, rdma_inventory(tmp_path, extra, w0="", w1=""))
    assert code == 0, out
    assert "nothing installs the NIC driver" in out and "issue 2471" in " ".join(out.split())
    code, out = _validate(runner, rdma_inventory(tmp_path, extra.replace("true}", "true, "
                                                 "driver.rdma.useHostMofed: true}"), w0="", w1=""))
    assert code == 0 and "2471" not in out


def _one_problem(out: str, inv: Path, where: str) -> str:
    """The single problem line of a refused inventory, which must name the file and line."""
    lines = out.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out, out
    assert lines[0].startswith(f"upi: error: {inv}:") and f": {where}: " in lines[0], out
    return " ".join(lines[0].split())


def test_rdma_on_a_master_is_refused_naming_its_role(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path)
    master = '{name: master-0, role: master, mac: "52:54:00:21:03:50", ip: 10.33.3.50}'
    inv.write_text(inv.read_text().replace(
        master, master[:-1] + ", rdma: {interfaces: [ibp24s0], node_interface: eno1}}"))
    code, out = _validate(runner, inv)
    assert code == 2
    line = _one_problem(out, inv, "nodes[1].rdma")
    assert f"{inv}:32: nodes[1].rdma: master-0 is a master: rdma: is for the DGX workers" in line


@pytest.mark.parametrize(("net", "where", "fragment"), [
    ("{name: x, cidr: 10.33.3.0/25}", "infiniband.cidr",
     "10.33.3.0/25 overlaps the network.machine_cidr 10.33.3.0/24"),
    ("{name: x, cidr: 10.0.0.0/8}", "infiniband.cidr", "10.0.0.0/8 overlaps the network.machine_cidr"),
    ("{name: x, cidr: 10.130.0.0/16}", "infiniband.cidr",
     "10.130.0.0/16 overlaps the network.cluster_network 10.128.0.0/14"),
    ("{name: x, cidr: 172.30.8.0/24}", "infiniband.cidr",
     "overlaps the network.service_network 172.30.0.0/16"),
    ("{name: x, cidr: 100.64.0.0/24}", "infiniband.cidr",
     "overlaps OVN-Kubernetes' join switch 100.64.0.0/16"),
    ("{name: x, cidr: 127.0.0.0/24}", "infiniband.cidr", "overlaps the loopback range"),
    ("{name: x, cidr: 192.168.100.0/32}", "infiniband.cidr",
     "192.168.100.0/32 leaves 0 pod addresses (whereabouts skips the network and broadcast addresses)"),
    ("{name: x, cidr: 192.168.100.0/24, exclude: [10.1.0.0/24]}", "infiniband.exclude[0]",
     "10.1.0.0/24 is not inside cidr 192.168.100.0/24"),
    ("{name: x, cidr: 192.168.100.0/24, master: '0000:18:00.0'}", "infiniband.master",
     "0000:18:00.0 is a PCI address: the infiniband network's parent is a netdev name"),
    ("{name: x, cidr: 192.168.100.0/24, mtu: 4092}", "infiniband.mtu",
     "4092: the IPoIBNetwork has no MTU"),
    ("{name: x, cidr: 192.168.100.0/24, master: eno1}", "infiniband.master",
     "eno1 is worker-0's rdma.node_interface, the port of its own traffic"),
])
def test_a_fabric_network_that_clashes_is_refused_naming_the_key(
        runner, tmp_path: Path, net: str, where: str, fragment: str) -> None:
    inv = rdma_inventory(tmp_path, f"network_operator:\n  secondary_network:\n    infiniband: {net}\n")
    code, out = _validate(runner, inv)
    assert code == 2, out
    line = _one_problem(out, inv, f"network_operator.secondary_network.{where}")
    assert fragment in line


def test_the_two_fabrics_networks_may_not_overlap(runner, tmp_path: Path) -> None:
    roce = "rdma: {interfaces: [ens1f0np0], link_type: ethernet, node_interface: eno1}"
    extra = ("network_operator:\n  secondary_network:\n    infiniband: {name: ib, cidr: 192.168.0.0/16}\n"
             "    ethernet: {name: roce, cidr: 192.168.101.0/24}\n")
    inv = rdma_inventory(tmp_path, extra, w1=roce)
    code, out = _validate(runner, inv)
    assert code == 2
    line = _one_problem(out, inv, "network_operator.secondary_network.ethernet.cidr")
    assert "192.168.101.0/24 overlaps the network_operator.secondary_network.infiniband.cidr" in line


def test_the_default_fabric_network_clashing_with_the_machine_network_is_named(
        runner, tmp_path: Path) -> None:
    # The admin never wrote the fabric's range: the message still names the key to set.
    inv = rdma_inventory(tmp_path)
    text = inv.read_text().replace("10.33.3.", "192.168.100.")
    inv.write_text(text.replace("10.33.0.10", "192.168.100.10"))
    code, out = _validate(runner, inv)
    assert code == 2, out
    assert "network_operator.secondary_network.infiniband.cidr: 192.168.100.0/24 overlaps the " \
           "network.machine_cidr 192.168.100.0/24" in " ".join(out.split())


TWICE = "'ofedDriver.version' is given twice (once dotted, once nested)"


@pytest.mark.parametrize(("overrides", "fragment"), [
    ("{ofedDriver.version: a, ofedDriver: {version: b}}", TWICE),
    ("{ofedDriver: {version: b}, ofedDriver.version: a}", TWICE),
    ("{ofedDriver: 5}", "ofedDriver: the NicClusterPolicy CRD (mellanox.com/v1alpha1, "
     "nvidia-network-operator.v26.4.1) has an object at spec.ofedDriver (fields certConfig"),
])
def test_a_nic_cluster_policy_override_given_twice_or_of_the_wrong_shape_is_refused(
        runner, tmp_path: Path, overrides: str, fragment: str) -> None:
    inv = rdma_inventory(tmp_path, f"network_operator:\n  nic_cluster_policy: {overrides}\n")
    code, out = _validate(runner, inv)
    assert code == 2, out
    assert fragment in _one_problem(out, inv, "network_operator.nic_cluster_policy")


def test_a_cluster_policy_key_given_dotted_then_nested_is_refused(runner, tmp_path: Path) -> None:
    # The dotted key first, then the nested mapping: the nested value silently won before.
    extra = "gpu:\n  cluster_policy: {driver.rdma.enabled: true, driver: {rdma: {enabled: false}}}\n"
    inv = rdma_inventory(tmp_path, extra, w0="", w1="")
    code, out = _validate(runner, inv)
    assert code == 2, out
    assert "'driver.rdma.enabled' is given twice" in _one_problem(out, inv, "gpu.cluster_policy")


def test_a_fabric_list_longer_than_any_dgx_is_refused_at_once(runner, tmp_path: Path) -> None:
    many = ", ".join(f"ibp{i}s0" for i in range(33))
    inv = rdma_inventory(tmp_path, w0=f"rdma: {{interfaces: [{many}], node_interface: eno1}}")
    code, out = _validate(runner, inv)
    assert code == 2
    assert "must list at most 32 items" in _one_problem(out, inv, "nodes[4].rdma.interfaces")


def test_a_network_operator_section_without_rdma_nodes_is_warned(runner, tmp_path: Path) -> None:
    inv = rdma_inventory(tmp_path, "network_operator: {channel: stable}\n", w0="", w1="")
    code, out = _validate(runner, inv)
    assert code == 0, out
    assert "network_operator is set but no node has rdma:, so upi gpu installs no Network Operator" in \
        " ".join(out.split())
