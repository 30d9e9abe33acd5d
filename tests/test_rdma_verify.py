"""GPUDirect RDMA verification (upi.gpu.rdma_verify) against the FAKE cluster: per node, per pair, diagnoses.

One simulation (tests/fake_gpu.py with tests/fake_network.py and
tests/fake_rdma.py): `upi gpu` installs the Network Operator and GPUDirect on
the DGXs first, so the NIC driver pods, the RDMA device plugin's allocatable,
nvidia-peermem and the secondary networks are what the install made; each
test then breaks one thing the way it breaks on a cluster and runs the
verification itself (with a short round timeout), as `upi gpu` runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from fake_gpu import FakeGpuCluster
from gpu_support import Notes, clean_cluster, gpu_args
from rdma_support import dgx_inventory, dgx_nodes, roce_ports
from typer.testing import CliRunner

from upi.cli import app
from upi.csr.connect import connect
from upi.gpu.kube import Kube
from upi.gpu.rdma import verify_plan
from upi.gpu.rdma_verify import RdmaReport, RdmaTarget, verify_rdma
from upi.gpu.steps import Clock
from upi.inventory import Inventory, load_inventory

IB, ROCE = "default/rdma-ipoib", "default/rdma-macvlan"
RESOURCE = "rdma/rdma_shared_device_a"
IMAGE = "quay.io/example/perftest-cuda:24.10"
POOL_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NS = "upi-rdma-test"


@dataclass
class Rig:
    """A fake cluster whose DGXs `upi gpu` has set up for GPUDirect RDMA, and the inventory it used."""

    cluster: FakeGpuCluster
    inv: Inventory

    @property
    def rdma(self):  # noqa: ANN201 - the fake's bandwidth side (tests/fake_rdma.py)
        return self.cluster.rdma

    def run(self, *, min_gbps: float = 350.0, timeout: float = 5.0,
            tolerations: tuple[dict, ...] | None = None, network: str | None = None,
            deadline: float = 30.0) -> tuple[RdmaReport, Notes]:
        plan = verify_plan(self.inv)
        targets = tuple(RdmaTarget(t.node, t.fabric, t.resource, network or t.network) for t in plan.targets)
        plan = replace(plan, targets=targets, image=IMAGE, min_gbps=min_gbps, timeout=timeout,
                       tolerations=plan.tolerations if tolerations is None else tolerations)
        conn = connect(self.cluster.kubeconfig)
        notes = Notes()
        try:
            report = verify_rdma(Kube(conn), plan, notes, Clock(deadline, poll=0.02, settle=0.3))
        finally:
            conn.close()
        return report, notes


def _rig(tmp_path: Path, fabrics: list[str]) -> Iterator[Rig]:
    extra = f"network_operator:\n  bandwidth: {{image: '{IMAGE}'}}\n"
    inv = dgx_inventory(tmp_path, fabrics, extra)
    for cluster in clean_cluster(tmp_path, dgx_nodes(fabrics)):
        roce_ports(cluster, fabrics)
        result = CliRunner().invoke(app, gpu_args(inv, cluster, timeout="2"))
        assert result.exit_code == 0, result.output + cluster.dump()
        cluster.rdma.measured.clear()
        cluster.rdma.pods_seen.clear()
        cluster.rdma.most_servers_at_once = 0
        yield Rig(cluster, load_inventory(inv, check_files=False))


def _w(i: int) -> str:
    return f"worker-{i}"


@pytest.fixture
def five(tmp_path: Path) -> Iterator[Rig]:
    yield from _rig(tmp_path, ["infiniband"] * 5)


def test_a_ring_of_five_measures_every_pair_and_no_node_runs_two_tests_at_once(five: Rig) -> None:
    report, notes = five.run()
    assert report.ok, [d.text() for d in report.diagnoses]
    assert [(n.node, n.allocatable, n.peermem, n.nic_driver) for n in report.nodes] == [
        (_w(i), 63, "loaded", "ready") for i in range(5)]
    ring = {frozenset((_w(i), _w((i + 1) % 5))) for i in range(5)}
    assert {frozenset(m) for m in five.rdma.measured} == ring and len(five.rdma.measured) == 5
    assert five.rdma.overlaps == []
    assert sorted({p.round for p in report.pairs}) == [0, 1, 2]
    assert all((p.verdict, p.average_gbps, p.peak_gbps) == ("passed", 392.0, 392.2) for p in report.pairs)
    # Each test pod: pinned by name, one GPU, one RDMA device, the network, IPC_LOCK, root, GPUDirect.
    seen = list(five.rdma.pods_seen.values())
    assert len(seen) == 10
    for pod in seen:
        c = pod["spec"]["containers"][0]
        assert c["resources"]["limits"] == {"nvidia.com/gpu": "1", RESOURCE: "1"}
        assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 0}
        assert pod["spec"]["serviceAccountName"] == "upi-rdma-bandwidth"
        assert c["command"][:1] == ["ib_write_bw"] and "--use_cuda=0" in c["command"]
        assert "--report_gbits" in c["command"]
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == IB
        assert POOL_TOLERATION in pod["spec"]["tolerations"]
    # The round's pairs ran at once (rounds of 2, 2 and 1 pairs); every pod deleted at the end.
    assert five.rdma.most_servers_at_once == 2
    assert not [p for p in five.cluster.api.list("v1", "Pod")
                if "upi.openshift.io/rdma-bandwidth" in (p["metadata"].get("labels") or {})]
    doc = report.to_json()
    assert doc["ok"] is True and len(doc["pairs"]) == 5  # type: ignore[arg-type]
    assert any("round 3" in line for line in notes.lines)


def test_the_client_reaches_the_server_at_its_secondary_network_address(five: Rig) -> None:
    five.run()
    by_name = five.rdma.pods_seen
    servers = {n: p for n, p in by_name.items() if p["metadata"]["labels"]["upi.openshift.io/rdma-bandwidth"]
               == "server"}
    clients = [p for p in by_name.values() if p["metadata"]["labels"]["upi.openshift.io/rdma-bandwidth"]
               == "client"]
    server_ips = {five.rdma._ips[n] for n in servers}
    assert {c["spec"]["containers"][0]["command"][-1] for c in clients} == server_ips
    # The IPoIB network's range (the inventory default 192.168.100.0/24), not eth0's.
    assert all(ip.startswith("192.168.100.") for ip in server_ips)


def test_a_pair_below_the_minimum_fails_naming_the_pair_and_the_figure(five: Rig) -> None:
    five.rdma.bandwidth[frozenset((_w(1), _w(2)))] = 180.5
    report, _ = five.run()
    assert not report.ok
    bad = [p for p in report.pairs if not p.ok]
    assert [(p.name, p.verdict, p.average_gbps) for p in bad] == [
        ("worker-1<->worker-2", "below minimum", 180.5)]
    text = report.diagnosis.text() if report.diagnosis else ""
    assert "pair worker-1<->worker-2 (infiniband)" in text
    assert "average 180.50 Gb/s (peak 180.59) is below the minimum 350 Gb/s" in text


def test_the_figure_in_mib_per_second_is_converted(five: Rig) -> None:
    five.rdma.report_gbits = False  # an image whose perftest ignores --report_gbits: MiB/sec columns
    report, _ = five.run()
    assert report.ok and all(p.average_gbps == 392.0 for p in report.pairs)


def test_one_dgx_gets_the_node_checks_only_and_two_make_one_pair(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband", "ethernet", "ethernet"]):
        report, _ = rig.run()
        assert report.ok
        assert [n.node for n in report.nodes] == [_w(0), _w(1), _w(2)]
        assert [(p.name, p.fabric) for p in report.pairs] == [("worker-1<->worker-2", "ethernet")]
        roce = list(rig.rdma.pods_seen.values())
        assert {p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] for p in roce} == {ROCE}


def test_a_nic_driver_failing_after_the_install_is_named_with_its_last_log_lines(tmp_path: Path) -> None:
    log = ("Building driver against kernel 5.14.0-427.26.1.el9_4.x86_64\n"
           "Error: Failed to build mlx5_core: missing kernel headers in the Driver Toolkit image\n")
    for rig in _rig(tmp_path, ["infiniband"] * 3):
        rig.cluster.network.failing[_w(1)] = log  # the driver pod restarts and crash-loops (an upgrade)
        rig.cluster.api.run_controllers()
        report, _ = rig.run()
        row = report.nodes[1]
        assert (row.node, row.nic_driver, row.allocatable) == (_w(1), "failing", 0)
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith("Pod nvidia-network-operator/mofed-rhcos4.16-")
        assert diag.object.endswith("(mofed-container) on worker-1")
        assert "NIC driver pod mofed-rhcos4.16-" in diag.problem and "(CrashLoopBackOff)" in diag.cause
        assert diag.log[-2:] == (log.splitlines()[-1], "[ERROR] Driver installation failed")
        # Pairs with worker-1 are skipped, the other one runs.
        assert {p.name: p.verdict for p in report.pairs} == {
            "worker-0<->worker-1": "skipped", "worker-1<->worker-2": "skipped",
            "worker-2<->worker-0": "passed"}


def test_rdma_resource_zero_is_diagnosed_on_the_node(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        rig.cluster.network.ports[_w(0)] = ["ibp999s0"]  # the plugin's selectors match no device here
        rig.cluster.api.run_controllers()
        report, _ = rig.run()
        diag = report.diagnosis
        assert diag is not None and diag.object == "Node worker-0"
        assert diag.problem == f"allocatable {RESOURCE} is 0"
        assert "rdmaSharedDevicePlugin" in diag.cause
        assert report.pairs[0].verdict == "skipped"


def test_peermem_missing_when_gpudirect_was_switched_off_is_diagnosed(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        # Someone set driver.rdma.enabled false: the GPU Operator drops nvidia-peermem-ctr from its pods.
        cp = rig.cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
        assert cp is not None
        cp["spec"]["driver"]["rdma"] = {"enabled": False}
        rig.cluster.api.put(cp)
        rig.cluster.api.run_controllers()
        report, _ = rig.run()
        assert [n.peermem for n in report.nodes] == ["missing", "missing"]
        diag = report.diagnosis
        assert diag is not None and diag.problem == (
            "nvidia-peermem missing: the GPU driver pod has no nvidia-peermem-ctr container")
        assert "driver.rdma.enabled" in diag.cause


def test_peermem_not_loaded_is_diagnosed_with_its_log(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        rig.cluster.nodes[_w(1)].peermem_fails = True
        rig.cluster.api.run_controllers()
        report, _ = rig.run()
        assert report.nodes[1].peermem == "not loaded"
        diag = report.diagnosis
        assert diag is not None
        assert diag.problem == "nvidia-peermem not loaded: nvidia-peermem-ctr is not ready"
        assert diag.object.endswith("(nvidia-peermem-ctr) on worker-1")
        assert diag.log[-1] == "waiting for mellanox ofed and nvidia drivers to be installed"


def test_unschedulable_test_pods_quote_the_scheduler(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        report, _ = rig.run(tolerations=(), timeout=0.5)  # the GPU pool's toleration forgotten
        pair = report.pairs[0]
        assert pair.verdict == "unschedulable"
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith(f"pair worker-0<->worker-1: Pod {NS}/")
        assert ("0/5 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: }, "
                "4 node(s) didn't match Pod's node affinity/selector.") in diag.problem
        # With it, the same nodes pass.
        report, _ = rig.run()
        assert report.ok


def test_a_pair_that_never_finishes_times_out_within_the_timeout(tmp_path: Path) -> None:
    import time

    for rig in _rig(tmp_path, ["infiniband"] * 4):
        rig.rdma.hangs.add(frozenset((_w(0), _w(1))))
        started = time.monotonic()
        report, _ = rig.run(timeout=1.0)
        took = time.monotonic() - started
        verdicts = {p.name: p.verdict for p in report.pairs}
        assert verdicts == {"worker-0<->worker-1": "timed out", "worker-1<->worker-2": "passed",
                            "worker-2<->worker-3": "passed", "worker-3<->worker-0": "passed"}
        assert report.diagnosis is not None
        assert "the bandwidth test did not finish within 1s" in report.diagnosis.problem
        assert took < 15.0  # one round's wait, not the run's 30 s deadline
        assert not [p for p in rig.cluster.api.list("v1", "Pod")
                    if "upi.openshift.io/rdma-bandwidth" in (p["metadata"].get("labels") or {})]


def test_the_tables_show_each_node_and_each_pair_with_its_figures(five: Rig, capsys) -> None:
    from upi.gpu.rdma_table import show_rdma

    five.rdma.bandwidth[frozenset((_w(3), _w(4)))] = 101.25
    report, _ = five.run()
    capsys.readouterr()
    show_rdma(report, as_json=False)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "RDMA nodes"
    assert lines[1].split() == ["node", "fabric", "RDMA", "resource", "allocatable", "peermem", "NIC",
                                "driver", "problem"]
    assert lines[2].split() == [_w(0), "infiniband", RESOURCE, "63", "loaded", "ready", "-"]
    pairs = {line.split()[0]: line.split() for line in lines if "<->" in line}
    assert pairs["worker-0<->worker-1"][1:6] == ["infiniband", "1", "392.00", "392.20", "350"]
    assert pairs["worker-3<->worker-4"][3:8] == ["101.25", "101.30", "350", "below", "minimum"]
    assert "upi: error: GPU step 'verify RDMA' failed at pair worker-3<->worker-4 (infiniband)" in err
    show_rdma(report, as_json=True)
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["min_gbps"] == 350.0
    bad = [p for p in doc["pairs"] if not p["ok"]]
    assert [(p["pair"], p["average_gbps"], p["verdict"]) for p in bad] == [
        ("worker-3<->worker-4", 101.25, "below minimum")]
    assert doc["diagnosis"]["object"] == "pair worker-3<->worker-4 (infiniband)"


def test_a_client_that_cannot_be_placed_is_unschedulable_with_the_schedulers_words(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        rig.cluster.nodes[_w(1)].allocatable_gpus = 0  # worker-1 offers no GPU now: its client cannot run
        rig.cluster.api.run_controllers()
        report, _ = rig.run(timeout=0.5)
        assert report.nodes[1].ok  # the RDMA signals are there; the GPU is what is missing
        pair = report.pairs[0]
        assert (pair.verdict, pair.average_gbps) == ("unschedulable", None)
        diag = report.diagnosis
        assert diag is not None and "(client on worker-1)" in diag.object
        assert diag.problem == ("the client pod cannot be scheduled: 0/5 nodes are available: 1 Insufficient "
                                "nvidia.com/gpu, 4 node(s) didn't match Pod's node affinity/selector. "
                                "preemption: 0/5 nodes are available: 1 No preemption victims found for "
                                "incoming pod, 4 Preemption is not helpful for scheduling.")


def test_a_server_without_the_secondary_network_times_out_naming_the_pair(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        report, _ = rig.run(timeout=0.5, network="default/no-such-net")
        pair = report.pairs[0]
        assert pair.verdict == "timed out"
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith(f"pair worker-0<->worker-1: Pod {NS}/")
        assert diag.problem == "the server pod did not start within 0.5s"
        assert rig.rdma.measured == []


def test_a_client_that_fails_without_a_report_shows_its_last_log_lines(five: Rig) -> None:
    five.rdma.link_down.add(frozenset((_w(4), _w(0))))
    report, _ = five.run()
    assert {p.name: p.verdict for p in report.pairs if not p.ok} == {"worker-4<->worker-0": "failed"}
    diag = report.diagnosis
    assert diag is not None and "(client on worker-0)" in diag.object
    assert diag.problem == "the client pod Failed without an ib_write_bw report"
    assert diag.log[-1] == " Unable to Connect the HCA's through the link"


def test_a_test_image_that_cannot_be_pulled_is_named(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        rig.rdma.unpullable.add(IMAGE)
        report, _ = rig.run(timeout=0.5)
        assert report.pairs[0].verdict == "failed"
        diag = report.diagnosis
        assert diag is not None and "(server on worker-0)" in diag.object
        assert diag.problem == (f"the server pod cannot start: the image {IMAGE} cannot be pulled "
                                f'(ImagePullBackOff: Back-off pulling image "{IMAGE}")')
        assert "oc-mirror" in diag.fix


def test_rounds_past_the_runs_deadline_are_not_started_and_say_so(tmp_path: Path) -> None:
    for rig in _rig(tmp_path, ["infiniband"] * 4):
        rig.rdma.hangs.add(frozenset((_w(0), _w(1))))  # round 1 runs until the deadline
        report, _ = rig.run(timeout=60.0, deadline=1.5)
        verdicts = {p.name: (p.round, p.verdict) for p in report.pairs}
        assert verdicts == {"worker-0<->worker-1": (0, "timed out"), "worker-2<->worker-3": (0, "passed"),
                            "worker-1<->worker-2": (1, "timed out"), "worker-3<->worker-0": (1, "timed out")}
        late = [p for p in report.pairs if p.round == 1]
        assert all(p.problem == "the run's deadline passed before this pair's round began" for p in late)
        labels = [p["metadata"]["labels"]["upi.openshift.io/rdma-pair"] for p in rig.rdma.pods_seen.values()]
        assert labels and not [v for v in labels if v.startswith("2-")]  # no pod of round 2 was created


def test_a_network_in_a_namespace_multus_isolates_never_reaches_the_test_pods(tmp_path: Path) -> None:
    """OpenShift's Multus: a network of another, non-global namespace gives the pod no sandbox."""
    for rig in _rig(tmp_path, ["infiniband"] * 2):
        report, _ = rig.run(timeout=0.5, network="fabric/rdma-ipoib")
        assert report.pairs[0].verdict == "timed out"
        assert rig.rdma.isolated and rig.rdma.measured == []
        rig.rdma.isolated.clear()
        report, _ = rig.run()  # the same network in default, a global namespace: measured
        assert report.ok and rig.rdma.isolated == []
