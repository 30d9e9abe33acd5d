"""The DGX (AMI) path: settings object, ETags, silently dropped PATCHes; and the inventory's bmc rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from redfish_support import (
    PASSWORD,
    USER,
    AmiFake,
    Tls,
    inventory_with_bmcs,
    write_credentials,
)
from typer.testing import CliRunner

from upi.cli import app


def _inventory(example_dir: Path, tls: Tls, url: str, **bmc: Any) -> Path:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    section = {"address": url, "credentials_file": creds.name, "verify_tls": str(tls.ca_file),
               "timeout": 5.0, **bmc}
    return inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": section})


def _run(runner: CliRunner, *args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def test_the_fake_drops_a_patch_without_the_etag(ami: AmiFake, tls: Tls) -> None:
    """The fake is faithful where it matters: a plain PATCH (no If-Match) is accepted and lost."""
    url = ami.url + "/redfish/v1/Systems/Self/SD"
    r = requests.patch(url, json={"Boot": {"BootSourceOverrideTarget": "Pxe"}}, auth=(USER, PASSWORD),
                       verify=str(tls.ca_file), timeout=5)
    assert r.status_code == 204
    assert ami.state.pending == {}
    assert requests.get(url, auth=(USER, PASSWORD), verify=str(tls.ca_file),
                        timeout=5).json()["Boot"]["BootSourceOverrideTarget"] == "None"


def test_boot_override_lands_in_the_settings_object_with_its_etag(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    inv = _inventory(example_dir, tls, ami.url)
    res = _run(runner, "boot-metal", inv, "worker-0", "--json")
    assert res.exit_code == 0, res.output
    st = ami.state
    kept = [p for p in st.patches if p[3]]
    assert kept, f"no PATCH was kept: {st.patches}"
    path, if_match, body, _ = kept[0]
    assert path == "/redfish/v1/Systems/Self/SD" and if_match == '"7"'
    assert body["Boot"] == {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once",
                            "BootSourceOverrideMode": "UEFI"}
    # It was off: powered on, and the reset applied the pending one-time network boot.
    assert st.resets == ["On"] and st.power == "On"
    assert st.boot["BootSourceOverrideTarget"] == "Pxe" and st.boot["BootSourceOverrideEnabled"] == "Once"
    doc = json.loads(res.stdout)[0]
    assert doc["boot_override"] == {"enabled": "Once", "target": "Pxe", "mode": "UEFI"}
    assert doc["reset"] == "On"


def test_a_node_already_on_is_force_restarted(runner: CliRunner, example_dir: Path, tls: Tls,
                                              ami: AmiFake) -> None:
    ami.state.power = "On"
    res = _run(runner, "boot-metal", _inventory(example_dir, tls, ami.url), "--json")
    assert res.exit_code == 0, res.output
    assert ami.state.resets == ["ForceRestart"]


def test_a_dropped_override_is_caught_by_the_read_back(runner: CliRunner, example_dir: Path, tls: Tls,
                                                       ami: AmiFake) -> None:
    ami.state.sd_etag = 7
    original = ami.httpd.RequestHandlerClass.do_PATCH

    def stale_etag(self: Any) -> None:  # another client changed SD between upi's GET and PATCH
        self.st.sd_etag += 100
        original(self)

    ami.httpd.RequestHandlerClass.do_PATCH = stale_etag  # type: ignore[method-assign]
    try:
        res = _run(runner, "boot-metal", _inventory(example_dir, tls, ami.url))
    finally:
        ami.httpd.RequestHandlerClass.do_PATCH = original  # type: ignore[method-assign]
    assert res.exit_code == 1
    assert "worker-0" in res.stderr and "dropped" in res.stderr
    assert ami.state.resets == [], "no reset may follow an override that did not land"


def test_server_error_is_reported_with_its_status(runner: CliRunner, example_dir: Path, tls: Tls,
                                                  ami: AmiFake) -> None:
    ami.state.fail_status = 503
    res = _run(runner, "power", _inventory(example_dir, tls, ami.url), "status")
    assert res.exit_code == 1
    assert "worker-0 (BMC " in res.stderr and "HTTP 503 to GET /redfish/v1/Systems" in res.stderr
    assert "The BMC web server is busy" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.parametrize("driver", ["build", "auto", "precompiled"])
def test_secure_boot_on_is_warned_only_when_the_gpu_driver_is_built_on_the_node(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake, driver: str) -> None:
    """Built on the node, the driver is unsigned and refused; auto turns precompiled (signed) under it."""
    ami.state.secure_boot = True
    inv = _secure(_inventory(example_dir, tls, ami.url))
    inv.write_text(inv.read_text() + f"gpu:\n  driver: {driver}\n")
    res = _run(runner, "boot-metal", inv)
    assert res.exit_code == 0, res.output
    warned = "worker-0: Secure Boot is on, but the NVIDIA driver is built on the node, unsigned"
    assert (warned in " ".join(res.stderr.split())) is (driver == "build"), res.stderr
    assert ("GPU step will fail" in res.stderr) is (driver == "build")


def _secure(inventory: Path) -> Path:
    """worker-0 marked secure_boot: true (handed shim + the signed GRUB by the render)."""
    doc = yaml.safe_load(inventory.read_text())
    next(n for n in doc["nodes"] if n["name"] == "worker-0")["secure_boot"] = True
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inventory


@pytest.mark.parametrize("dry_run", [False, True])
def test_secure_boot_on_but_plain_grub_is_not_booted(runner: CliRunner, example_dir: Path, tls: Tls,
                                                     ami: AmiFake, dry_run: bool) -> None:
    """secure_boot: auto (the default with a bmc) asks the BMC: on, while the render hands the
    node the plain GRUB its firmware would refuse, and the node is not powered on."""
    ami.state.secure_boot = True
    flags = ["--dry-run"] if dry_run else []
    res = _run(runner, "boot-metal", _inventory(example_dir, tls, ami.url), *flags)
    assert res.exit_code == 1, res.output
    text = " ".join(res.stderr.split())
    assert ("worker-0: the BMC reports Secure Boot on, but the render hands this node the plain GRUB "
            "(secure_boot: auto), which Secure Boot firmware refuses: set secure_boot: true") in text
    assert ami.state.resets == [] and ami.state.pending == {}


def test_status_shows_the_pending_override_of_the_settings_object(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.pending = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
    res = _run(runner, "power", _inventory(example_dir, tls, ami.url), "status")
    assert res.exit_code == 0, res.output
    assert "Pxe once (UEFI)" in res.stdout


# --- the inventory's bmc section -------------------------------------------------------------


def test_credentials_readable_by_others_are_refused_with_file_field_and_line(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    inv = _inventory(example_dir, tls, ami.url)
    (example_dir / "bmc-admin.yaml").chmod(0o644)
    for args in (["validate", inv], ["power", inv, "status"]):
        res = _run(runner, *args)
        assert res.exit_code == 2, res.output
        assert "nodes[4].bmc.credentials_file" in res.stderr and "mode 0644" in res.stderr
        assert "chmod 600" in res.stderr and "metal.yaml:" in res.stderr
    assert ami.state.patches == [] and ami.state.resets == []


@pytest.mark.parametrize(("bmc", "message"), [
    ({"address": "http://10.1.1.1"}, "https:// only"),
    ({"address": "https://admin:pw@10.1.1.1"}, "user or password in the URL"),
    ({"address": "https://10.1.1.1/redfish/v1"}, "name the BMC only"),
    ({"system_id": "../Managers"}, "not a Redfish system id"),
    ({"verify_tls": ""}, "name a CA file"),
    ({"verify_tls": "no-such-ca.pem"}, "cannot read the CA file"),
    ({"timeout": 0}, "0 is out of range: it must be more than 0"),
    ({"password": "x"}, "unknown key"),
])
def test_bad_bmc_sections_are_refused(runner: CliRunner, example_dir: Path, bmc: dict[str, Any],
                                      message: str) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    section = {"address": "https://10.33.4.44", "credentials_file": creds.name, **bmc}
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": section})
    res = _run(runner, "validate", inv)
    assert res.exit_code == 2, res.output
    assert "nodes[4].bmc" in res.stderr and message in res.stderr


@pytest.mark.parametrize(("content", "message"), [
    ("username: admin\n", "password is missing"),
    ("username: admin\npassword: 0123\n", "write it in quotes"),
    (f"username: admin\npassword: '{PASSWORD}\n", "is not a YAML mapping"),
    ("- admin\n", "is not a YAML mapping"),
])
def test_malformed_credentials_never_echo_their_content(runner: CliRunner, example_dir: Path,
                                                        content: str, message: str) -> None:
    creds = example_dir / "bmc-admin.yaml"
    creds.write_text(content)
    creds.chmod(0o600)
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": "https://10.33.4.44", "credentials_file": creds.name}})
    res = _run(runner, "validate", inv)
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert PASSWORD not in res.output and "0123" not in res.output


def test_bmc_on_a_vm_and_a_shared_bmc_without_ids_are_refused(runner: CliRunner, example_dir: Path) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    section = {"address": "https://10.33.4.44", "credentials_file": creds.name}
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml",
                              {"master-0": section, "worker-0": section, "worker-1": section})
    res = _run(runner, "validate", inv)
    assert res.exit_code == 2
    assert "nodes[1].bmc: master-0 is a VM" in res.stderr
    assert "nodes[5].bmc.address: https://10.33.4.44 is already the BMC of master-0" in res.stderr


def test_passwords_never_reach_rendered_files(example_dir: Path, tmp_path: Path, runner: CliRunner) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": "https://10.33.4.44", "credentials_file": creds.name}})
    out = tmp_path / "out"
    res = _run(runner, "render", inv, "-o", out)
    assert res.exit_code == 0, res.output
    for f in out.rglob("*"):
        if f.is_file():
            assert PASSWORD.encode() not in f.read_bytes(), f
    assert PASSWORD not in _run(runner, "validate", inv, "--json").output


def test_naming_a_node_without_a_bmc_is_a_usage_error(runner: CliRunner, example_dir: Path, tls: Tls,
                                                      ami: AmiFake) -> None:
    inv = _inventory(example_dir, tls, ami.url)
    res = _run(runner, "power", inv, "worker-1", "status")
    assert res.exit_code == 2 and "worker-1: no bmc section" in res.stderr
    res = _run(runner, "power", inv, "nobody", "on")
    assert res.exit_code == 2 and "nobody: not a node" in res.stderr
    res = _run(runner, "power", inv, "worker-0", "reboot")
    assert res.exit_code == 2 and "one of status, on, off, restart" in res.stderr
