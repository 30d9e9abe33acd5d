"""`mig_config` on a DGX: upi labels the node, waits for the MIG manager, verifies its MIG devices.

Against the fake GPU cluster, whose MIG manager honours `nvidia.com/mig.config`
(pending, then success or failed) and offers MIG devices per the
ClusterPolicy's `mig.strategy`; every object upi writes is checked against the
real CRD schemas.
"""

from __future__ import annotations

import json
from pathlib import Path

from fake_gpu import FakeGpuCluster, SimNode
from gpu_support import gpu_args, gpu_inventory, sim_nodes, start_cluster

from upi.cli import app

MIG = "nvidia.com/mig.config"


def _with_mig(tmp_path: Path, profile: str, extra: str = "") -> Path:
    inv = gpu_inventory(tmp_path, extra)
    text = inv.read_text()
    # worker-0 only: worker-1 keeps whole GPUs.
    first = text.index("gpu: true, gpus: 8}")
    inv.write_text(text[:first] + f"gpu: true, gpus: 8, mig_config: {profile}}}"
                   + text[first + len("gpu: true, gpus: 8}"):])
    return inv


def _run(runner, tmp_path: Path, inv: Path, nodes: list[SimNode] | None = None, *extra: str):
    fake = start_cluster(tmp_path, nodes)
    try:
        result = runner.invoke(app, gpu_args(inv, fake, "--json", *extra))
        again = runner.invoke(app, gpu_args(inv, fake, "--json")) if result.exit_code == 0 else None
    finally:
        fake.stop()
    assert fake.api.schema_violations == [] and fake.api.controller_errors == []
    return fake, result, again


def _limits(fake: FakeGpuCluster, node: str) -> dict[str, str]:
    pod = next(p for p in fake.validation_pods if p["spec"]["nodeSelector"]["kubernetes.io/hostname"] == node)
    return pod["spec"]["containers"][0]["resources"]["limits"]  # type: ignore[no-any-return]


def test_single_strategy_labels_the_node_and_verifies_its_mig_devices(runner, tmp_path: Path) -> None:
    fake, result, again = _run(runner, tmp_path, _with_mig(tmp_path, "all-1g.10gb"))
    assert result.exit_code == 0, result.output
    node = fake.api.get("v1", "Node", "worker-0")
    assert node is not None and node["metadata"]["labels"][MIG] == "all-1g.10gb"
    assert MIG not in (fake.api.get("v1", "Node", "worker-1") or {})["metadata"]["labels"]
    assert "  Node worker-0: MIG layout all-1g.10gb applied" in result.stderr
    rows = {n["node"]: n for n in json.loads(result.stdout)["nodes"]}
    assert (rows["worker-0"]["mig"], rows["worker-0"]["allocatable"], rows["worker-0"]["resource"]) == (
        "all-1g.10gb", 56, "nvidia.com/gpu")
    assert (rows["worker-1"]["mig"], rows["worker-1"]["allocatable"]) == ("", 8)
    assert _limits(fake, "worker-0") == {"nvidia.com/gpu": "1"}
    # The label is upi's (server-side apply); a second run leaves it alone.
    assert any(c["object"] == "Node worker-0" and c["action"] == "configured"
               for c in json.loads(result.stdout)["changes"])
    assert again is not None and again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    assert doc["changed"] is False
    assert {"object": "Node worker-0", "action": "unchanged"} in doc["changes"]


def test_mixed_strategy_validates_with_a_mig_resource(runner, tmp_path: Path) -> None:
    inv = _with_mig(tmp_path, "all-3g.40gb", "gpu:\n  cluster_policy: {mig.strategy: mixed}\n")
    fake, result, _ = _run(runner, tmp_path, inv)
    assert result.exit_code == 0, result.output
    row = next(n for n in json.loads(result.stdout)["nodes"] if n["node"] == "worker-0")
    assert (row["resource"], row["allocatable"], row["validation"]) == (
        "nvidia.com/mig-3g.40gb", 16, "passed")
    assert _limits(fake, "worker-0") == {"nvidia.com/mig-3g.40gb": "1"}


def test_a_failed_mig_layout_is_diagnosed_from_the_mig_managers_log(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[3] = SimNode("worker-0", 8, mig_fails=True)
    _, result, _ = _run(runner, tmp_path, _with_mig(tmp_path, "all-1g.10gb"), nodes)
    assert result.exit_code == 1
    diagnosis = json.loads(result.stdout)["diagnosis"]
    assert diagnosis["step"] == "wait for MIG layout"
    assert diagnosis["object"] == "Node worker-0 (Pod nvidia-gpu-operator/nvidia-mig-manager-worker-0)"
    assert diagnosis["problem"] == (
        "nvidia.com/mig.config.state is failed for nvidia.com/mig.config=all-1g.10gb")
    assert "Error: unable to reset GPU 0000:1b:00.0: In use by another client" in diagnosis["log"]
    assert "== ClusterPolicy ready: failed" in result.stderr


def test_all_disabled_is_applied_but_checked_as_whole_gpus(runner, tmp_path: Path) -> None:
    fake, result, _ = _run(runner, tmp_path, _with_mig(tmp_path, "all-disabled"))
    assert result.exit_code == 0, result.output
    assert (fake.api.get("v1", "Node", "worker-0") or {})["metadata"]["labels"][MIG] == "all-disabled"
    row = next(n for n in json.loads(result.stdout)["nodes"] if n["node"] == "worker-0")
    assert (row["allocatable"], row["resource"]) == (8, "nvidia.com/gpu")


def test_a_new_profile_waits_for_the_new_layout_not_the_old_state(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        first = runner.invoke(app, gpu_args(_with_mig(tmp_path, "all-1g.10gb"), fake, "--json"))
        assert first.exit_code == 0, first.output
        fake.mig_lag = 20  # the MIG manager notices the new label only after a while
        result = runner.invoke(app, gpu_args(_with_mig(tmp_path, "all-3g.40gb"), fake, "--json"))
    finally:
        fake.stop()
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"object": "Node worker-0", "action": "MIG profile all-1g.10gb -> all-3g.40gb"} in doc["changes"]
    row = next(n for n in doc["nodes"] if n["node"] == "worker-0")
    assert (row["mig"], row["allocatable"]) == ("all-3g.40gb", 16)  # not the old layout's 56
    node = fake.api.get("v1", "Node", "worker-0") or {}
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert fake.api.schema_violations == [] and fake.api.controller_errors == []
