"""What `upi render` does to an output directory: --dry-run, --diff, --force, re-render."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import inventory_path

from upi.cli import app

W1 = ('  - {name: worker-1, role: worker, mac: "b8:ce:f6:10:33:46", ip: 10.33.3.46,\n'
      "     install_disk: /dev/nvme0n1, gpu: true}\n")
W0 = ('  - {name: worker-0, role: worker, mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44,\n'
      "     install_disk: /dev/nvme0n1, gpu: true}\n")


def _copy(tmp: Path, name: str = "dgxpod") -> Path:
    inv = tmp / "inv"
    shutil.copytree(inventory_path(name).parent, inv)
    return inv / f"{name}.yaml"


def _render(runner, inv: Path, out: Path, *flags: str):
    return runner.invoke(app, ["render", str(inv), "-o", str(out), *flags])


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_dry_run_writes_nothing(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _render(runner, inventory_path("dgxpod"), out, "--dry-run")
    assert result.exit_code == 0, result.output
    assert not out.exists()
    assert f"would write {out}: 35 new, 0 changed, 0 unchanged, 0 removed" in result.output


def test_dry_run_on_an_existing_render_changes_nothing(runner, tmp_path: Path) -> None:
    inv, out = _copy(tmp_path), tmp_path / "out"
    assert _render(runner, inv, out).exit_code == 0
    before = _snapshot(out)
    inv.write_text(inv.read_text().replace("10.33.0.10", "10.33.0.11"))
    result = _render(runner, inv, out, "--dry-run")
    assert result.exit_code == 0
    assert "would write" in result.output and "dnsmasq/dns.conf" in result.output
    assert _snapshot(out) == before


def test_rerender_of_an_unchanged_inventory_reports_everything_unchanged(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _render(runner, inventory_path("dgxpod"), out).exit_code == 0
    result = _render(runner, inventory_path("dgxpod"), out)
    assert result.exit_code == 0
    assert f"wrote {out}: 0 new, 0 changed, 35 unchanged, 0 removed" in result.output


def test_diff_shows_changed_lines_of_public_files(runner, tmp_path: Path) -> None:
    inv, out = _copy(tmp_path), tmp_path / "out"
    assert _render(runner, inv, out).exit_code == 0
    inv.write_text(inv.read_text().replace("10.33.0.10", "10.33.0.11"))
    result = _render(runner, inv, out, "--diff")
    assert result.exit_code == 0
    assert "--- a/dnsmasq/dns.conf" in result.output
    assert "-server=10.33.0.10\n+server=10.33.0.11" in result.output
    assert "server=10.33.0.11" in (out / "dnsmasq" / "dns.conf").read_text()


def test_diff_never_shows_the_content_of_files_holding_secrets(runner, tmp_path: Path) -> None:
    inv, out = _copy(tmp_path), tmp_path / "out"
    assert _render(runner, inv, out).exit_code == 0
    secret = '{"auths":{"quay.io":{"auth":"TOP-SECRET-TOKEN"}}}'
    (inv.parent / "pull-secret.json").write_text(secret)
    result = _render(runner, inv, out, "--diff", "--dry-run")
    assert result.exit_code == 0
    assert "install-config.yaml: changed (holds secrets: not shown)" in result.output
    assert "install-config.yaml.orig: changed (holds secrets: not shown)" in result.output
    assert "TOP-SECRET-TOKEN" not in result.output
    assert "RkFLRTpub3QtYS1yZWFsLXB1bGwtc2VjcmV0" not in result.output  # the old one neither


def test_a_removed_nodes_pxe_file_is_removed(runner, tmp_path: Path) -> None:
    inv, out = _copy(tmp_path), tmp_path / "out"
    assert _render(runner, inv, out).exit_code == 0
    grub = [out / "tftp" / "grub.cfg-01-b8-ce-f6-10-33-44", out / "tftp" / "grub.cfg-01-b8-ce-f6-10-33-46"]
    assert all(p.exists() for p in grub)
    inv.write_text(inv.read_text().replace(W0 + W1, ""))  # no workers: a compact cluster
    result = _render(runner, inv, out)
    assert result.exit_code == 0, result.output
    assert "10 removed" in result.output  # the 2 GRUB files and gpu/'s 8: no GPU node is left
    assert not any(p.exists() for p in grub)
    assert not (out / "gpu" / "10-nfd-namespace.yaml").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert "tftp/grub.cfg-01-b8-ce-f6-10-33-44" not in manifest["files"]


def test_a_rerender_writes_only_what_changed_and_ends_equal_to_a_fresh_render(
        runner, tmp_path: Path) -> None:
    """An unchanged file (same bytes, same mode) keeps its inode; a changed one is replaced."""
    inv, out = _copy(tmp_path), tmp_path / "out"
    assert _render(runner, inv, out).exit_code == 0
    before = {p.relative_to(out).as_posix(): p.stat().st_ino for p in out.rglob("*") if p.is_file()}
    inv.write_text(inv.read_text().replace("10.33.3.46,", "10.33.3.47,"))  # worker-1 moves
    result = _render(runner, inv, out)
    assert result.exit_code == 0, result.output
    changed = {line.split()[0] for line in result.output.splitlines() if line.endswith(" changed")}
    assert {"hosts", "dnsmasq/dns.conf", "manifest.json"} <= changed
    after = {p.relative_to(out).as_posix(): p.stat().st_ino for p in out.rglob("*") if p.is_file()}
    kept = {p for p in after if after[p] == before.get(p)}
    assert kept == set(before) - changed - {"installed.json"}, sorted(set(before) - changed - kept)
    fresh = tmp_path / "fresh"
    assert _render(runner, inv, fresh).exit_code == 0
    assert _snapshot(out) == _snapshot(fresh)
    assert not [p for p in out.iterdir() if p.name.startswith(".upi-staging-")]


def test_a_directory_with_foreign_files_is_refused_without_force(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = _render(runner, inventory_path("dgxpod"), out)
    assert result.exit_code == 2
    assert "holds files upi did not write (notes.txt)" in result.output and "--force" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_force_writes_beside_foreign_files_and_keeps_them(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = _render(runner, inventory_path("dgxpod"), out, "--force")
    assert result.exit_code == 0, result.output
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "manifest.json").is_file()


def test_http_dir_of_upi_ignition_is_left_alone(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _render(runner, inventory_path("dgxpod"), out).exit_code == 0
    ign = out / "http" / "ignition" / "worker.ign"
    ign.parent.mkdir(parents=True)
    ign.write_text("{}\n")
    result = _render(runner, inventory_path("compact"), out)  # a different cluster, no --force
    assert result.exit_code == 0, result.output
    assert ign.read_text() == "{}\n"
    assert "http/" not in result.output
