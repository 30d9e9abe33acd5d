"""`upi power ... secure-boot status|on|off`: the real sushy-tools emulator and the DGX fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redfish_support import (
    PASSWORD,
    AmiFake,
    AmiState,
    Emulator,
    Tls,
    fake_system,
    inventory_with_bmcs,
    write_credentials,
)
from typer.testing import CliRunner

from upi.cli import app

UUID0 = "0a5f0c3e-0000-4000-8000-000000000044"
UUID1 = "0a5f0c3e-0000-4000-8000-000000000046"
SB = "/redfish/v1/Systems/Self/SecureBoot"


def _run(runner: CliRunner, *args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def _inventory(example_dir: Path, tls: Tls, bmcs: dict[str, dict[str, Any]], *,
               password: str = PASSWORD) -> Path:
    creds = write_credentials(example_dir / "bmc-admin.yaml", password=password)
    base = {"credentials_file": creds.name, "verify_tls": str(tls.ca_file), "timeout": 5.0}
    return inventory_with_bmcs(example_dir / "dgxpod.yaml",
                               {name: {**base, **bmc} for name, bmc in bmcs.items()})


@pytest.fixture
def emulator(tmp_path: Path, tls: Tls) -> Iterator[Emulator]:
    work = tmp_path / "emu"
    work.mkdir()
    emu = Emulator(work, [fake_system(UUID0, "dgx-a"), fake_system(UUID1, "dgx-b", secure_boot=True)], tls)
    yield emu
    emu.stop()


def _emulated(example_dir: Path, tls: Tls, emulator: Emulator) -> Path:
    return _inventory(example_dir, tls, {"worker-0": {"address": emulator.url, "system_id": UUID0},
                                          "worker-1": {"address": emulator.url, "system_id": UUID1}})


@pytest.mark.slow
def test_secure_boot_status_reads_each_nodes_secureboot_resource(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _emulated(example_dir, tls, emulator)
    res = _run(runner, "power", inv, "secure-boot", "status", "--json")
    assert res.exit_code == 0, res.output
    doc = {d["node"]: d for d in json.loads(res.stdout)}
    assert doc["worker-0"]["secure_boot_enable"] is False
    assert doc["worker-0"]["current_boot"] == "Disabled"
    assert doc["worker-1"]["secure_boot_enable"] is True
    assert doc["worker-1"]["current_boot"] == "Enabled"
    assert doc["worker-1"]["resource"].endswith(f"{UUID1}/SecureBoot")
    table = _run(runner, "power", inv, "secure-boot", "status")
    assert table.exit_code == 0, table.output
    assert "Secure Boot (next boot)" in table.stdout and "worker-1" in table.stdout
    assert PASSWORD not in res.output + table.output


@pytest.mark.slow
def test_secure_boot_on_lands_on_the_emulated_system_and_says_next_boot(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _emulated(example_dir, tls, emulator)
    res = _run(runner, "power", inv, "worker-0", "secure-boot", "on", "--json")
    assert res.exit_code == 0, res.output
    (item,) = json.loads(res.stdout)
    assert item["node"] == "worker-0" and item["secure_boot_enable"] is True
    assert "next boot" in item["sent"] and "next boot" in res.stderr
    assert emulator.get(f"/redfish/v1/Systems/{UUID0}/SecureBoot")["SecureBootEnable"] is True
    # The other system was not named: untouched.
    assert emulator.get(f"/redfish/v1/Systems/{UUID1}/SecureBoot")["SecureBootEnable"] is True
    off = _run(runner, "power", inv, "worker-1", "secure-boot", "off")
    assert off.exit_code == 0, off.output
    assert emulator.get(f"/redfish/v1/Systems/{UUID1}/SecureBoot")["SecureBootEnable"] is False


@pytest.mark.slow
def test_secure_boot_dry_run_changes_nothing(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _emulated(example_dir, tls, emulator)
    res = _run(runner, "power", inv, "worker-0", "secure-boot", "on", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    (item,) = json.loads(res.stdout)
    assert item["sent"] == "would send SecureBootEnable true"
    assert emulator.get(f"/redfish/v1/Systems/{UUID0}/SecureBoot")["SecureBootEnable"] is False


def _ami_inventory(example_dir: Path, tls: Tls, ami: AmiFake, **kw: Any) -> Path:
    return _inventory(example_dir, tls, {"worker-0": {"address": ami.url}}, **kw)


def test_secure_boot_on_sends_the_etag_and_the_current_boot_waits_for_a_reset(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.require_if_match = True
    inv = _ami_inventory(example_dir, tls, ami)
    res = _run(runner, "power", inv, "worker-0", "secure-boot", "on", "--json")
    assert res.exit_code == 0, res.output
    (item,) = json.loads(res.stdout)
    assert item["secure_boot_enable"] is True and item["current_boot"] == "Disabled"
    patches = [p for p in ami.state.patches if p[0] == SB]
    assert patches == [(SB, '"3"', {"SecureBootEnable": True}, True)]
    assert "takes effect at the next boot" in res.stderr
    # Already on: nothing is sent again.
    again = _run(runner, "power", inv, "worker-0", "secure-boot", "on", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)[0]["sent"] == "none"
    assert len([p for p in ami.state.patches if p[0] == SB]) == 1


def test_secure_boot_etag_only_in_the_body_is_sent_as_if_match(
        runner: CliRunner, example_dir: Path, tls: Tls, tmp_path: Path) -> None:
    fake = AmiFake(tls, AmiState(etag_in="body", require_if_match=True, secure_boot=True))
    try:
        inv = _ami_inventory(example_dir, tls, fake)
        res = _run(runner, "power", inv, "secure-boot", "off")
        assert res.exit_code == 0, res.output
        assert fake.state.secure_boot is False
        assert [p[1] for p in fake.state.patches if p[0] == SB] == ['"3"']
    finally:
        fake.stop()


def test_secure_boot_read_back_that_differs_is_exit_1_naming_the_node(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.secure_boot_drop = True
    inv = _ami_inventory(example_dir, tls, ami)
    res = _run(runner, "power", inv, "worker-0", "secure-boot", "on")
    assert res.exit_code == 1, res.output
    assert "worker-0 (BMC " in res.stderr
    assert "reads back off" in res.stderr and "not kept" in res.stderr
    assert "Traceback" not in res.output


def test_secure_boot_refused_by_the_bmc_is_exit_1_with_its_words(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.secure_boot_patch_error = (400, "Base.1.0.PropertyNotWritable",
                                         "The property SecureBootEnable is a read only property.")
    inv = _ami_inventory(example_dir, tls, ami)
    res = _run(runner, "power", inv, "worker-0", "secure-boot", "on")
    assert res.exit_code == 1, res.output
    assert "worker-0 (BMC " in res.stderr and "HTTP 400" in res.stderr
    assert "PropertyNotWritable" in res.stderr and "Secure Boot on" in res.stderr


def test_secure_boot_without_the_resource_is_exit_1_naming_the_node(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.secure_boot_link = False
    inv = _ami_inventory(example_dir, tls, ami)
    for action in ("status", "on"):
        res = _run(runner, "power", inv, "secure-boot", action)
        assert res.exit_code == 1, res.output
        assert "worker-0 (BMC " in res.stderr and "no SecureBoot resource" in res.stderr
    assert not [p for p in ami.state.patches if p[0] == SB]


def test_secure_boot_with_refused_credentials_is_exit_1_without_the_password(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    inv = _ami_inventory(example_dir, tls, ami, password="wrong-pw")
    res = _run(runner, "power", inv, "secure-boot", "on")
    assert res.exit_code == 1, res.output
    assert "worker-0 (BMC " in res.stderr and "refused the credentials" in res.stderr
    assert "wrong-pw" not in res.output and ami.state.secure_boot is False


def test_secure_boot_link_away_from_the_bmc_is_not_followed(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.elsewhere = {"secure_boot": "https://127.0.0.2:1"}
    inv = _ami_inventory(example_dir, tls, ami)
    res = _run(runner, "power", inv, "secure-boot", "on")
    assert res.exit_code == 1, res.output
    assert "not on the BMC's own address" in res.stderr


def test_secure_boot_bad_action_is_a_usage_error(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    inv = _ami_inventory(example_dir, tls, ami)
    res = _run(runner, "power", inv, "secure-boot", "restart")
    assert res.exit_code == 2, res.output
    assert "after secure-boot comes one of status, on, off" in res.stderr
    assert not ami.state.seen
