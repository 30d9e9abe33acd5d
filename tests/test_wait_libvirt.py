"""`upi wait` without libvirt-python: refused at the start when its VM work needs it, not an hour in.

libvirt is hidden as an admin's `pipx install .` (no libvirt extra) has it:
`import libvirt` raises ImportError. The FAKE installer and API server stand in
for the cluster; a refused run must not have run `openshift-install wait-for`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path
from fake_apiserver import FakeApiServer
from wait_support import installer_log, make_assets, script, state, wait_args

from upi.cli import app
from upi.vms.libvirt_ops import INSTALL_LIBVIRT

INVENTORY = inventory_path("dgxpod")
VMS = "bootstrap, master-0, master-1, master-2"
RESTART = f"start {VMS} from disk after their install"
DESTROY = "destroy the bootstrap VM bootstrap once bootstrapped"

pytestmark = pytest.mark.usefixtures("fake_openshift_install")


@pytest.fixture(autouse=True)
def no_libvirt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "libvirt", None)  # `import libvirt` now raises ImportError


def refusal(inventory: Path, *work: str) -> str:
    return (f"upi: error: {inventory}: upi wait would {' and '.join(work)} through libvirt, but "
            f"libvirt-python is not installed; {INSTALL_LIBVIRT}. Or, if you start and destroy the VMs "
            "yourself, pass --no-vms\n")


def _record(assets: Path, *stages: str) -> None:
    """A resumed run: stages an earlier `upi wait` recorded (the format of upi/wait/state.py)."""
    (assets / ".upi-wait.json").write_text(json.dumps({"done": dict.fromkeys(stages, 60.0)}))


@pytest.mark.parametrize(("flags", "work"), [
    ((), (RESTART, DESTROY)),
    (("--keep-bootstrap",), (RESTART,)),
    (("--connect", "qemu:///system"), (RESTART, DESTROY)),  # another hypervisor is still libvirt
])
def test_vm_nodes_without_libvirt_python_are_refused_before_anything_runs(
        runner, tmp_path: Path, kube: FakeApiServer, monkeypatch, flags: tuple[str, ...],
        work: tuple[str, ...]) -> None:
    assets = make_assets(runner, INVENTORY, tmp_path)
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube, *flags))
    assert result.exit_code == 2, result.output
    assert result.stderr == refusal(INVENTORY, *work)
    assert "wait-for" not in installer_log(assets)
    assert state(assets) == set()


def test_the_refusal_is_one_json_error_under_json(runner, tmp_path: Path, kube: FakeApiServer,
                                                  monkeypatch) -> None:
    assets = make_assets(runner, INVENTORY, tmp_path)
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube, "--json"))
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and "libvirt-python is not installed" in doc["error"]


def test_resumed_after_bootstrap_complete_only_the_bootstrap_vm_needs_libvirt(
        runner, tmp_path: Path, kube: FakeApiServer, monkeypatch) -> None:
    assets = make_assets(runner, INVENTORY, tmp_path)
    script(monkeypatch, tmp_path)
    _record(assets, "bootstrap_complete")  # the shepherd's work is over; the removal is not
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube))
    assert result.exit_code == 2, result.output
    assert result.stderr == refusal(INVENTORY, DESTROY)


def test_resumed_after_the_bootstrap_is_removed_nothing_needs_libvirt(
        runner, tmp_path: Path, kube: FakeApiServer, monkeypatch) -> None:
    assets = make_assets(runner, INVENTORY, tmp_path)
    script(monkeypatch, tmp_path)
    _record(assets, "bootstrap_complete", "bootstrap_removed")
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube))
    assert result.exit_code == 0, result.output
    assert "== install-complete: done" in result.stdout
    assert "libvirt" not in result.output


@pytest.mark.parametrize("flags", [("--no-vms", "--keep-bootstrap"), ("--no-vms",)])
def test_no_vms_says_the_vms_are_handled_elsewhere(runner, tmp_path: Path, kube: FakeApiServer, monkeypatch,
                                                   flags: tuple[str, ...]) -> None:
    assets = make_assets(runner, INVENTORY, tmp_path)
    # The bootstrap fails at once: the run got past its start; nothing was removed.
    script(monkeypatch, tmp_path, bootstrap_complete=["bootstrap-failed"])
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube, *flags))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("upi: error: wait-for bootstrap-complete failed (exit 5")
    assert "libvirt" not in result.output


def test_a_control_plane_of_metal_needs_no_libvirt(runner, tmp_path: Path, example_dir: Path,
                                                   kube: FakeApiServer, monkeypatch) -> None:
    inventory = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inventory.read_text())
    for node in doc["nodes"]:
        node["machine"] = "metal"
    inventory.write_text(yaml.safe_dump(doc))
    assets = make_assets(runner, inventory, tmp_path)
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(inventory, assets, kube, "--keep-bootstrap", "--no-metal"))
    assert result.exit_code == 0, result.output
    assert "== install-complete: done" in result.stdout
    assert "libvirt" not in result.output


def test_a_metal_bootstrap_with_vm_masters_needs_libvirt_for_the_masters_only(
        runner, tmp_path: Path, example_dir: Path, kube: FakeApiServer, monkeypatch) -> None:
    inventory = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inventory.read_text())
    doc["nodes"][0]["machine"] = "metal"
    inventory.write_text(yaml.safe_dump(doc))
    assets = make_assets(runner, inventory, tmp_path)
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(inventory, assets, kube))
    assert result.exit_code == 2, result.output
    assert result.stderr == refusal(inventory,
                                    "start master-0, master-1, master-2 from disk after their install")
