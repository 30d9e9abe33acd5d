"""No reinstall loops: installed nodes' per-MAC files boot disk, the record survives re-renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import require
from pushkit import make_site
from typer.testing import CliRunner

from upi.cli import app
from upi.inventory import load_inventory
from upi.localboot import flip_to_disk

W0_GRUB = "tftp/grub.cfg-01-b8-ce-f6-10-33-44"
W1_GRUB = "tftp/grub.cfg-01-b8-ce-f6-10-33-46"
M0_PXE = "tftp/pxelinux.cfg/01-52-54-00-21-03-50"


def _render(runner: CliRunner, inv: Path, out: Path, *extra: str) -> object:
    res = runner.invoke(app, ["render", str(inv), "-o", str(out), *extra])
    assert res.exit_code == 0, res.output
    return res


def _installer(text: str) -> bool:
    return "coreos.inst" in text or "coreos.live" in text


def test_installed_nodes_boot_disk_and_stay_so_across_re_renders(runner: CliRunner, example_dir: Path,
                                                                tmp_path: Path) -> None:
    inv, out = example_dir / "dgxpod.yaml", tmp_path / "out"
    _render(runner, inv, out)
    assert _installer((out / W0_GRUB).read_text())
    res = _render(runner, inv, out, "--installed", "worker-0", "--installed", "master-0")
    assert "installed, PXE boots their disk: master-0, worker-0" in res.stdout  # type: ignore[attr-defined]
    grub = (out / W0_GRUB).read_text()
    assert not _installer(grub) and grub.rstrip().endswith("\nexit") and "linux" not in grub
    pxe = (out / M0_PXE).read_text()
    assert "LOCALBOOT 0" in pxe and "KERNEL" not in pxe and not _installer(pxe)
    assert _installer((out / W1_GRUB).read_text())  # not installed: still installs
    record = json.loads((out / "installed.json").read_text())["nodes"]
    assert set(record) == {"worker-0", "master-0"} and record["worker-0"]["mac"] == "b8:ce:f6:10:33:44"
    # A plain re-render (a changed inventory, say) keeps them on disk boot.
    doc = yaml.safe_load(inv.read_text())
    doc["network"]["upstream_dns"] = ["10.33.0.11"]
    inv.write_text(yaml.safe_dump(doc))
    _render(runner, inv, out)
    assert not _installer((out / W0_GRUB).read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert W0_GRUB in manifest["files"] and "installed.json" not in manifest["files"]
    # --reinstall puts one back.
    _render(runner, inv, out, "--reinstall", "worker-0")
    assert _installer((out / W0_GRUB).read_text())
    assert set(json.loads((out / "installed.json").read_text())["nodes"]) == {"master-0"}


def test_a_new_mac_is_another_machine_and_installs_again(runner: CliRunner, example_dir: Path,
                                                         tmp_path: Path) -> None:
    inv, out = example_dir / "dgxpod.yaml", tmp_path / "out"
    _render(runner, inv, out, "--installed", "worker-0")
    inv.write_text(inv.read_text().replace("b8:ce:f6:10:33:44", "b8:ce:f6:10:33:99"))
    res = _render(runner, inv, out)
    assert "installed with MAC b8:ce:f6:10:33:44" in res.stderr  # type: ignore[attr-defined]
    assert _installer((out / "tftp/grub.cfg-01-b8-ce-f6-10-33-99").read_text())


def test_dry_run_records_nothing(runner: CliRunner, example_dir: Path, tmp_path: Path) -> None:
    inv, out = example_dir / "dgxpod.yaml", tmp_path / "out"
    _render(runner, inv, out)
    _render(runner, inv, out, "--installed", "worker-0", "--dry-run")
    assert not (out / "installed.json").exists()
    assert _installer((out / W0_GRUB).read_text())


@pytest.mark.parametrize(("args", "message"), [
    (["--installed", "nobody"], "--installed nobody: not a node"),
    (["--reinstall", "ghost"], "--reinstall ghost: not a node"),
    (["--installed", "worker-0", "--reinstall", "worker-0"], "both installed and to reinstall"),
])
def test_bad_node_names_are_usage_errors(runner: CliRunner, example_dir: Path, tmp_path: Path,
                                         args: list[str], message: str) -> None:
    res = runner.invoke(app, ["render", str(example_dir / "dgxpod.yaml"), "-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and message in res.stderr
    assert not (tmp_path / "o").exists()


def test_a_damaged_record_is_an_error_not_a_reinstall_of_everything(runner: CliRunner, example_dir: Path,
                                                                   tmp_path: Path) -> None:
    inv, out = example_dir / "dgxpod.yaml", tmp_path / "out"
    _render(runner, inv, out, "--installed", "worker-0")
    (out / "installed.json").write_text("{not json")
    res = runner.invoke(app, ["render", str(inv), "-o", str(out)])
    assert res.exit_code == 1
    assert "installed.json is not upi's installed-nodes record" in res.stderr
    assert not _installer((out / W0_GRUB).read_text())


def test_flip_records_renders_and_pushes_the_per_mac_file(runner: CliRunner, example_dir: Path,
                                                          tmp_path: Path) -> None:
    require("dnsmasq")
    require("haproxy")
    site = make_site(tmp_path, example_dir, runner, {"local": True})
    assert runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    served = site.root / "var/lib/tftpboot" / W0_GRUB.removeprefix("tftp/")
    assert _installer(served.read_text())
    reloads = site.reload_log()
    flipped = flip_to_disk(site.inventory, load_inventory(site.inventory), site.out, ["worker-0"],
                           how="Node registered")
    assert flipped.nodes == ["worker-0"]
    assert flipped.pushed == [f"local:{served} (changed)"]
    assert not _installer(served.read_text()) and served.read_text() == (site.out / W0_GRUB).read_text()
    assert site.reload_log() == reloads  # a TFTP file needs no dnsmasq restart
    record = json.loads((site.out / "installed.json").read_text())["nodes"]
    assert record["worker-0"]["how"] == "Node registered"
    # The whole render dir still pushes cleanly: the manifest matches the flipped file.
    res = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), "--json"])
    assert res.exit_code == 0, res.output
    assert not [f for f in json.loads(res.stdout)["files"] if f["status"] != "unchanged"]


def test_saving_the_record_alone_keeps_every_rendered_file(runner: CliRunner, example_dir: Path,
                                                           tmp_path: Path) -> None:
    from upi.installed import Installed, save_record

    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(example_dir / "dgxpod.yaml"), "-o", str(out)]).exit_code == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    save_record(out, {"worker-0": Installed("b8:ce:f6:10:33:44", "2026-11-25T10:00:00Z", "test")})
    after = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert [p for p in before if p not in after] == []
    assert "worker-0" in json.loads((out / "installed.json").read_text())["nodes"]
