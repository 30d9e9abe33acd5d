"""The GPU step of `upi nodes add` (upi.day2.gpu): only the new GPU nodes judged, nothing re-applied.

Against the FAKE GPU cluster (tests/fake_gpu.py), its operators installed first by `upi gpu`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_gpu import SimNode
from gpu_support import Notes, gpu_args, gpu_inventory, sim_nodes, start_cluster
from typer.testing import CliRunner

from upi.cli import app
from upi.csr.connect import connect
from upi.day2.gpu import verify_gpu_nodes
from upi.gpu.kube import Kube
from upi.gpu.steps import Clock
from upi.inventory import load_inventory

TOKEN = "/serviceaccounts/upi-gpu-metrics/token"


def _scoped(url: str) -> bool:
    """A write `nodes add`'s GPU step may make: pods, the new Nodes, a TokenRequest (nothing persisted)."""
    return "/pods" in url or "/nodes/" in url or url.endswith(TOKEN)


def test_only_the_named_gpu_node_is_verified_and_no_operator_is_touched(
        runner: CliRunner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 0)  # broken, but not the node being added
    fake = start_cluster(tmp_path, nodes)
    try:
        inv_path = gpu_inventory(tmp_path)
        # day 1: the operators installed (worker-1 fails its own verification, as it would)
        runner.invoke(app, gpu_args(inv_path, fake, "--node", "worker-0"))
        inv = load_inventory(inv_path, check_files=False)
        conn = connect(fake.kubeconfig)
        writes_before = len([r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")])
        notes = Notes()
        try:
            results = verify_gpu_nodes(Kube(conn), inv, ["worker-0"], Clock(5, poll=0.05, settle=0.5), notes)
            broken = verify_gpu_nodes(Kube(conn), inv, ["worker-1"], Clock(1, poll=0.05, settle=0.2), notes)
        finally:
            conn.close()
    finally:
        fake.stop()
    assert [(r.node, r.ok) for r in results] == [("worker-0", True)]
    assert [(r.node, r.ok) for r in broken] == [("worker-1", False)]
    assert "no NVIDIA PCI label" in broken[0].problem
    writes = [r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")][writes_before:]
    # only validation pods, the Nodes' verdict annotations and a metrics token: no operator, policy or NFD
    assert all(_scoped(r[1]) for r in writes), writes


# --- a new DGX through the pool's steps (issue 31) ---------------------------------------------

ROLE = "node-role.kubernetes.io/dgx"
MCO = "machineconfiguration.openshift.io/v1"


def _day1_without_worker1(runner: CliRunner, tmp_path: Path, fake: object) -> Path:
    """Day 1 with worker-1 not yet a GPU node of the inventory; the full inventory's path."""
    full = gpu_inventory(tmp_path)
    day1 = tmp_path / "day1" / "dgxpod.yaml"
    day1.parent.mkdir()
    text = full.read_text()
    at = text.index("name: worker-1")
    day1.write_text(text[:at] + text[at:].replace("gpu: true, gpus: 8", "gpu: false", 1))
    result = runner.invoke(app, gpu_args(day1, fake))  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    return full


def _add(fake: object, inv_path: Path, names: list[str], seconds: float = 5) -> tuple[list, Notes]:
    inv = load_inventory(inv_path, check_files=False)
    conn = connect(fake.kubeconfig)  # type: ignore[attr-defined]
    notes = Notes()
    try:
        return verify_gpu_nodes(Kube(conn), inv, names, Clock(seconds, poll=0.05, settle=0.5), notes), notes
    finally:
        conn.close()


def test_a_new_dgx_joins_the_pool_rolls_out_is_tainted_and_diagnosed(
        runner: CliRunner, tmp_path: Path) -> None:
    from upi.gpu.dcgm import DIAGNOSED

    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        assert fake.mco.reboots == ["worker-0"]
        assert ROLE not in fake.api.get("v1", "Node", "worker-1")["metadata"]["labels"]
        writes_before = len([r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")])
        diag_before = len(fake.diag_pods)
        results, notes = _add(fake, full, ["worker-1"])
        node = fake.api.get("v1", "Node", "worker-1")
        rendered = fake.api.get(MCO, "MachineConfigPool", "dgx")["status"]["configuration"]["name"]
    finally:
        fake.stop()
    assert [(r.node, r.ok, r.diagnosis) for r in results] == [("worker-1", True, "level 1: 8 GPUs pass")]
    # The same steps as day 1, in order, for the new node only: label, rollout (it reboots), taint, DCGM.
    assert node["metadata"]["labels"][ROLE] == ""
    assert fake.mco.reboots == ["worker-0", "worker-1"]
    ann = node["metadata"]["annotations"]
    assert ann["machineconfiguration.openshift.io/currentConfig"] == rendered
    assert ann["machineconfiguration.openshift.io/state"] == "Done"
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert ann[DIAGNOSED].endswith(" level 1")
    assert [p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in fake.diag_pods[diag_before:]] == [
        "worker-1"]
    steps = [line for line in notes.lines if line.startswith(("Node worker-1:", "worker-1: DCGM"))]
    assert steps[0] == "Node worker-1: labelled node-role.kubernetes.io/dgx"
    assert steps[-3:] == ["Node worker-1: tainted nvidia.com/gpu:NoSchedule",
                          "worker-1: DCGM level 1: 8 GPUs pass",
                          "worker-1: DCGM_FI_DEV_GPU_UTIL for 8/8 GPUs"]
    writes = [r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")][writes_before:]
    # Nothing cluster-wide: no pool, tuning, operator or policy object written, only Nodes and pods
    # (and a token of day 1's metrics account, nothing persisted).
    assert all(_scoped(r[1]) for r in writes), writes


def test_a_new_dgx_the_mco_degrades_stops_naming_it(runner: CliRunner, tmp_path: Path) -> None:
    from upi.errors import ClusterError

    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        fake.mco.degrades["worker-1"] = "unexpected on-disk state validating against rendered-dgx"
        with pytest.raises(ClusterError) as caught:
            _add(fake, full, ["worker-1"])
        tainted = fake.api.get("v1", "Node", "worker-1")["spec"].get("taints")
    finally:
        fake.stop()
    assert str(caught.value).startswith("stage gpu pool: Node worker-1: ")
    assert "unexpected on-disk state" in str(caught.value)
    assert not tainted  # the taint comes only after the rollout


def test_a_new_dgx_failing_dcgm_at_the_configured_level_names_gpu_and_test(
        runner: CliRunner, tmp_path: Path) -> None:
    from upi.errors import ClusterError

    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, diag_fails=(5, "pcie"))  # a level 2 test
    fake = start_cluster(tmp_path, nodes)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        full.write_text(full.read_text() + "gpu_pool:\n  diagnosis_level: 2\n")
        with pytest.raises(ClusterError) as caught:
            _add(fake, full, ["worker-1"])
    finally:
        fake.stop()
    assert str(caught.value) == ("stage gpu diagnose: Node worker-1 GPU 5: DCGM level 2 test 'pcie' "
                                 "(Integration) failed")


def test_no_pool_on_the_cluster_is_named(runner: CliRunner, tmp_path: Path) -> None:
    from upi.errors import ClusterError

    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        fake.api.delete(MCO, "MachineConfigPool", "dgx")  # set up before upi made GPU pools
        with pytest.raises(ClusterError, match="the cluster has no MachineConfigPool dgx: set the GPU"):
            _add(fake, full, ["worker-1"])
        labels = fake.api.get("v1", "Node", "worker-1")["metadata"]["labels"]
    finally:
        fake.stop()
    assert ROLE not in labels  # nothing was changed


# --- a new DGX through the metrics proof too (issue 31 item 5) ------------------------------------


def test_a_new_dgx_is_proved_to_have_a_utilisation_series_per_gpu(runner: CliRunner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        # Only the new node is judged: a day-1 DGX whose exporter stopped being scraped is `upi gpu`'s.
        fake.thanos.missing = {"worker-0"}
        queries_before = len(fake.thanos.queries)
        writes_before = len([r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")])
        results, notes = _add(fake, full, ["worker-1"])
    finally:
        fake.stop()
    assert [(r.node, r.metrics) for r in results] == [("worker-1", "8/8 GPUs")]
    assert "worker-1: DCGM_FI_DEV_GPU_UTIL for 8/8 GPUs" in notes.lines
    assert len(fake.thanos.queries) > queries_before
    writes = [r for r in fake.api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")][writes_before:]
    # Day 1's metrics account and binding are read, not re-applied: only a token is asked for.
    assert all(_scoped(r[1]) for r in writes), writes
    assert any(r[1].endswith(TOKEN) for r in writes), writes


def test_a_new_dgx_without_series_stops_naming_it_and_the_stage(runner: CliRunner, tmp_path: Path) -> None:
    from upi.errors import ClusterError

    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        fake.thanos.missing = {"worker-1"}
        with pytest.raises(ClusterError) as caught:
            _add(fake, full, ["worker-1"], seconds=3)
    finally:
        fake.stop()
    assert str(caught.value).startswith(
        "stage gpu metrics: Node worker-1: the cluster's Prometheus has no series of DCGM_FI_DEV_GPU_UTIL")


def test_a_new_dgx_with_metrics_off_asks_no_querier(runner: CliRunner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        full = _day1_without_worker1(runner, tmp_path, fake)
        full.write_text(full.read_text() + "gpu_pool:\n  metrics: false\n")
        fake.thanos.missing = {"worker-1"}
        queries_before = len(fake.thanos.queries)
        results, notes = _add(fake, full, ["worker-1"])
    finally:
        fake.stop()
    assert [(r.node, r.ok, r.metrics) for r in results] == [("worker-1", True, "")]
    assert len(fake.thanos.queries) == queries_before
    assert "gpu_pool.metrics is false: the GPU metrics are not checked" in notes.lines
