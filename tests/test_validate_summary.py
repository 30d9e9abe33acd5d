"""`upi validate`'s summary: each node's GPUs, BMC and unverified BMC TLS, as yes/no (and in --json)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import table_row
from redfish_support import write_credentials

from upi.cli import app


def _inventory(example_dir: Path) -> Path:
    path = example_dir / "dgxpod.yaml"
    write_credentials(example_dir / "bmc.yaml")
    data = yaml.safe_load(path.read_text())
    w0, w1 = data["nodes"][4], data["nodes"][5]
    w0.update(gpus=8, bmc={"address": "https://10.33.1.44", "credentials_file": "bmc.yaml",
                           "verify_tls": False})
    w1["bmc"] = {"address": "https://10.33.1.46", "credentials_file": "bmc.yaml"}
    out = example_dir / "with-bmc.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def test_the_table_shows_gpus_bmc_and_insecure_tls_as_yes_or_no(runner, example_dir: Path) -> None:
    result = runner.invoke(app, ["validate", str(_inventory(example_dir))])
    assert result.exit_code == 0, result.output
    assert table_row(result.stdout, "name", "role", "machine", "firmware", "mac", "ip", "install_disk",
                     "gpu", "bmc", "insecure tls")
    assert table_row(result.stdout, "master-0", "master", "vm", "bios", "52:54:00:21:03:50",
                     "10.33.3.50", "/dev/vda", "no", "no", "no")
    assert table_row(result.stdout, "worker-0", "worker", "metal", "uefi", "b8:ce:f6:10:33:44",
                     "10.33.3.44", "/dev/nvme0n1", "yes (8)", "yes", "yes")
    assert table_row(result.stdout, "worker-1", "worker", "metal", "uefi", "b8:ce:f6:10:33:46",
                     "10.33.3.46", "/dev/nvme0n1", "yes", "yes", "no")
    assert "True" not in result.stdout and "False" not in result.stdout


def test_json_has_the_same_facts(runner, example_dir: Path) -> None:
    result = runner.invoke(app, ["validate", str(_inventory(example_dir)), "--json"])
    assert result.exit_code == 0, result.output
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"]}
    assert {k: nodes["worker-0"][k] for k in ("gpu", "gpus", "bmc", "insecure_tls")} == {
        "gpu": True, "gpus": 8, "bmc": "https://10.33.1.44", "insecure_tls": True}
    assert {k: nodes["worker-1"][k] for k in ("gpu", "gpus", "bmc", "insecure_tls")} == {
        "gpu": True, "gpus": None, "bmc": "https://10.33.1.46", "insecure_tls": False}
    assert {k: nodes["master-0"][k] for k in ("gpu", "gpus", "bmc", "insecure_tls")} == {
        "gpu": False, "gpus": None, "bmc": None, "insecure_tls": False}


def test_secure_boot_is_shown_with_its_default(runner, example_dir: Path) -> None:
    """auto where a BMC can be asked, no without one, yes where the inventory says so."""
    path = _inventory(example_dir)
    data = yaml.safe_load(path.read_text())
    data["nodes"][5]["secure_boot"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert table_row(result.stdout, "name", "role", "machine", "firmware", "mac", "ip", "install_disk",
                     "gpu", "bmc", "insecure tls", "secure boot")
    assert table_row(result.stdout, "master-0", "master", "vm", "bios", "52:54:00:21:03:50",
                     "10.33.3.50", "/dev/vda", "no", "no", "no", "no")
    assert table_row(result.stdout, "worker-0", "worker", "metal", "uefi", "b8:ce:f6:10:33:44",
                     "10.33.3.44", "/dev/nvme0n1", "yes (8)", "yes", "yes", "auto")
    assert table_row(result.stdout, "worker-1", "worker", "metal", "uefi", "b8:ce:f6:10:33:46",
                     "10.33.3.46", "/dev/nvme0n1", "yes", "yes", "no", "yes")
    nodes = {n["name"]: n for n in json.loads(
        runner.invoke(app, ["validate", str(path), "--json"]).stdout)["nodes"]}
    assert [nodes[n]["secure_boot"] for n in ("master-0", "worker-0", "worker-1")] == [False, "auto", True]
