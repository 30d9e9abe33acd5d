"""A cluster with one worker (a lab with one DGX): accepted, with schedulable masters.

The ingress controller runs two router replicas on distinct nodes, so the
masters take workloads (mastersSchedulable: true through `upi ignition`,
against the FAKE openshift-install) and the 80/443 pools hold the masters and
the worker. Two or more workers and compact clusters are unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_ignition import scheduler_in_bootstrap

from upi.cli import app
from upi.facts import lb_pools
from upi.inventory import load_inventory


def _drop_workers_but_one(inventory: Path) -> tuple[Path, str]:
    """The inventory with every worker line but the first removed; returns it and that worker."""
    text = inventory.read_text()
    workers = re.findall(r"^  - \{name: ([\w-]+), role: worker[^}]*\}\n", text, re.M)
    assert len(workers) >= 2, "the example must have two workers to drop to one"
    blocks = list(re.finditer(r"^  - \{name: [\w-]+, role: worker[^}]*\}\n", text, re.M))
    for block in reversed(blocks[1:]):
        text = text[:block.start()] + text[block.end():]
    out = inventory.with_name("one-worker.yaml")
    out.write_text(text)
    return out, workers[0]


@pytest.mark.parametrize("name", ["dgxpod", "legacy-4.3"])
def test_one_worker_renders_with_a_warning_and_shared_ingress(runner, example_dir: Path,
                                                               tmp_path: Path, name: str) -> None:
    inventory, worker = _drop_workers_but_one(example_dir / f"{name}.yaml")
    result = runner.invoke(app, ["render", str(inventory), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "1 worker" in result.stderr and "mastersSchedulable: true" in result.stderr
    inv = load_inventory(inventory)
    expected = {n.name for n in inv.masters} | {worker}
    cfg = (tmp_path / "out" / "haproxy" / "haproxy.cfg").read_text()
    for pool in lb_pools(inv):
        names = {b.name for b in pool.servers}
        if pool.port in (80, 443):
            assert names == expected
            for b in pool.servers:
                assert re.search(rf"server {b.name} {b.ip}:{pool.port}\b", cfg)
        else:
            assert worker not in names


def test_two_workers_keep_ingress_on_the_workers(example_dir: Path) -> None:
    inv = load_inventory(example_dir / "dgxpod.yaml")
    assert len(inv.workers) >= 2 and not inv.masters_schedulable
    for pool in lb_pools(inv):
        if pool.port in (80, 443):
            assert {b.name for b in pool.servers} == {n.name for n in inv.workers}


@pytest.mark.usefixtures("fake_openshift_install")
def test_one_worker_makes_masters_schedulable_through_ignition(runner, example_dir: Path,
                                                                tmp_path: Path) -> None:
    inventory, _ = _drop_workers_but_one(example_dir / "dgxpod.yaml")
    result = runner.invoke(app, ["ignition", str(inventory), "--dir", str(tmp_path / "assets"),
                                 "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert scheduler_in_bootstrap(tmp_path / "assets")["spec"]["mastersSchedulable"] is True
    assert "mastersSchedulable: true" in result.stdout
