"""`upi wait --gpu` with rdma: nodes goes through the same RDMA steps as `upi gpu` (run_gpu).

The FAKE openshift-install drives the install; the FAKE GPU cluster with its
fake Network Operator (tests/fake_network.py) answers the API afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_gpu import FakeGpuCluster
from gpu_support import clean_cluster
from rdma_support import rdma_inventory
from wait_support import make_assets, script

from upi.cli import app

pytestmark = pytest.mark.usefixtures("fake_openshift_install")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def test_wait_gpu_installs_the_network_operator_before_gpudirect(runner, tmp_path, example_dir,
                                                                  cluster, monkeypatch) -> None:
    inventory = rdma_inventory(example_dir)
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inventory, tmp_path)
    result = runner.invoke(app, ["wait", str(inventory), "--dir", str(assets), "--kubeconfig",
                                 str(cluster.kubeconfig), "--retry-pause", "0", "--keep-bootstrap",
                                 "--no-vms", "--no-approve", "--gpu", "--gpu-poll", "0.05",
                                 "--gpu-timeout", "1"])
    assert result.exit_code == 0, result.output + cluster.dump()
    stages = [line for line in result.stdout.splitlines() if line.startswith("== ")]
    order = [s for s in stages if s in ("== operands: done", "== Network Operator: started",
                                        "== Network Operator: done", "== ClusterPolicy ready: started")]
    assert order == ["== operands: done", "== Network Operator: started", "== Network Operator: done",
                     "== ClusterPolicy ready: started"]
    policy = cluster.api.get("mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy")
    assert policy is not None and policy["status"]["state"] == "ready"
    cp = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert cp is not None and cp["spec"]["driver"]["rdma"] == {"enabled": True}
    # Then the RDMA verification, as `upi gpu` runs it: its stage, both tables, the pair's figure.
    assert "== verify RDMA: done" in stages
    out = result.stdout.splitlines()
    assert "RDMA nodes" in out and "RDMA pairs (ib_write_bw, GPU memory to GPU memory)" in out
    pair = next(line.split() for line in out if line.startswith("worker-0<->worker-1"))
    assert pair[1:4] == ["infiniband", "1", "392.00"] and "passed" in pair
