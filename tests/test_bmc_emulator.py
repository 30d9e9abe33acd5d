"""`upi power` and `upi boot-metal` against the real sushy-tools emulator (fake driver, HTTPS, basic auth)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from redfish_support import (
    PASSWORD,
    Emulator,
    Silent,
    Tls,
    fake_system,
    inventory_with_bmcs,
    make_tls,
    write_credentials,
)
from typer.testing import CliRunner

from upi.cli import app

pytestmark = pytest.mark.slow

UUID0 = "0a5f0c3e-0000-4000-8000-000000000044"
UUID1 = "0a5f0c3e-0000-4000-8000-000000000046"


@pytest.fixture
def emulator(tmp_path: Path, tls: Tls) -> Iterator[Emulator]:
    work = tmp_path / "emu"
    work.mkdir()
    emu = Emulator(work, [fake_system(UUID0, "dgx-a", power="Off"),
                          fake_system(UUID1, "dgx-b", power="On", secure_boot=True)], tls)
    yield emu
    emu.stop()


def _inventory(example_dir: Path, tls: Tls, url: str, **overrides: Any) -> Path:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    base = {"address": url, "credentials_file": creds.name, "verify_tls": str(tls.ca_file), "timeout": 5.0}
    return inventory_with_bmcs(example_dir / "dgxpod.yaml", {
        "worker-0": {**base, "system_id": UUID0, **overrides},
        "worker-1": {**base, "system_id": UUID1, **overrides},
    })


def _run(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(app, [*map(str, args)])


def test_status_shows_power_override_and_secure_boot_of_each_node(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url)
    res = _run(runner, "power", inv, "status", "--json")
    assert res.exit_code == 0, res.output
    doc = {d["node"]: d for d in json.loads(res.stdout)}
    assert doc["worker-0"]["power"] == "Off" and doc["worker-1"]["power"] == "On"
    assert doc["worker-0"]["secure_boot"] is False and doc["worker-1"]["secure_boot"] is True
    assert doc["worker-0"]["system"].endswith(UUID0)
    # gpu.driver auto: worker-1's Secure Boot makes it precompiled (signed): nothing to warn about.
    assert "built on the node, unsigned" not in " ".join(res.stderr.split())
    table = _run(runner, "power", inv, "status")
    assert "worker-0" in table.stdout and "Secure Boot" in table.stdout
    assert PASSWORD not in res.output + table.output


def _wait_power(emulator: Emulator, uuid: str, want: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        got = str(emulator.get(f"/redfish/v1/Systems/{uuid}")["PowerState"])
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_power_on_and_off_land_on_the_emulated_system(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url)
    res = _run(runner, "power", inv, "worker-0", "on", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["reset"] == "On"
    assert _wait_power(emulator, UUID0, "On") == "On"  # the fake driver applies it 1-11 s later
    res = _run(runner, "power", inv, "worker-0", "off")
    assert res.exit_code == 0, res.output
    assert _wait_power(emulator, UUID0, "Off") == "Off"


def test_dry_run_reads_but_changes_nothing(runner: CliRunner, example_dir: Path, tls: Tls,
                                           emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url)
    res = _run(runner, "power", inv, "worker-0", "on", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["reset"] == "would send On"
    time.sleep(1.5)
    assert emulator.get(f"/redfish/v1/Systems/{UUID0}")["PowerState"] == "Off"
    dry = _run(runner, "boot-metal", inv, "worker-0", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert emulator.get(f"/redfish/v1/Systems/{UUID0}")["Boot"]["BootSourceOverrideTarget"] != "Pxe"


def test_boot_metal_sets_network_boot_and_powers_each_node(
        runner: CliRunner, example_dir: Path, tls: Tls, emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url)
    # worker-1's domain boots with Secure Boot on: the render must hand it shim + signed GRUB.
    plain = _run(runner, "boot-metal", inv, "worker-1", "--dry-run")
    assert plain.exit_code == 1 and "the BMC reports Secure Boot on" in plain.stderr
    doc = yaml.safe_load(inv.read_text())
    next(n for n in doc["nodes"] if n["name"] == "worker-1")["secure_boot"] = True
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = _run(runner, "boot-metal", inv, "--json")
    assert res.exit_code == 0, res.output
    doc = {d["node"]: d for d in json.loads(res.stdout)}
    assert doc["worker-0"]["reset"] == "On"  # was off
    assert doc["worker-1"]["reset"] == "ForceRestart"  # was on
    for uuid in (UUID0, UUID1):
        system = emulator.get(f"/redfish/v1/Systems/{uuid}")
        assert system["Boot"]["BootSourceOverrideTarget"] == "Pxe"
        assert system["Boot"]["BootSourceOverrideMode"] == "UEFI"
        assert system["PowerState"] == "On"
    # gpu.driver auto: worker-1's Secure Boot makes it precompiled (signed): nothing to warn about.
    assert "built on the node, unsigned" not in " ".join(res.stderr.split())


def test_wrong_password_is_a_401_naming_the_node(runner: CliRunner, example_dir: Path, tls: Tls,
                                                 emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url)
    write_credentials(example_dir / "bmc-admin.yaml", password="not-the-password")
    res = _run(runner, "power", inv, "worker-0", "status")
    assert res.exit_code == 1
    assert "worker-0 (BMC " in res.stderr and "refused the credentials" in res.stderr
    assert "HTTP 401" in res.stderr and "Traceback" not in res.output
    assert "not-the-password" not in res.output


def test_unknown_ca_fails_tls_verification(runner: CliRunner, example_dir: Path, tls: Tls,
                                           emulator: Emulator, tmp_path: Path) -> None:
    other = make_tls(tmp_path / "other", "other")
    inv = _inventory(example_dir, tls, emulator.url, verify_tls=str(other.ca_file))
    res = _run(runner, "power", inv, "worker-0", "status")
    assert res.exit_code == 1
    assert "worker-0" in res.stderr and "TLS verification failed" in res.stderr
    assert "verify_tls" in res.stderr


def test_verify_false_works_and_is_warned_at_every_use(runner: CliRunner, example_dir: Path, tls: Tls,
                                                       emulator: Emulator) -> None:
    inv = _inventory(example_dir, tls, emulator.url, verify_tls=False)
    for _ in range(2):
        res = _run(runner, "power", inv, "status")
        assert res.exit_code == 0, res.output
        assert res.stderr.count("TLS certificate NOT verified") == 2  # once per node, every run


def test_several_systems_and_no_id_is_refused(runner: CliRunner, example_dir: Path, tls: Tls,
                                              emulator: Emulator) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": emulator.url, "credentials_file": creds.name, "verify_tls": str(tls.ca_file)}})
    res = _run(runner, "power", inv, "status")
    assert res.exit_code == 1
    assert "manages 2 systems" in res.stderr and "bmc.system_id" in res.stderr
    assert UUID0 in res.stderr


def test_unreachable_bmc_times_out_naming_the_node(runner: CliRunner, example_dir: Path, tls: Tls,
                                                   emulator: Emulator) -> None:
    silent = Silent()
    try:
        creds = write_credentials(example_dir / "bmc-admin.yaml")
        inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {
            "worker-0": {"address": silent.url, "credentials_file": creds.name, "timeout": 1.0,
                         "verify_tls": str(tls.ca_file)},
            "worker-1": {"address": emulator.url, "credentials_file": creds.name, "system_id": UUID1,
                         "verify_tls": str(tls.ca_file)}})
        started = time.monotonic()
        res = _run(runner, "power", inv, "status", "--json")
        elapsed = time.monotonic() - started
    finally:
        silent.stop()
    assert res.exit_code == 1
    assert "worker-0 (BMC " in res.stderr and "no answer within 1 s" in res.stderr
    doc = {d["node"]: d for d in json.loads(res.stdout)}
    assert doc["worker-1"]["power"] == "On"  # the other node is still reported
    assert "error" in doc["worker-0"]
    assert elapsed < 30, "one unreachable BMC must not hold the command for minutes"
