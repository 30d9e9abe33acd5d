from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from conftest import inventory_path, require, require_path

from upi.bootloaders import stage_bootloaders
from upi.cli import app
from upi.errors import RenderError


def _fake_rhel_root(root: Path) -> Path:
    for rel, content in {
        "tftpboot/pxelinux.0": b"pxelinux\0rhel",
        "tftpboot/ldlinux.c32": b"ldlinux\0rhel",
        "boot/efi/EFI/redhat/grubx64.efi": b"MZ grub\0rhel",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return root


def test_rhel_packages_are_staged_from_tftpboot_and_the_efi_dir(tmp_path: Path) -> None:
    files = stage_bootloaders(root=_fake_rhel_root(tmp_path), path=str(tmp_path / "no-bin"))
    assert {f.path: f.content for f in files} == {
        "tftp/pxelinux.0": b"pxelinux\0rhel",
        "tftp/ldlinux.c32": b"ldlinux\0rhel",
        "tftp/grubx64.efi": b"MZ grub\0rhel",
    }
    assert {f.mode for f in files} == {0o644}


def test_debian_host_builds_a_grub_network_image_with_grub_mkimage() -> None:
    require("grub-mkimage")
    require_path("/usr/lib/PXELINUX/pxelinux.0", "Debian's pxelinux package")
    files = {f.path: f.content for f in stage_bootloaders()}
    assert files["tftp/pxelinux.0"] == Path("/usr/lib/PXELINUX/pxelinux.0").read_bytes()
    assert files["tftp/ldlinux.c32"] == Path("/usr/lib/syslinux/modules/bios/ldlinux.c32").read_bytes()
    grub = files["tftp/grubx64.efi"]
    assert grub[:2] == b"MZ"  # a PE/COFF EFI application
    assert b"efinet" in grub and b"tftp" in grub


def test_missing_sources_name_the_package_to_install_on_both_families(tmp_path: Path) -> None:
    with pytest.raises(RenderError) as info:
        stage_bootloaders(root=tmp_path, path=str(tmp_path / "no-bin"))
    message = str(info.value)
    assert message.startswith("cannot stage the network boot loaders; missing pxelinux.0 (looked in ")
    assert "`apt-get install pxelinux` or RHEL `dnf install syslinux-tftpboot`" in message
    assert "ldlinux.c32" in message and "`apt-get install syslinux-common`" in message
    assert "`apt-get install grub-efi-amd64-bin grub-common` or RHEL `dnf install grub2-efi-x64`" in message


def test_only_the_missing_loader_is_reported(tmp_path: Path) -> None:
    root = _fake_rhel_root(tmp_path)
    (root / "boot/efi/EFI/redhat/grubx64.efi").unlink()
    with pytest.raises(RenderError) as info:
        stage_bootloaders(root=root, path=str(tmp_path / "no-bin"))
    assert "missing grubx64.efi" in str(info.value)
    assert "pxelinux.0 (" not in str(info.value)


def test_render_bootloaders_writes_them_into_tftp_and_the_manifest(runner, tmp_path: Path) -> None:
    require("grub-mkimage")
    out = tmp_path / "out"
    args = ["render", str(inventory_path("compact")), "-o", str(out), "--bootloaders"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    for name in ("pxelinux.0", "ldlinux.c32", "grubx64.efi"):
        assert manifest[f"tftp/{name}"]["mode"] == "0644"
        assert stat.S_IMODE((out / "tftp" / name).stat().st_mode) == 0o644
    # A second run is a no-op, and --diff does not choke on binary content.
    again = runner.invoke(app, [*args, "--diff", "--dry-run"])
    assert again.exit_code == 0, again.output
    assert "0 new, 0 changed" in again.output


def test_diff_of_a_changed_boot_loader_says_binary(runner, tmp_path: Path) -> None:
    require("grub-mkimage")
    out = tmp_path / "out"
    args = ["render", str(inventory_path("compact")), "-o", str(out), "--bootloaders"]
    assert runner.invoke(app, args).exit_code == 0
    (out / "tftp/pxelinux.0").write_bytes(b"\0stale")
    result = runner.invoke(app, [*args, "--diff", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "--- tftp/pxelinux.0: changed (binary: not shown)" in result.output


def test_missing_boot_loader_is_exit_1_with_the_message(runner, tmp_path: Path, monkeypatch) -> None:
    def missing() -> list[object]:
        raise RenderError("cannot stage the network boot loaders; missing pxelinux.0 (...)")

    monkeypatch.setattr("upi.bootloaders.stage_bootloaders", missing)
    result = runner.invoke(app, ["render", str(inventory_path("compact")), "-o", str(tmp_path / "o"),
                                 "--bootloaders"])
    assert result.exit_code == 1
    assert "missing pxelinux.0" in result.output
    assert not (tmp_path / "o").exists()


def test_a_render_without_the_flag_keeps_the_staged_loaders(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out),
                               "--bootloaders"]).exit_code == 0
    before = (out / "tftp" / "grubx64.efi").read_bytes()
    result = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "0 removed" in result.output
    assert (out / "tftp" / "grubx64.efi").read_bytes() == before
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"tftp/pxelinux.0", "tftp/ldlinux.c32", "tftp/grubx64.efi"} <= set(manifest["files"])
