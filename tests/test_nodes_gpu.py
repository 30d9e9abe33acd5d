"""The GPU step of `upi nodes add` (upi.day2.gpu): only the new GPU nodes judged, nothing re-applied.

Against the FAKE GPU cluster (tests/fake_gpu.py), its operators installed first by `upi gpu`.
"""

from __future__ import annotations

from pathlib import Path

from fake_gpu import SimNode
from gpu_support import gpu_args, gpu_inventory, sim_nodes, start_cluster
from typer.testing import CliRunner

from upi.cli import app
from upi.csr.connect import connect
from upi.day2.gpu import verify_gpu_nodes
from upi.gpu.kube import Kube
from upi.gpu.steps import Clock
from upi.inventory import load_inventory


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
    # only validation pods and the Nodes' verdict annotations: no operator, policy or NFD object
    assert all("/pods" in r[1] or "/nodes/" in r[1] for r in writes), writes
