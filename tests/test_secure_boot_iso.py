"""`upi images --iso`: shim and GRUB read from a live ISO's El Torito EFI image, never mounted.

The ISOs are real: a FAT image made by mkfs.fat and filled by mtools (packages
dosfstools, mtools), put into an ISO 9660 image by xorriso as the EFI boot
entry, either alone or after a BIOS entry as the RHCOS live ISO has it
(isolinux first, then images/efiboot.img for platform 0xEF).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import require, require_path

from upi.cli import app
from upi.images.iso import Fat, efi_image_offset, loaders_from_iso
from upi.runner import run

SHIM = "/usr/lib/shim/shimx64.efi.signed"
GRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"


def efiboot(work: Path, fat: int, files: dict[str, bytes]) -> Path:
    """A FAT`fat` image holding `files` (paths like EFI/BOOT/BOOTX64.EFI)."""
    image = work / f"efiboot-{fat}.img"
    size_kib = {12: 8192, 16: 20480, 32: 40960}[fat]
    run([require("mkfs.fat"), "-F", str(fat), "-C", image, str(size_kib)], timeout=60)
    made: set[str] = set()
    for rel, data in files.items():
        parts = rel.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder not in made:
                run([require("mmd"), "-i", image, f"::/{folder}"], timeout=30)
                made.add(folder)
        src = work / parts[-1]
        src.write_bytes(data)
        run([require("mcopy"), "-i", image, src, f"::/{rel}"], timeout=30)
    return image


def live_iso(work: Path, image: Path, *, bios_first: bool) -> Path:
    """An ISO 9660 image with `image` as its El Torito EFI entry (after a BIOS one with `bios_first`)."""
    tree = work / "iso"
    (tree / "images").mkdir(parents=True)
    shutil.copyfile(image, tree / "images/efiboot.img")
    iso = work / "live.iso"
    argv = [require("xorriso"), "-as", "mkisofs", "-quiet", "-o", iso, "-V", "rhcos-test"]
    if bios_first:
        (tree / "isolinux").mkdir()
        (tree / "isolinux/isolinux.bin").write_bytes(b"\0" * 2048)
        argv += ["-b", "isolinux/isolinux.bin", "-no-emul-boot", "-eltorito-alt-boot"]
    argv += ["-e", "images/efiboot.img", "-no-emul-boot", tree]
    run(argv, timeout=120)
    return iso


@pytest.fixture
def signed() -> dict[str, bytes]:
    return {"EFI/BOOT/BOOTX64.EFI": require_path(SHIM, "package shim-signed").read_bytes(),
            "EFI/BOOT/grubx64.efi": require_path(GRUB, "package grub-efi-amd64-signed").read_bytes()}


@pytest.mark.parametrize(("fat", "bios_first"), [(12, True), (16, False), (32, True)])
def test_shim_and_grub_come_out_of_the_efi_boot_image(tmp_path: Path, signed: dict[str, bytes],
                                                      fat: int, bios_first: bool) -> None:
    iso = live_iso(tmp_path, efiboot(tmp_path, fat, signed), bios_first=bios_first)
    with iso.open("rb") as f:
        assert Fat(f, efi_image_offset(f)).bits == fat  # the FAT type mkfs.fat made is the one read
    found = loaders_from_iso(iso)
    assert found == {"shim": signed["EFI/BOOT/BOOTX64.EFI"], "grub": signed["EFI/BOOT/grubx64.efi"]}


def test_upi_images_iso_stages_them(runner, example_dir: Path, tmp_path: Path, signed: dict[str, bytes],
                                    fake_openshift_install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    iso = live_iso(tmp_path, efiboot(tmp_path, 16, signed), bios_first=True)
    out = tmp_path / "out"
    argv = ["images", str(example_dir / "dgxpod.yaml"), "-o", str(out), "--iso", str(iso)]
    # The installer's stream vouches for another ISO: nothing is staged.
    result = runner.invoke(app, argv)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"--iso {iso}: sha256 {hashlib.sha256(iso.read_bytes()).hexdigest()} is not that of " in text
    assert "-live-iso.x86_64.iso, the live ISO of RHCOS 9.6.20250402-0 the installer was built for" in text
    assert not out.exists() or not (out / "tftp").exists()
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_ISO_SHA256", hashlib.sha256(iso.read_bytes()).hexdigest())
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert (out / "tftp/shimx64.efi").read_bytes() == signed["EFI/BOOT/BOOTX64.EFI"]
    assert (out / "tftp/grubx64.efi").read_bytes() == signed["EFI/BOOT/grubx64.efi"]
    images = json.loads((out / "manifest.json").read_text())["images"]
    assert {images[p]["loader"] for p in ("tftp/shimx64.efi", "tftp/grubx64.efi")} == {"shim", "grub"}


def _images_iso(runner, inventory: Path, out: Path, iso: Path, monkeypatch: pytest.MonkeyPatch):
    """`upi images --iso` with the (fake) installer's stream vouching for exactly this ISO."""
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_ISO_SHA256", hashlib.sha256(iso.read_bytes()).hexdigest())
    return runner.invoke(app, ["images", str(inventory), "-o", str(out), "--iso", str(iso)])


