"""The signed loaders Secure Boot nodes boot: staged by `upi images`, required by `upi render`.

Debian's signed shim and GRUB (packages shim-signed, grub-efi-amd64-signed) are
the real signed EFI images here; the unsigned one is the GRUB `render
--bootloaders` builds with grub-mkimage.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import require, require_path

from upi.bootloaders import GRUB_MODULES_DIR, grub_mkimage
from upi.cli import app
from upi.facts import boot_entries
from upi.images.loaders import authenticode_signed
from upi.inventory import load_inventory
from upi.push.sources import read_render_dir

WORKER_0 = '{name: worker-0, role: worker, mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44, gpu: true'
SHIM = "/usr/lib/shim/shimx64.efi.signed"
GRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"


@pytest.fixture
def secure_inventory(example_dir: Path) -> Path:
    path = example_dir / "legacy-4.3.yaml"
    path.write_text(path.read_text().replace(WORKER_0, WORKER_0 + ", secure_boot: true", 1))
    return path


@pytest.fixture
def signed() -> tuple[Path, Path]:
    return (require_path(SHIM, "Debian's signed shim, package shim-signed"),
            require_path(GRUB, "Debian's signed GRUB, package grub-efi-amd64-signed"))


@pytest.fixture(scope="module")
def unsigned_grub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    modules = require_path(f"/{GRUB_MODULES_DIR}/linux.mod", "GRUB modules, package grub-efi-amd64-bin")
    path = tmp_path_factory.mktemp("grub") / "grubx64.efi"
    path.write_bytes(grub_mkimage(require("grub-mkimage"), modules.parent))
    return path


def _flat(output: str) -> str:
    return " ".join(output.split())


def test_secure_boot_node_without_signed_loaders_is_refused(runner, secure_inventory: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(secure_inventory), "-o", str(out)])
    assert result.exit_code == 2, result.output
    text = _flat(result.output)
    assert "worker-0: secure_boot is on but" in text
    assert ("has no signed shimx64.efi and grubx64.efi staged; stage Red Hat's signed pair with "
            f"`upi images INVENTORY -o {out} --iso RHCOS-LIVE.iso` (or --shim shimx64.efi "
            "--grub grubx64.efi from shim-x64 and grub2-efi-x64") in text
    assert "Traceback" not in text
    assert not (out / "manifest.json").exists() and not (out / "dnsmasq").exists()


def test_bootloaders_grub_is_named_unsigned(runner, secure_inventory: Path, tmp_path: Path) -> None:
    require("grub-mkimage")
    result = runner.invoke(app, ["render", str(secure_inventory), "-o", str(tmp_path / "out"),
                                 "--bootloaders"])
    assert result.exit_code == 2, result.output
    assert "`render --bootloaders` stages is built here and unsigned" in _flat(result.output)


def test_staged_signed_loaders_boot_the_secure_boot_node(runner, secure_inventory: Path, tmp_path: Path,
                                                         signed: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    shim, grub = signed
    result = runner.invoke(app, ["images", str(secure_inventory), "-o", str(out),
                                 "--shim", str(shim), "--grub", str(grub)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["render", str(secure_inventory), "-o", str(out), "--bootloaders"])
    assert result.exit_code == 0, result.output
    # The signed GRUB wins over the built one: it serves every UEFI node.
    assert (out / "tftp/shimx64.efi").read_bytes() == shim.read_bytes()
    assert (out / "tftp/grubx64.efi").read_bytes() == grub.read_bytes()
    doc = json.loads((out / "manifest.json").read_text())
    assert doc["images"]["tftp/shimx64.efi"]["loader"] == "shim"
    assert doc["images"]["tftp/grubx64.efi"] == {
        "sha256": hashlib.sha256(grub.read_bytes()).hexdigest(), "size": grub.stat().st_size,
        "mode": "0644", "loader": "grub"}
    assert "tftp/grubx64.efi" not in doc["files"] and "tftp/pxelinux.0" in doc["files"]
    # upi push publishes them (the render dir's tftp/ images).
    _, local = read_render_dir(load_inventory(secure_inventory), out)
    assert {"tftp/shimx64.efi", "tftp/grubx64.efi"} <= {path for path, _ in local}
    # A later render keeps them.
    result = runner.invoke(app, ["render", str(secure_inventory), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "tftp/grubx64.efi").read_bytes() == grub.read_bytes()


def test_unsigned_grub_is_not_staged(runner, secure_inventory: Path, tmp_path: Path,
                                     signed: tuple[Path, Path], unsigned_grub: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["images", str(secure_inventory), "-o", str(out),
                                 "--shim", str(signed[0]), "--grub", str(unsigned_grub)])
    assert result.exit_code == 2, result.output
    assert (f"--grub {unsigned_grub} is not signed (no Authenticode signature): Secure Boot "
            "firmware and shim refuse it") in _flat(result.output)
    assert not (out / "tftp").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--shim", "SHIM"], "--grub: shim and GRUB are staged as a pair"),
    ([], "--from: name the RHCOS files to stage (--from SRC), or the signed loaders"),
    (["--shim", "INVENTORY", "--grub", "INVENTORY"], "is not an EFI image (no PE header)"),
])
def test_loader_flags_misused(runner, secure_inventory: Path, tmp_path: Path, args: list[str],
                              message: str, signed: tuple[Path, Path]) -> None:
    args = [{"SHIM": str(signed[0]), "INVENTORY": str(secure_inventory)}.get(a, a) for a in args]
    result = runner.invoke(app, ["images", str(secure_inventory), "-o", str(tmp_path / "out"), *args])
    assert result.exit_code == 2, result.output
    assert message in _flat(result.output)


def test_authenticode_signature_is_read_from_the_pe_header(signed: tuple[Path, Path],
                                                            unsigned_grub: Path) -> None:
    assert authenticode_signed(signed[0].read_bytes()) is True
    assert authenticode_signed(signed[1].read_bytes()) is True
    assert authenticode_signed(unsigned_grub.read_bytes()) is False
    assert authenticode_signed(b"#!/bin/sh\n" * 10) is None


def test_staging_rhcos_files_keeps_the_signed_loaders(runner, example_dir: Path, tmp_path: Path,
                                                      signed: tuple[Path, Path],
                                                      fake_openshift_install: Path) -> None:
    from test_images import NAMES, fake_bytes, inventory, mirror

    inv_path = inventory(example_dir, NAMES)
    out = tmp_path / "out"
    result = runner.invoke(app, ["images", str(inv_path), "-o", str(out),
                                 "--shim", str(signed[0]), "--grub", str(signed[1])])
    assert result.exit_code == 0, result.output
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    result = runner.invoke(app, ["images", str(inv_path), "-o", str(out), "--from", str(src)])
    assert result.exit_code == 0, result.output
    images = json.loads((out / "manifest.json").read_text())["images"]
    assert images["tftp/shimx64.efi"]["loader"] == "shim" and images["tftp/grubx64.efi"]["loader"] == "grub"
    assert (out / "tftp/shimx64.efi").read_bytes() == signed[0].read_bytes()
    assert len(images) == 7


def test_check_tftp_fetches_shim_and_the_signed_grub(runner, example_dir: Path, tmp_path: Path,
                                                     signed: tuple[Path, Path]) -> None:
    """The rendered dnsmasq serves the render's tftp/; `upi check tftp -o DIR` wants shim, the
    signed GRUB (equal to the staged pair) and grub/grub.cfg, and names the fix when shim is gone."""
    from realtftp import lab_ip, serve_tftp

    inv_path = example_dir / "dgxpod.yaml"
    text = inv_path.read_text()
    inv_path.write_text(text.replace("install_disk: /dev/nvme0n1, gpu: true}",
                                     "install_disk: /dev/nvme0n1, gpu: true, secure_boot: true}", 1))
    out = tmp_path / "out"
    for argv in (["images", str(inv_path), "-o", str(out), "--shim", str(signed[0]),
                  "--grub", str(signed[1])],
                 ["render", str(inv_path), "-o", str(out), "--bootloaders"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, result.output
    for e in boot_entries(load_inventory(inv_path)):  # as if `upi images --from` staged them
        for rel in (e.kernel, e.initrd):
            (out / "tftp" / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / "tftp" / rel).write_bytes(rel.encode() * 100)
    root = tmp_path / "tftproot"
    shutil.copytree(out / "tftp", root)

    def check() -> dict[str, dict[str, str]]:
        result = runner.invoke(app, ["check", "tftp", str(inv_path), "--server", lab_ip(), "-o", str(out),
                                     "--json"])
        return {r["check"]: r for r in json.loads(result.stdout)["checks"]}

    with serve_tftp(root, tmp_path) as lab:
        good = lab.inside(check)
        (lab.public / "tftp" / "shimx64.efi").unlink()
        gone = lab.inside(check)
    for name in ("shimx64.efi", "grubx64.efi"):
        assert good[f"TFTP {name}"]["verdict"] == "pass", good[f"TFTP {name}"]
        assert good[f"TFTP {name}"]["expected"].startswith("as staged (sha256 ")
    assert good["TFTP grub/grub.cfg"]["verdict"] == "pass"
    assert [r for r in good.values() if r["verdict"] != "pass"] == []
    assert gone["TFTP shimx64.efi"]["verdict"] == "fail"
    assert gone["TFTP shimx64.efi"]["fix"].endswith(
        "stage the signed pair with `upi images INVENTORY -o DIR --iso RHCOS-LIVE.iso` (or --shim "
        "and --grub), then `upi push INVENTORY -o DIR`")


def test_signed_pair_staged_over_the_built_grub_survives_the_next_render(
        runner, secure_inventory: Path, example_dir: Path, tmp_path: Path, signed: tuple[Path, Path]) -> None:
    """render --bootloaders (plain), then upi images --shim/--grub, then a Secure Boot render."""
    require("grub-mkimage")
    out = tmp_path / "out"
    plain = example_dir / "plain.yaml"
    plain.write_text(secure_inventory.read_text().replace(", secure_boot: true", ""))
    result = runner.invoke(app, ["render", str(plain), "-o", str(out), "--bootloaders"])
    assert result.exit_code == 0, result.output
    assert (out / "tftp/grubx64.efi").read_bytes() != signed[1].read_bytes()  # the built one
    for argv in (["images", str(secure_inventory), "-o", str(out), "--shim", str(signed[0]),
                  "--grub", str(signed[1])],
                 ["render", str(secure_inventory), "-o", str(out)],
                 ["render", str(secure_inventory), "-o", str(out), "--bootloaders"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        assert (out / "tftp/grubx64.efi").read_bytes() == signed[1].read_bytes(), argv
    doc = json.loads((out / "manifest.json").read_text())
    assert "tftp/grubx64.efi" not in doc["files"] and doc["images"]["tftp/grubx64.efi"]["loader"] == "grub"
    assert (out / "tftp/grubx64.efi").read_bytes() == signed[1].read_bytes()
    assert (out / "tftp/pxelinux.0").is_file()
