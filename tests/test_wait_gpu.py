"""`upi wait --gpu`: from install-complete on into the GPU steps, ending at "GPUs verified".

The FAKE openshift-install drives the install; the FAKE GPU cluster
(tests/fake_gpu.py) answers the API afterwards, validating every object upi
writes against the real CRD schemas. The runs keep the bootstrap, leave VMs
alone and approve no CSRs (--no-approve): test_wait_cli.py covers those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import table_row
from fake_gpu import FakeGpuCluster, SimNode
from gpu_support import clean_cluster, gpu_inventory, sim_nodes
from wait_support import installer_log, make_assets, script, state

from upi.cli import app

pytestmark = pytest.mark.usefixtures("fake_openshift_install")
GPU_STAGES = ["pre-flight", "GPU pool", "NFD operator", "GPU operator", "operands", "ClusterPolicy ready",
              "verify nodes", "diagnose", "metrics"]


@pytest.fixture
def inventory(example_dir: Path) -> Path:
    return gpu_inventory(example_dir)  # next to the pull secret and SSH key it names


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def wait_gpu(runner, inventory: Path, assets: Path, cluster: FakeGpuCluster, *extra: str):
    return runner.invoke(app, ["wait", str(inventory), "--dir", str(assets), "--kubeconfig",
                               str(cluster.kubeconfig), "--retry-pause", "0", "--keep-bootstrap",
                               "--no-vms", "--no-approve", "--gpu", "--gpu-poll", "0.05",
                               "--gpu-timeout", "0.5", *extra])


def _stage_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("== ")]


def test_install_goes_on_to_gpus_verified(runner, tmp_path, inventory, cluster, monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inventory, tmp_path)
    result = wait_gpu(runner, inventory, assets, cluster)
    assert result.exit_code == 0, result.output + cluster.dump()
    out = result.stdout
    stages = _stage_lines(out)
    # The GPU steps start only after install-complete, in order, each finishing.
    done_at = stages.index("== install-complete: done")
    assert stages[done_at + 1:] == [f"== {s}: {m}" for s in GPU_STAGES for m in ("started", "done")]
    assert out.rstrip().endswith("GPUs verified on every GPU node")
    assert table_row(out, "worker-0", "pci-10de.present", "NVIDIA-H100-80GB-HBM3", "8/8")
    assert state(assets) == {"bootstrap_complete", "install_complete"}
    # The same steps as `upi gpu`: the GPU Operator's InstallPlan approved, the ClusterPolicy ready.
    assert len(cluster.approved_plans) == 2
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None and policy["status"]["state"] == "ready"


def test_a_rerun_resumes_after_install_and_changes_nothing(runner, tmp_path, inventory, cluster,
                                                           monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inventory, tmp_path)
    assert wait_gpu(runner, inventory, assets, cluster).exit_code == 0
    runs = installer_log(assets).count("for the Kubernetes API at")
    rv = {k: o["metadata"]["resourceVersion"] for k, o in cluster.api.objects.items()
          if k[0].kind not in ("Pod", "Node")}
    again = wait_gpu(runner, inventory, assets, cluster, "--json")
    assert again.exit_code == 0, again.output
    assert "== install-complete: already done" in again.stderr
    assert installer_log(assets).count("for the Kubernetes API at") == runs  # no installer run
    doc = json.loads(again.stdout)
    assert doc["ok"] is True and doc["gpu"]["ok"] is True and doc["gpu"]["changed"] is False
    assert {c["action"] for c in doc["gpu"]["changes"]} == {"unchanged"}
    assert [n["validation"] for n in doc["gpu"]["nodes"]] == ["passed", "passed"]
    assert rv == {k: o["metadata"]["resourceVersion"] for k, o in cluster.api.objects.items()
                  if k[0].kind not in ("Pod", "Node")}


def test_a_gpu_failure_after_the_install_exits_1_with_the_diagnosis(runner, tmp_path, inventory,
                                                                    monkeypatch) -> None:
    nodes = sim_nodes()
    nodes[4] = SimNode("worker-1", 8, allocatable_gpus=7)
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inventory, tmp_path)
    for fake in clean_cluster(tmp_path, nodes):
        result = wait_gpu(runner, inventory, assets, fake, "--json")
    assert result.exit_code == 1, result.output
    assert state(assets) == {"bootstrap_complete", "install_complete"}  # the install itself is kept
    assert "== verify nodes: failed" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["stages"][-1]["status"] == "done"
    assert doc["gpu"]["diagnosis"]["step"] == "verify nodes"
    assert doc["gpu"]["diagnosis"]["object"] == "Node worker-1"
    assert doc["gpu"]["diagnosis"]["problem"] == "allocatable nvidia.com/gpu is 7, the inventory says 8"


def test_gpu_without_gpu_nodes_is_refused_before_waiting(runner, tmp_path, example_dir, cluster,
                                                         monkeypatch) -> None:
    inv = example_dir / "dgxpod.yaml"
    inv.write_text(inv.read_text().replace(", gpu: true", ""))
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inv, tmp_path)
    result = wait_gpu(runner, inv, assets, cluster)
    assert result.exit_code == 2
    assert result.stderr == f"upi: error: --gpu: {inv} marks no node gpu: true; nothing to set up\n"
    assert "for the Kubernetes API" not in installer_log(assets)


def test_a_bad_gpu_timeout_is_refused_before_waiting(runner, tmp_path, inventory, cluster,
                                                     monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    assets = make_assets(runner, inventory, tmp_path)
    result = wait_gpu(runner, inventory, assets, cluster, "--gpu-timeout", "0")
    assert result.exit_code == 2
    assert result.stderr == "upi: error: --gpu-timeout must be a positive number of minutes\n"
    assert "for the Kubernetes API" not in installer_log(assets)