def test_isos_without_the_loaders_are_named(runner, example_dir: Path, tmp_path: Path,
                                            signed: dict[str, bytes], fake_openshift_install: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    shim = signed["EFI/BOOT/BOOTX64.EFI"]
    only_shim = live_iso(tmp_path, efiboot(tmp_path, 12, {"EFI/BOOT/BOOTX64.EFI": shim}), bios_first=False)
    plain = tmp_path / "plain.iso"
    run([require("xorriso"), "-as", "mkisofs", "-quiet", "-o", plain, tmp_path / "iso/images"], timeout=60)
    unsigned = {"EFI/BOOT/BOOTX64.EFI": shim, "EFI/BOOT/grubx64.efi": b"MZ" + b"\0" * 200}
    cases = [
        (only_shim, f"--iso {only_shim}: its EFI boot image has no EFI/BOOT/GRUBX64.EFI: not a live ISO"),
        (plain, f"--iso {plain}: has no El Torito boot record (sector 17): not a bootable ISO 9660 image"),
        (example_dir / "dgxpod.yaml", "ends at byte 34,816: too short for an ISO 9660 live image"),
    ]
    for iso, message in cases:
        result = _images_iso(runner, example_dir / "dgxpod.yaml", tmp_path / "o", iso, monkeypatch)
        assert result.exit_code == 2, (iso, result.output)
        assert message in " ".join(result.output.split()), result.output
        assert "Traceback" not in result.output
    work = tmp_path / "u"
    work.mkdir()
    bad = live_iso(work, efiboot(work, 12, unsigned), bios_first=False)
    result = _images_iso(runner, example_dir / "dgxpod.yaml", tmp_path / "o", bad, monkeypatch)
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"--iso {bad}: EFI/BOOT/grubx64.efi is not an EFI image (no PE header)" in text
    assert not (tmp_path / "o" / "tftp").exists()


def test_the_live_iso_in_the_from_directory_gives_the_secure_boot_nodes_their_loaders(
        runner, example_dir: Path, tmp_path: Path, signed: dict[str, bytes], fake_openshift_install: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`upi images --from ~/Downloads`, the live ISO downloaded beside the PXE files: no --iso needed."""
    import yaml
    from test_images import NAMES, OLD, fake_bytes

    path = example_dir / "dgxpod.yaml"
    text = path.read_text()
    for key, old in OLD.items():
        text = text.replace(old, NAMES[key])
    doc = yaml.safe_load(text)
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    for name in NAMES.values():
        (downloads / name).write_bytes(fake_bytes(name))
    iso = live_iso(tmp_path, efiboot(tmp_path, 16, signed), bios_first=True)
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_ISO_SHA256", hashlib.sha256(iso.read_bytes()).hexdigest())
    shutil.copyfile(iso, downloads / "rhcos-9.6.20250402-0-live-iso.x86_64.iso")  # the stream's name
    argv = ["images", str(path), "-o", str(tmp_path / "out"), "--from", str(downloads)]
    # Without a Secure Boot node the ISO is not read (it is a gigabyte) and nothing is staged of it.
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    plain = runner.invoke(app, argv)
    assert plain.exit_code == 0, plain.output
    assert not (tmp_path / "out/tftp/shimx64.efi").exists()
    doc["nodes"][4]["secure_boot"] = True
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "the live ISO of the installer's RHCOS; its signed shim and GRUB are staged" in result.output
    assert (tmp_path / "out/tftp/shimx64.efi").read_bytes() == signed["EFI/BOOT/BOOTX64.EFI"]
    assert (tmp_path / "out/tftp/grubx64.efi").read_bytes() == signed["EFI/BOOT/grubx64.efi"]
