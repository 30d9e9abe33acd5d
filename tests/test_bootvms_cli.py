"""`upi boot-vms` as a user runs it, on libvirt's test driver (fresh state at every open)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bootvms_support import node_uri, require_libvirt, shut_off
from conftest import inventory_path

from upi.cli import app
from upi.facts import vm_specs
from upi.inventory import load_inventory
from upi.render import domain_xml

DGXPOD = str(inventory_path("dgxpod"))
VMS = ["bootstrap", "master-0", "master-1", "master-2"]


@pytest.fixture(autouse=True)
def _libvirt() -> None:
    require_libvirt()


def installed_vms(tmp_path: Path, *, running: bool = False) -> str:
    """A hypervisor already holding the inventory's VMs in their install phase."""
    specs = vm_specs(load_inventory(inventory_path("dgxpod"), check_files=False))
    xmls = [domain_xml(s) if running else shut_off(domain_xml(s)) for s in specs]
    return node_uri(tmp_path, *(x[x.index("<domain"):] for x in xmls))


def test_boot_vms_creates_and_starts_every_vm(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", node_uri(tmp_path)])
    assert result.exit_code == 0, result.output
    expected = []
    for name in VMS:
        expected += [
            f"{name}: disk created (100 GiB /var/lib/libvirt/images/dgxpod-{name}.qcow2)",
            f"{name}: defined (network boot, then disk)",
            f"{name}: started (installing over PXE)",
        ]
    assert result.stdout.splitlines() == [*expected, "4 VMs: 4 created, 0 recreated, 0 left alone"]


def test_existing_vms_with_the_same_mac_are_left_alone(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", installed_vms(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        *(f"{n}: exists (same name and MAC: left alone, shut off)" for n in VMS),
        "4 VMs: 0 created, 0 recreated, 4 left alone",
    ]


def test_a_vm_that_differs_is_an_error_naming_the_difference(runner, tmp_path: Path) -> None:
    spec = vm_specs(load_inventory(inventory_path("dgxpod"), check_files=False))[1]
    xml = domain_xml(spec).replace("52:54:00:21:03:50", "52:54:00:aa:bb:cc").replace(
        "<vcpu placement='static'>4", "<vcpu placement='static'>2")
    uri = node_uri(tmp_path, xml[xml.index("<domain"):])
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "upi: error: nothing changed:\n"
        f"  master-0 on {uri}: domain exists but differs: MAC 52:54:00:aa:bb:cc "
        "(inventory 52:54:00:21:03:50); vcpus 2 (inventory 4) (--replace redefines it)\n")


def test_no_storage_pool_for_the_image_dir_is_an_error(runner, tmp_path: Path) -> None:
    uri = node_uri(tmp_path, pool_dir=None)
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1] == (
        f"  bootstrap on {uri}: no active storage pool holds /var/lib/libvirt/images (define one: "
        "virsh pool-define-as NAME dir --target /var/lib/libvirt/images; virsh pool-start NAME)")


def test_dry_run_prints_the_plan_and_the_domain_xml(runner, tmp_path: Path) -> None:
    uri = node_uri(tmp_path)
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri, "--dry-run"])
    assert result.exit_code == 0, result.output
    specs = vm_specs(load_inventory(inventory_path("dgxpod"), check_files=False))
    assert result.stdout == "".join(
        f"# {s.name} on {uri}: would create 100 GiB disk in pool default, define, start\n"
        + domain_xml(s) for s in specs)


def test_json_lists_each_vm_with_its_action(runner, tmp_path: Path) -> None:
    uri = installed_vms(tmp_path)
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0] == {
        "name": "bootstrap", "hypervisor": uri, "action": "keep",
        "plan": "same name and MAC: left alone, shut off"}


def test_watch_starts_from_disk_the_vms_whose_install_powered_them_off(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", installed_vms(tmp_path), "--watch"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for name in VMS:
        assert [x for x in lines if x.startswith(f"{name}: ")] == [
            f"{name}: exists (same name and MAC: left alone, shut off)",
            f"{name}: powered off (install finished)",
            f"{name}: switched (boots from disk now)",
            f"{name}: started (from disk)",
            f"{name}: up (running from disk)",
        ]


def test_watch_ends_at_the_timeout_naming_the_vms_not_back(runner, tmp_path: Path) -> None:
    uri = installed_vms(tmp_path, running=True)
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri, "--watch", "--timeout", "0.2"])
    assert result.exit_code == 1
    assert result.stderr == ("upi: error: timed out after 0.2 s; not running from disk yet: "
                             "bootstrap, master-0, master-1, master-2\n")
    assert "bootstrap: installing (booted from the network)" in result.stdout


def test_destroy_removes_the_named_vm(runner, tmp_path: Path) -> None:
    uri = installed_vms(tmp_path)
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri, "--destroy", "bootstrap"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "bootstrap: destroyed (removed domain)\n"


def test_destroy_refuses_a_node_that_is_not_a_vm(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", node_uri(tmp_path),
                                 "--destroy", "worker-0"])
    assert result.exit_code == 2
    assert result.stderr == (f"upi: error: worker-0 is not a VM node of {DGXPOD} "
                             "(VM nodes: bootstrap, master-0, master-1, master-2)\n")


def test_destroy_refuses_a_domain_with_another_mac(runner, tmp_path: Path) -> None:
    spec = vm_specs(load_inventory(inventory_path("dgxpod"), check_files=False))[0]
    xml = domain_xml(spec).replace(spec.mac, "52:54:00:aa:bb:cc")
    uri = node_uri(tmp_path, xml[xml.index("<domain"):])
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", uri, "--destroy", "bootstrap"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"upi: error: {uri}: domain bootstrap does not have the inventory's MAC 52:54:00:21:03:53: "
        "not destroying a VM the inventory does not describe\n")


@pytest.mark.parametrize(("flags", "message"), [
    (["--destroy", "bootstrap", "--watch"], "--destroy cannot be combined with --watch or --replace"),
    (["--watch", "--dry-run"], "--watch cannot be combined with --dry-run"),
    (["--timeout", "0"], "--timeout must be positive, not 0"),
])
def test_flags_that_cannot_work_together_are_usage_errors(runner, flags, message) -> None:
    result = runner.invoke(app, ["boot-vms", DGXPOD, *flags])
    assert result.exit_code == 2
    assert result.stderr == f"upi: error: {message}\n"


def test_without_libvirt_python_the_error_names_the_extra(runner, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "libvirt", None)  # import libvirt now raises ImportError
    result = runner.invoke(app, ["boot-vms", DGXPOD, "--connect", node_uri(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == (
        "upi: error: libvirt-python is not installed; install upi's libvirt extra: "
        "`pipx inject upi-openshift-dgx libvirt-python` where pipx installed upi, or "
        "`pip install -e '.[libvirt]'` in the checkout with the virtualenv's pip (libvirt-python "
        "compiles: gcc, pkg-config, python3-dev and libvirt-dev on Debian; libvirt-devel and "
        "python3-devel on RHEL)\n")


def test_dry_run_previews_even_when_the_hypervisor_is_unreachable(runner, tmp_path) -> None:
    result = runner.invoke(app, ["boot-vms", str(inventory_path("dgxpod")), "--dry-run",
                                 "--connect", f"test://{tmp_path}/missing-node.xml"])
    assert result.exit_code == 0, result.output
    assert "# bootstrap on test://" in result.output
    assert "would create a 100 GiB disk, define, start (not checked against the hypervisor:" in result.output
    assert "<mac address='52:54:00:21:03:53'/>" in result.output
