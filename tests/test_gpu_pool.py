"""The DGX pool (issue 31): the `gpu_pool:` section, and `upi gpu` making the GPU nodes a tuned pool.

The fake cluster's machine config operator (tests/fake_mco.py) renders the
pool's config and rolls it out node by node, as the real one does; every object
upi writes is checked against the real CRDs (tests/data/tuning).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_support import gpu_inventory

from upi.cli import app
from upi.inventory.loader import load_inventory


def test_the_pool_defaults_when_the_section_is_absent(tmp_path: Path) -> None:
    from upi.inventory.gpupool import pool_settings

    pool = pool_settings(load_inventory(gpu_inventory(tmp_path), check_files=False))
    assert (pool.name, pool.taint and pool.taint.key, pool.taint and pool.taint.effect) == (
        "dgx", "nvidia.com/gpu", "NoSchedule")
    assert (pool.tuning.cpu_manager, pool.tuning.topology_manager, pool.diagnosis_level, pool.metrics) == (
        "static", "restricted", 1, True)


def test_taint_none_means_no_taint(tmp_path: Path) -> None:
    from upi.inventory.gpupool import pool_taint

    inv = load_inventory(gpu_inventory(tmp_path, "gpu_pool:\n  taint: none\n"), check_files=False)
    assert pool_taint(inv) is None


@pytest.mark.parametrize(
    ("section", "line", "message"),
    [
        ("  name: worker\n", 2, "gpu_pool.name: 'worker' is not a pool name"),
        ("  taint: {key: 'bad key!'}\n", 2, "gpu_pool.taint.key: 'bad key!' is not a taint key"),
        ("  taint: {effect: Never}\n", 2, "gpu_pool.taint.effect"),
        ("  tuning:\n    reserved_cpus: 3-1\n", 3,
         "gpu_pool.tuning.reserved_cpus: '3-1': the range 3-1 runs"),
        ("  tuning:\n    hugepages: [{size: 1G, count: 4}, {size: 1G, count: 2}]\n", 3,
         "gpu_pool.tuning.hugepages: the size 1G is given twice"),
        ("  tuning:\n    hugepages: [{size: 4M, count: 4}]\n", 3, "gpu_pool.tuning.hugepages[0].size"),
        ("  tuning:\n    performance_profile: {cpu: {reserved: 0-1}}\n", 3,
         "gpu_pool.tuning.performance_profile: a PerformanceProfile spec needs cpu.reserved"),
        ("  diagnosis_level: 7\n", 2, "gpu_pool.diagnosis_level: 7 is out of range: it must be at most 4"),
        ("  metrics: maybe\n", 2, "gpu_pool.metrics"),
        ("  tunning: {}\n", 2, "gpu_pool"),
    ],
)
def test_a_bad_pool_section_is_exit_2_naming_file_field_and_line(
    runner, tmp_path: Path, section: str, line: int, message: str
) -> None:
    inv = gpu_inventory(tmp_path)
    base = len(inv.read_text().splitlines())
    inv.write_text(inv.read_text() + "gpu_pool:\n" + section)
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2, result.output
    assert f"{inv}:{base + line}: {message}" in result.output
    assert "Traceback" not in result.output
