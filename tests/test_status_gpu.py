"""`upi status`'s GPU stage: upi gpu's verdict kept on each Node, allocatable GPUs as the fallback.

`upi gpu` runs against the FAKE GPU cluster (tests/fake_gpu.py); `upi status` then reads the
same fake API.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fake_gpu import SimNode
from gpu_support import gpu_args, gpu_inventory, sim_nodes, start_cluster

from upi.cli import app
from upi.gpu.verify import FAILED, VERIFIED
from upi.inventory import load_inventory
from upi.status.cluster import cluster_from


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _annotations(fake, name: str) -> dict[str, str]:
    return fake.api.get("v1", "Node", name)["metadata"].get("annotations") or {}


def test_upi_gpu_keeps_each_verdict_on_the_node_and_status_shows_it(runner, tmp_path: Path) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, validation_fails="CUDA error: system not yet initialized\n")
    fake = start_cluster(tmp_path, nodes)
    try:
        # worker-1 passed once before: this run's failure must take that back.
        node = fake.api.get("v1", "Node", "worker-1")
        node["metadata"]["annotations"] = {VERIFIED: "2026-01-01T00:00:00Z"}
        fake.api.put(node)
        inv = gpu_inventory(tmp_path)
        before = datetime.now(UTC).replace(microsecond=0)
        result = runner.invoke(app, gpu_args(inv, fake))
        assert result.exit_code == 1, result.output
        stamp = _annotations(fake, "worker-0")[VERIFIED]
        passed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert before <= passed <= datetime.now(UTC)
        assert _annotations(fake, "worker-1")[VERIFIED] == FAILED
        assert VERIFIED not in _annotations(fake, "master-0")  # no GPU node: never verified
        # A cluster whose CSR API does not answer (withheld: 404, as an unknown resource is):
        # the Nodes are read all the same, the CSRs are a note.
        fake.api.withhold("certificates.k8s.io/v1", "CertificateSigningRequest")
        status = runner.invoke(app, ["status", str(inv), "--kubeconfig", str(fake.kubeconfig),
                                     "--dnsmasq-log", os.devnull, "--json"])
        full = json.loads(status.stdout)
        doc = {n["name"]: n for n in full["nodes"]}
        (note,) = full["unread"]
        assert note.startswith("the API: GET /apis/certificates.k8s.io/v1/certificatesigningrequests")
        assert doc["worker-0"]["stages"]["gpu"]["reached"]
        assert datetime.fromisoformat(doc["worker-0"]["stages"]["gpu"]["time"]) == passed
        # Verified, but worker-1's failure stopped the run before the DCGM diagnosis: not done yet.
        assert doc["worker-0"]["current"] == "GPU" and not doc["worker-0"]["done"]
        assert doc["worker-0"]["stages"]["diagnosed"] == {"reached": False, "time": None}
        # worker-1 allocates its 8 GPUs, yet its validation failed: not verified.
        assert doc["worker-1"]["stages"]["gpu"] == {"reached": False, "time": None}
        assert doc["worker-1"]["current"] == "tuned" and not doc["worker-1"]["done"]
    finally:
        fake.stop()


def _node(name: str, *, gpus: str | None, annotation: object = None, ready: bool = True) -> dict:
    meta: dict = {"name": name}
    if annotation is not None:
        meta["annotations"] = {VERIFIED: annotation}
    status: dict = {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                    "lastTransitionTime": "2026-11-25T10:00:00Z"}]}
    if gpus is not None:
        status["allocatable"] = {"nvidia.com/gpu": gpus}
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(("node", "verified"), [
    (_node("worker-0", gpus="8"), True),                      # set up without upi gpu: allocatable counts
    (_node("worker-0", gpus="7"), False),                     # fewer than its gpus: 8
    (_node("worker-0", gpus="8", ready=False), False),        # not Ready
    (_node("worker-0", gpus="lots"), False),
    (_node("worker-0", gpus=None, annotation="2026-11-25T11:00:00Z"), "2026-11-25T11:00:00+00:00"),
    (_node("worker-0", gpus="8", annotation=FAILED), False),  # the verdict wins over allocatable
    (_node("worker-0", gpus="8", annotation="2026-11-25T11:00:00"), False),  # no zone: not a time
    (_node("worker-0", gpus="8", annotation=["x"]), False),
], ids=["allocatable", "too-few", "not-ready", "garbage-count", "annotation", "failed", "naive-time",
        "list"])
def test_gpu_stage_reads_the_verdict_then_allocatable(tmp_path: Path, node: dict, verified: object) -> None:
    inv = load_inventory(gpu_inventory(tmp_path), check_files=False)
    gpu = cluster_from(inv, [], [node]).gpu
    if verified is False:
        assert "worker-0" not in gpu
    elif verified is True:
        assert gpu == {"worker-0": None}  # reached, at a time nothing keeps
    else:
        assert gpu["worker-0"].isoformat() == verified
