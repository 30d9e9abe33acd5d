"""GPUDirect RDMA verification (upi.gpu.rdma_verify) against the FAKE cluster: per node, per pair, diagnoses.

The fake API server (tests/fake_apiserver.py) with the GPU fake's nodes
(tests/fake_gpu.py) and the RDMA fake (tests/fake_rdma.py): NIC driver pods,
the RDMA device plugin's allocatable, nvidia-peermem, and ib_write_bw pods
whose client prints perftest's report with the figure each test chooses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_gpu import FakeGpuCluster, SimNode
from fake_rdma import FakeRdma, RdmaSim

from upi.csr.connect import connect
from upi.gpu.kube import Kube
from upi.gpu.rdma_verify import RdmaPlan, RdmaReport, RdmaTarget, verify_rdma
from upi.gpu.steps import Clock

IB, ROCE = "nvidia-network-operator/rdma-ib", "nvidia-network-operator/rdma-roce"
RESOURCE = "rdma/rdma_shared_device_a"
IMAGE = "quay.io/example/perftest-cuda:24.10"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


class Notes:
    """A reporter that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def stage(self, name: str, message: str) -> None:
        self.lines.append(f"{name} {message}")

    def note(self, message: str) -> None:
        self.lines.append(message)

    def warn(self, message: str) -> None:
        self.lines.append(message)


@dataclass
class Rig:
    """A started fake cluster with its RDMA side."""

    cluster: FakeGpuCluster
    rdma: FakeRdma

    def run(self, sims: list[RdmaSim], *, min_gbps: float = 350.0, timeout: float = 5.0,
            tolerations: tuple[dict[str, str], ...] = (GPU_TOLERATION,),
            network: str | None = None, deadline: float = 30.0) -> tuple[RdmaReport, Notes]:
        targets = tuple(RdmaTarget(s.name, "ethernet" if s.fabric == "ethernet" else "infiniband", RESOURCE,
                                   network or (ROCE if s.fabric == "ethernet" else IB)) for s in sims)
        plan = RdmaPlan(targets, "nvidia-network-operator", IMAGE, min_gbps, tolerations=tolerations,
                        timeout=timeout)
        conn = connect(self.cluster.kubeconfig)
        notes = Notes()
        try:
            report = verify_rdma(Kube(conn), plan, notes, Clock(deadline, poll=0.02, settle=0.3))
        finally:
            conn.close()
        return report, notes


def _rig(tmp_path: Path, sims: list[RdmaSim]) -> Iterator[Rig]:
    nodes = [SimNode("master-0")] + [SimNode(s.name, s.gpus) for s in sims]
    cluster = FakeGpuCluster(tmp_path / "kube", nodes)
    rdma = FakeRdma(cluster, sims)
    cluster.start()
    try:
        yield Rig(cluster, rdma)
    finally:
        cluster.stop()
    assert cluster.api.schema_violations == []
    assert cluster.api.controller_errors == []


def _dgxs(n: int, **kw: object) -> list[RdmaSim]:
    return [RdmaSim(f"dgx-{i}", **kw) for i in range(1, n + 1)]  # type: ignore[arg-type]


@pytest.fixture
def five(tmp_path: Path) -> Iterator[Rig]:
    yield from _rig(tmp_path, _dgxs(5))


def test_a_ring_of_five_measures_every_pair_and_no_node_runs_two_tests_at_once(five: Rig) -> None:
    sims = _dgxs(5)
    report, notes = five.run(sims)
    assert report.ok, [d.text() for d in report.diagnoses]
    assert [(n.node, n.allocatable, n.peermem, n.nic_driver) for n in report.nodes] == [
        (f"dgx-{i}", 63, "loaded", "ready") for i in range(1, 6)]
    ring = {frozenset((f"dgx-{i}", f"dgx-{i % 5 + 1}")) for i in range(1, 6)}
    assert {frozenset(m) for m in five.rdma.measured} == ring and len(five.rdma.measured) == 5
    assert five.rdma.overlaps == []
    assert sorted({p.round for p in report.pairs}) == [0, 1, 2]
    assert all((p.verdict, p.average_gbps, p.peak_gbps) == ("passed", 392.0, 392.2) for p in report.pairs)
    # Each test pod: pinned by name, one GPU, one RDMA device, the network, IPC_LOCK, GPUDirect.
    seen = list(five.rdma.pods_seen.values())
    assert len(seen) == 10
    for pod in seen:
        c = pod["spec"]["containers"][0]
        assert c["resources"]["limits"] == {"nvidia.com/gpu": "1", RESOURCE: "1"}
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert c["command"][:1] == ["ib_write_bw"] and "--use_cuda=0" in c["command"]
        assert "--report_gbits" in c["command"]
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == IB
        assert GPU_TOLERATION in pod["spec"]["tolerations"]
    # The round's pairs ran at once (rounds of 2, 2 and 1 pairs); every pod deleted at the end.
    assert five.rdma.most_servers_at_once == 2
    assert not [p for p in five.cluster.api.list("v1", "Pod")
                if "upi.openshift.io/rdma-bandwidth" in (p["metadata"].get("labels") or {})]
    doc = report.to_json()
    assert doc["ok"] is True and len(doc["pairs"]) == 5  # type: ignore[arg-type]
    assert any("round 3" in line for line in notes.lines)


