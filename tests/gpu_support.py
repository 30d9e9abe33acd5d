"""A fake GPU cluster matching the dgxpod inventory, and the inventory with GPU counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import inventory_path
from fake_gpu import FakeGpuCluster, SimNode

W = "install_disk: /dev/nvme0n1, gpu: true}"


def gpu_inventory(tmp_path: Path, extra: str = "", gpus: int = 8) -> Path:
    """dgxpod with `gpus: N` on both DGX workers (plus `extra` top-level YAML)."""
    text = (
        inventory_path("dgxpod").read_text().replace(W, W.replace("gpu: true}", f"gpu: true, gpus: {gpus}}}"))
    )
    inv = tmp_path / "dgxpod.yaml"
    inv.write_text(text + extra)
    return inv


def sim_nodes(gpus: int = 8) -> list[SimNode]:
    """The dgxpod cluster's nodes: masters without GPUs, two DGX H100s."""
    return [SimNode(f"master-{i}") for i in range(3)] + [SimNode("worker-0", gpus), SimNode("worker-1", gpus)]


def start_cluster(tmp_path: Path, nodes: list[SimNode] | None = None, **kw: object) -> FakeGpuCluster:
    return FakeGpuCluster(tmp_path / "kube", nodes or sim_nodes(), **kw).start()  # type: ignore[arg-type]


def clean_cluster(tmp_path: Path, nodes: list[SimNode] | None = None) -> Iterator[FakeGpuCluster]:
    """A fixture body: a started fake GPU cluster, stopped after the test, which must have
    rejected nothing against the real CRD schemas and seen no controller error."""
    fake = start_cluster(tmp_path, nodes)
    yield fake
    fake.stop()
    assert fake.api.schema_violations == []
    assert fake.api.controller_errors == []


def second_run(runner: Any, inv: Path, cluster: FakeGpuCluster, timeout: str) -> dict[str, Any]:
    """`upi gpu` twice on the same cluster: the second run's JSON report, which must change nothing."""
    import json

    from upi.cli import app

    assert runner.invoke(app, gpu_args(inv, cluster, timeout=timeout)).exit_code == 0
    result = runner.invoke(app, gpu_args(inv, cluster, "--json", timeout=timeout))
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["changed"] is False, [c for c in doc["changes"] if c["action"] != "unchanged"]
    return doc


def gpu_args(inv: Path, cluster: FakeGpuCluster, *extra: str, timeout: str = "0.5") -> list[str]:
    return [
        "gpu",
        str(inv),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--poll",
        "0.05",
        "--timeout",
        timeout,
        *extra,
    ]


def gpu_once(runner: Any, tmp_path: Path, nodes: list[SimNode] | None, inv: Path, *extra: str,
             timeout: str = "0.5") -> tuple[FakeGpuCluster, Any]:
    """`upi gpu INV EXTRA...` once against a fresh fake cluster of `nodes`, stopped afterwards."""
    from upi.cli import app

    fake = start_cluster(tmp_path, nodes)
    try:
        return fake, runner.invoke(app, gpu_args(inv, fake, *extra, timeout=timeout))
    finally:
        fake.stop()


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
