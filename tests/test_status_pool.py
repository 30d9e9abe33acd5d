"""`upi status`'s GPU pool stages (issue 31): tuned, then GPU, then diagnosed, for GPU nodes.

`upi gpu` runs against the FAKE GPU cluster (tests/fake_gpu.py, its machine
config operator tests/fake_mco.py and DCGM image tests/fake_images.py);
`upi status` then reads the same fake API.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_gpu import SimNode
from gpu_support import gpu_args, gpu_inventory, sim_nodes, start_cluster

from upi.cli import app
from upi.gpu.dcgm import DIAGNOSED
from upi.inventory import load_inventory
from upi.status.cluster import cluster_from

CURRENT = "machineconfiguration.openshift.io/currentConfig"
DESIRED = "machineconfiguration.openshift.io/desiredConfig"
STATE = "machineconfiguration.openshift.io/state"


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _status(runner: Any, inv: Path, fake: Any, *extra: str) -> dict[str, Any]:
    result = runner.invoke(app, ["status", str(inv), "--kubeconfig", str(fake.kubeconfig),
                                 "--dnsmasq-log", os.devnull, "--json", *extra])
    return {n["name"]: n for n in json.loads(result.stdout)["nodes"]}


def test_status_shows_each_dgx_tuned_verified_and_diagnosed(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        inv = gpu_inventory(tmp_path)
        before = datetime.now(UTC).replace(microsecond=0)
        result = runner.invoke(app, gpu_args(inv, fake))
        assert result.exit_code == 0, result.output
        stamp = fake.api.get("v1", "Node", "worker-0")["metadata"]["annotations"][DIAGNOSED]
        assert stamp.endswith(" level 1")
        passed = datetime.fromisoformat(stamp.removesuffix(" level 1").replace("Z", "+00:00"))
        assert before <= passed <= datetime.now(UTC)
        doc = _status(runner, inv, fake)
        # A second run that diagnoses the same keeps the first pass's time: the Node is not rewritten.
        rv = fake.api.get("v1", "Node", "worker-0")["metadata"]["resourceVersion"]
        assert runner.invoke(app, gpu_args(inv, fake)).exit_code == 0
        assert fake.api.get("v1", "Node", "worker-0")["metadata"]["resourceVersion"] == rv
    finally:
        fake.stop()
    for name in ("worker-0", "worker-1"):
        stages = doc[name]["stages"]
        assert stages["tuned"] == {"reached": True, "time": None}  # the MCO keeps no time of it
        assert stages["gpu"]["reached"]
        assert stages["diagnosed"]["reached"]
        assert doc[name]["current"] == "diagnosed" and doc[name]["done"]
    assert datetime.fromisoformat(doc["worker-0"]["stages"]["diagnosed"]["time"]) == passed
    assert doc["master-0"]["stages"]["tuned"] is None and doc["master-0"]["stages"]["diagnosed"] is None


def test_a_failed_diagnosis_is_kept_and_named_by_status(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, diag_fails=(3, "memory"))  # a level 2 test
    fake = start_cluster(tmp_path, nodes)
    try:
        inv = gpu_inventory(tmp_path, "gpu_pool:\n  diagnosis_level: 2\n")
        assert runner.invoke(app, gpu_args(inv, fake)).exit_code == 1
        value = fake.api.get("v1", "Node", "worker-1")["metadata"]["annotations"][DIAGNOSED]
        assert value == "failed level 2: GPU 3 memory Fail"
        doc = _status(runner, inv, fake, "--stuck-after", "0s")
    finally:
        fake.stop()
    assert doc["worker-1"]["stages"]["diagnosed"] == {"reached": False, "time": None}
    assert doc["worker-1"]["current"] == "GPU" and not doc["worker-1"]["done"]
    assert doc["worker-1"]["causes"][0] == "its last DCGM diagnosis failed at level 2: GPU 3 memory Fail"
    assert doc["worker-0"]["done"]


def test_diagnosis_level_0_leaves_no_diagnosed_stage(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        inv = gpu_inventory(tmp_path, "gpu_pool:\n  diagnosis_level: 0\n")
        assert runner.invoke(app, gpu_args(inv, fake)).exit_code == 0
        doc = _status(runner, inv, fake)
    finally:
        fake.stop()
    assert doc["worker-0"]["stages"]["diagnosed"] is None
    assert doc["worker-0"]["current"] == "GPU" and doc["worker-0"]["done"]


def _node(annotations: dict[str, str], *, pool: bool = True) -> dict[str, Any]:
    labels = {"node-role.kubernetes.io/dgx": ""} if pool else {}
    return {"metadata": {"name": "worker-0", "labels": labels, "annotations": annotations},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-11-25T10:00:00Z"}]}}


POOL = {"spec": {"configuration": {"name": "rendered-dgx-2"}}}
DONE = {CURRENT: "rendered-dgx-2", DESIRED: "rendered-dgx-2", STATE: "Done"}


@pytest.mark.parametrize(("node", "pool", "tuned"), [
    (_node(DONE), POOL, True),
    (_node(DONE, pool=False), POOL, False),  # not labelled into the pool
    (_node({**DONE, CURRENT: "rendered-dgx-1"}), POOL, False),  # still on the old config
    (_node({**DONE, STATE: "Working"}), POOL, False),  # rebooting into it
    (_node(DONE), None, False),  # no pool at all
    (_node({CURRENT: "rendered-worker-1", DESIRED: "rendered-worker-1", STATE: "Done"}), POOL, False),
], ids=["done", "not-in-pool", "old-config", "working", "no-pool", "worker-config"])
def test_tuned_is_the_pools_rendered_config_done_on_the_node(
        tmp_path: Path, node: dict[str, Any], pool: Any, tuned: bool) -> None:
    inv = load_inventory(gpu_inventory(tmp_path), check_files=False)
    assert ("worker-0" in cluster_from(inv, [], [node], pool).tuned) is tuned


def test_a_degraded_node_and_a_bad_diagnosis_value_are_told(tmp_path: Path) -> None:
    inv = load_inventory(gpu_inventory(tmp_path), check_files=False)
    node = _node({**DONE, CURRENT: "rendered-dgx-1", STATE: "Degraded",
                  "machineconfiguration.openshift.io/reason": "unexpected on-disk state",
                  DIAGNOSED: "2026-11-25T11:00:00 level 1"})  # no zone: not a pass upi wrote
    cluster = cluster_from(inv, [], [node], POOL)
    assert cluster.tuned == {} and cluster.diagnosed == {}
    assert cluster.notes["worker-0"] == (
        ("tuned", "the machine config daemon reports it Degraded: unexpected on-disk state"),)



def test_a_node_tuned_at_an_unknown_time_can_still_be_stuck(tmp_path: Path) -> None:
    from datetime import timedelta

    from upi.status.stages import Cluster, build_rows

    inv = load_inventory(gpu_inventory(tmp_path), check_files=False)
    ready = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    cluster = Cluster(ready={"worker-0": ready}, tuned={"worker-0": None})
    rows, _ = build_rows(inv, [], installed={}, cluster=cluster, now=ready + timedelta(hours=1),
                         threshold=600)
    row = next(r for r in rows if r.name == "worker-0")
    # In the pool since a time nothing keeps: stuck counts from its Ready time, the last one known.
    assert (row.current, row.since, row.stuck) == ("tuned", None, True)
    assert row.causes == ["GPUs not verified: upi gpu"]