def test_the_client_reaches_the_server_at_its_secondary_network_address(five: Rig) -> None:
    five.run(_dgxs(5))
    by_name = five.rdma.pods_seen
    servers = {n: p for n, p in by_name.items() if p["metadata"]["labels"]["upi.openshift.io/rdma-bandwidth"]
               == "server"}
    clients = [p for p in by_name.values() if p["metadata"]["labels"]["upi.openshift.io/rdma-bandwidth"]
               == "client"]
    server_ips = {five.rdma._ips[n] for n in servers}
    assert {c["spec"]["containers"][0]["command"][-1] for c in clients} == server_ips
    assert all(ip.startswith("192.168.100.") for ip in server_ips)  # the IB network's range, not eth0's


def test_a_pair_below_the_minimum_fails_naming_the_pair_and_the_figure(five: Rig) -> None:
    five.rdma.bandwidth[frozenset(("dgx-2", "dgx-3"))] = 180.5
    report, _ = five.run(_dgxs(5))
    assert not report.ok
    bad = [p for p in report.pairs if not p.ok]
    assert [(p.name, p.verdict, p.average_gbps) for p in bad] == [("dgx-2<->dgx-3", "below minimum", 180.5)]
    text = report.diagnosis.text() if report.diagnosis else ""
    assert "pair dgx-2<->dgx-3 (infiniband)" in text
    assert "average 180.50 Gb/s (peak 180.59) is below the minimum 350 Gb/s" in text


def test_the_figure_in_mib_per_second_is_converted(five: Rig) -> None:
    five.rdma.report_gbits = False  # an image whose perftest ignores --report_gbits: MiB/sec columns
    report, _ = five.run(_dgxs(5))
    assert report.ok and all(p.average_gbps == 392.0 for p in report.pairs)


def test_one_dgx_gets_the_node_checks_only_and_two_make_one_pair(tmp_path: Path) -> None:
    sims = [RdmaSim("dgx-1"), RdmaSim("dgx-2", fabric="ethernet"), RdmaSim("dgx-3", fabric="ethernet")]
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims)
        assert report.ok
        assert [n.node for n in report.nodes] == ["dgx-1", "dgx-2", "dgx-3"]
        assert [(p.name, p.fabric) for p in report.pairs] == [("dgx-2<->dgx-3", "ethernet")]
        roce = [p for p in rig.rdma.pods_seen.values()]
        assert {p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] for p in roce} == {ROCE}


def test_a_failing_nic_driver_is_named_with_its_last_log_lines(tmp_path: Path) -> None:
    log = ("Building driver against kernel 5.14.0-427.26.1.el9_4.x86_64\n"
           "Error: Failed to build mlx5_core: missing kernel headers in the Driver Toolkit image\n")
    sims = _dgxs(3)
    sims[1].nic_driver_error = log
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims)
        row = report.nodes[1]
        assert (row.node, row.nic_driver, row.allocatable) == ("dgx-2", "failing", 0)
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith("Pod nvidia-network-operator/mofed-rhcos4.16-")
        assert diag.object.endswith("(mofed-container) on dgx-2")
        assert "NIC driver pod mofed-rhcos4.16-" in diag.problem and "(CrashLoopBackOff)" in diag.cause
        assert diag.log[-1] == log.splitlines()[-1]
        # Pairs with dgx-2 are skipped, the other one runs.
        assert {p.name: p.verdict for p in report.pairs} == {
            "dgx-1<->dgx-2": "skipped", "dgx-2<->dgx-3": "skipped", "dgx-3<->dgx-1": "passed"}


def test_rdma_resource_zero_is_diagnosed_on_the_node(tmp_path: Path) -> None:
    sims = _dgxs(2)
    sims[0].rdma_devices = 0  # the plugin's selectors match no device here
    sims[0].nic_driver = False
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims)
        diag = report.diagnosis
        assert diag is not None and diag.object == "Node dgx-1"
        assert diag.problem == f"allocatable {RESOURCE} is 0"
        assert "rdmaSharedDevicePlugin" in diag.cause
        assert report.pairs[0].verdict == "skipped"


@pytest.mark.parametrize(("peermem", "shown", "problem"), [
    ("absent", "missing", "nvidia-peermem missing: the GPU driver pod has no nvidia-peermem-ctr container"),
    ("failing", "not loaded", "nvidia-peermem not loaded: nvidia-peermem-ctr is not ready"),
])
def test_peermem_missing_or_not_loaded_is_diagnosed(tmp_path: Path, peermem: str, shown: str,
                                                    problem: str) -> None:
    sims = _dgxs(2)
    sims[1].peermem = peermem
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims)
        assert report.nodes[1].peermem == shown
        diag = report.diagnosis
        assert diag is not None and diag.problem == problem
        if peermem == "failing":
            assert diag.object.endswith("(nvidia-peermem-ctr) on dgx-2")
            assert diag.log[-1] == "failed to load nvidia-peermem module"
        else:
            assert "driver.rdma.enabled" in diag.cause


def test_unschedulable_test_pods_quote_the_scheduler(tmp_path: Path) -> None:
    taint = {"key": "nvidia.com/gpu-pool", "value": "dgx", "effect": "NoSchedule"}
    sims = _dgxs(2, taints=[taint])
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims, tolerations=(), timeout=0.5)  # the pool's toleration forgotten
        pair = report.pairs[0]
        assert pair.verdict == "unschedulable"
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith("pair dgx-1<->dgx-2: Pod nvidia-network-operator/")
        assert ("0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu-pool: dgx}, "
                "2 node(s) didn't match Pod's node affinity/selector.") in diag.problem
        # With it, the same nodes pass.
        report, _ = rig.run(sims, tolerations=({"key": "nvidia.com/gpu-pool", "operator": "Exists",
                                                "effect": "NoSchedule"},))
        assert report.ok


def test_a_pair_that_never_finishes_times_out_within_the_timeout(tmp_path: Path) -> None:
    import time

    sims = _dgxs(4)
    for rig in _rig(tmp_path, sims):
        rig.rdma.hangs.add(frozenset(("dgx-1", "dgx-2")))
        started = time.monotonic()
        report, _ = rig.run(sims, timeout=1.0)
        took = time.monotonic() - started
        verdicts = {p.name: p.verdict for p in report.pairs}
        assert verdicts == {"dgx-1<->dgx-2": "timed out", "dgx-2<->dgx-3": "passed",
                            "dgx-3<->dgx-4": "passed", "dgx-4<->dgx-1": "passed"}
        assert report.diagnosis is not None
        assert "the bandwidth test did not finish within 1s" in report.diagnosis.problem
        assert took < 15.0  # one round's wait, not the run's 30 s deadline
        assert not [p for p in rig.cluster.api.list("v1", "Pod")
                    if "upi.openshift.io/rdma-bandwidth" in (p["metadata"].get("labels") or {})]


def test_the_tables_show_each_node_and_each_pair_with_its_figures(five: Rig, capsys) -> None:
    from upi.gpu.rdma_table import show_rdma

    five.rdma.bandwidth[frozenset(("dgx-4", "dgx-5"))] = 101.25
    report, _ = five.run(_dgxs(5))
    capsys.readouterr()
    show_rdma(report, as_json=False)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "RDMA nodes"
    assert lines[1].split() == ["node", "fabric", "RDMA", "resource", "allocatable", "peermem", "NIC",
                                "driver", "problem"]
    assert lines[2].split() == ["dgx-1", "infiniband", RESOURCE, "63", "loaded", "ready", "-"]
    pairs = {line.split()[0]: line.split() for line in lines if "<->" in line}
    assert pairs["dgx-1<->dgx-2"][1:6] == ["infiniband", "1", "392.00", "392.20", "350"]
    assert pairs["dgx-4<->dgx-5"][3:8] == ["101.25", "101.30", "350", "below", "minimum"]
    assert "upi: error: GPU step 'verify RDMA' failed at pair dgx-4<->dgx-5 (infiniband)" in err
    show_rdma(report, as_json=True)
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["min_gbps"] == 350.0
    bad = [p for p in doc["pairs"] if not p["ok"]]
    assert [(p["pair"], p["average_gbps"], p["verdict"]) for p in bad] == [
        ("dgx-4<->dgx-5", 101.25, "below minimum")]
    assert doc["diagnosis"]["object"] == "pair dgx-4<->dgx-5 (infiniband)"


def test_a_client_that_cannot_be_placed_is_unschedulable_with_the_schedulers_words(tmp_path: Path) -> None:
    sims = [RdmaSim("dgx-1"), RdmaSim("dgx-2", gpus=0)]  # dgx-2 offers no GPU: its client cannot run
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims, timeout=0.5)
        assert report.nodes[1].ok  # the RDMA signals are there; the GPU is what is missing
        pair = report.pairs[0]
        assert (pair.verdict, pair.average_gbps) == ("unschedulable", None)
        diag = report.diagnosis
        assert diag is not None and "(client on dgx-2)" in diag.object
        assert diag.problem == ("the client pod cannot be scheduled: 0/3 nodes are available: 1 Insufficient "
                                "nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. "
                                "preemption: 0/3 nodes are available: 1 No preemption victims found for "
                                "incoming pod, 2 Preemption is not helpful for scheduling.")


def test_a_server_without_the_secondary_network_times_out_naming_the_pair(tmp_path: Path) -> None:
    sims = _dgxs(2)
    for rig in _rig(tmp_path, sims):
        report, _ = rig.run(sims, timeout=0.5, network="nvidia-network-operator/no-such-net")
        pair = report.pairs[0]
        assert pair.verdict == "timed out"
        diag = report.diagnosis
        assert diag is not None and diag.object.startswith("pair dgx-1<->dgx-2: Pod nvidia-network-operator/")
        assert diag.problem == "the server pod did not start within 0.5s"
        assert rig.rdma.measured == []


def test_a_client_that_fails_without_a_report_shows_its_last_log_lines(five: Rig) -> None:
    five.rdma.link_down.add(frozenset(("dgx-5", "dgx-1")))
    report, _ = five.run(_dgxs(5))
    assert {p.name: p.verdict for p in report.pairs if not p.ok} == {"dgx-5<->dgx-1": "failed"}
    diag = report.diagnosis
    assert diag is not None and "(client on dgx-1)" in diag.object
    assert diag.problem == "the client pod Failed without an ib_write_bw report"
    assert diag.log[-1] == " Unable to Connect the HCA's through the link"


def test_a_test_image_that_cannot_be_pulled_is_named(tmp_path: Path) -> None:
    sims = _dgxs(2)
    for rig in _rig(tmp_path, sims):
        rig.rdma.unpullable.add(IMAGE)
        report, _ = rig.run(sims, timeout=0.5)
        assert report.pairs[0].verdict == "failed"
        diag = report.diagnosis
        assert diag is not None and "(server on dgx-1)" in diag.object
        assert diag.problem == (f"the server pod cannot start: the image {IMAGE} cannot be pulled "
                                f'(ImagePullBackOff: Back-off pulling image "{IMAGE}")')
        assert "oc-mirror" in diag.fix


def test_rounds_past_the_runs_deadline_are_not_started_and_say_so(tmp_path: Path) -> None:
    sims = _dgxs(4)
    for rig in _rig(tmp_path, sims):
        rig.rdma.hangs.add(frozenset(("dgx-1", "dgx-2")))  # round 1 runs until the deadline
        report, _ = rig.run(sims, timeout=60.0, deadline=1.5)
        verdicts = {p.name: (p.round, p.verdict) for p in report.pairs}
        assert verdicts == {"dgx-1<->dgx-2": (0, "timed out"), "dgx-3<->dgx-4": (0, "passed"),
                            "dgx-2<->dgx-3": (1, "timed out"), "dgx-4<->dgx-1": (1, "timed out")}
        late = [p for p in report.pairs if p.round == 1]
        assert all(p.problem == "the run's deadline passed before this pair's round began" for p in late)
        labels = [p["metadata"]["labels"]["upi.openshift.io/rdma-pair"] for p in rig.rdma.pods_seen.values()]
        assert labels and not [v for v in labels if v.startswith("2-")]  # no pod of round 2 was created
