"""`upi check tftp` and its TFTP client, against the rendered dnsmasq serving TFTP (tests/realtftp.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from conftest import inventory_path
from realtftp import TFTP_PORT, lab_ip, serve_tftp

from upi.check.tftpclient import BLKSIZE, TftpError, tftp_get
from upi.cli import app
from upi.facts import boot_entries
from upi.inventory import load_inventory

LOOPBACK = "127.0.0.1"


def _get(port: int, name: str, server: str = LOOPBACK, **kw: float) -> bytes:
    out = bytearray()
    tftp_get(server, port, name, out.extend, **kw)  # type: ignore[arg-type]
    return bytes(out)


def test_client_reads_files_of_every_block_shape(tmp_path: Path) -> None:
    root = tmp_path / "tftp"
    root.mkdir()
    files = {"empty": b"", "small": b"hello", "one-block": os.urandom(BLKSIZE),
             "exact-multiple": os.urandom(BLKSIZE * 3), "sub/dir/large": os.urandom(BLKSIZE * 700 + 17)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    server = lab_ip()

    def fetch_all() -> None:
        for name, data in files.items():
            assert _get(TFTP_PORT, name, server) == data, name
        # Plain RFC 1350 (no blksize option) too: 512-byte blocks.
        out = bytearray()
        large = files["sub/dir/large"]
        assert tftp_get(server, TFTP_PORT, "sub/dir/large", out.extend, blksize=512) == len(large)
        assert bytes(out) == large
        with pytest.raises(TftpError, match="TFTP error 1"):
            _get(TFTP_PORT, "missing", server)

    with serve_tftp(root, tmp_path) as lab:
        lab.inside(fetch_all)


def test_client_gives_up_on_a_silent_server_in_bounded_time() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind((LOOPBACK, 0))  # bound and never read
        start = time.monotonic()
        with pytest.raises(TftpError, match="no answer within 0.2 s"):
            _get(silent.getsockname()[1], "x", timeout=0.2, retries=2)
        assert time.monotonic() - start < 5


def tftp_root(tmp_path: Path, runner) -> tuple[Path, dict[str, bytes]]:
    """The render's tftp/ plus boot loaders and a kernel/initramfs at the names the files use."""
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "tftproot"
    shutil.copytree(out / "tftp", root)
    inv = load_inventory(inventory_path("dgxpod"))
    extra = {"pxelinux.0": os.urandom(4000), "ldlinux.c32": os.urandom(3000),
             "grubx64.efi": os.urandom(9000)}
    for e in boot_entries(inv):
        extra[e.kernel] = os.urandom(BLKSIZE * 5)
        extra[e.initrd] = os.urandom(BLKSIZE * 40 + 3)
    for rel, data in extra.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root, extra


def _check(runner, *extra: str, server: str = LOOPBACK):
    return runner.invoke(app, ["check", "tftp", str(inventory_path("dgxpod")), "--server", server,
                               "--json", *extra])


def test_check_tftp_fetches_per_mac_files_loaders_kernel_and_initramfs(runner, tmp_path: Path) -> None:
    root, _ = tftp_root(tmp_path, runner)
    inv = load_inventory(inventory_path("dgxpod"))
    with serve_tftp(root, tmp_path) as lab:
        result = lab.inside(lambda: _check(runner, "--port", str(TFTP_PORT), server=lab_ip()))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    checks = {r["check"]: r for r in doc["checks"]}
    for e in boot_entries(inv):
        row = checks[f"TFTP {e.config_path.removeprefix('tftp/')}"]
        assert row["verdict"] == "pass" and row["got"] == "same"
        assert checks[f"TFTP {e.kernel}"]["verdict"] == "pass"
        assert checks[f"TFTP {e.initrd}"]["verdict"] == "pass"
    for loader in ("pxelinux.0", "ldlinux.c32", "grubx64.efi"):
        assert checks[f"TFTP {loader}"]["verdict"] == "pass"
    assert doc["counts"]["fail"] == 0 and len(doc["checks"]) == len(inv.nodes) + 3 + 2


def test_check_tftp_fails_naming_a_stale_boot_file_and_a_missing_initramfs(runner, tmp_path: Path) -> None:
    root, _ = tftp_root(tmp_path, runner)
    inv = load_inventory(inventory_path("dgxpod"))
    entry = boot_entries(inv)[-1]
    stale = root / entry.config_path.removeprefix("tftp/")
    stale.write_text(stale.read_text().replace("nvme0n1", "sda"))
    (root / entry.initrd).unlink()
    with serve_tftp(root, tmp_path) as lab:
        result = lab.inside(lambda: _check(runner, server=lab_ip()))
        text = lab.inside(lambda: runner.invoke(app, ["check", "tftp", str(inventory_path("dgxpod")),
                                                      "--server", lab_ip()]))
    assert result.exit_code == 1, result.output
    bad = {r["check"]: r for r in json.loads(result.stdout)["checks"] if r["verdict"] == "fail"}
    assert set(bad) == {f"TFTP {entry.config_path.removeprefix('tftp/')}", f"TFTP {entry.initrd}"}
    assert "differs" in bad[f"TFTP {entry.config_path.removeprefix('tftp/')}"]["got"]
    assert "TFTP error 1" in bad[f"TFTP {entry.initrd}"]["got"]
    # dnsmasq's "file not found" for an RHCOS file: upi's own commands stage and publish it.
    assert bad[f"TFTP {entry.initrd}"]["fix"].endswith(
        ": stage it with `upi images INVENTORY -o DIR --from SRC`, then publish it with "
        "`upi push INVENTORY -o DIR`")
    assert text.exit_code == 1 and "2 failed" in text.stdout


def test_check_tftp_with_no_server_fails_fast(runner, tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind((LOOPBACK, 0))
        start = time.monotonic()
        result = _check(runner, "--port", str(silent.getsockname()[1]), "--timeout", "0.2",
                        "--retries", "1")
    assert result.exit_code == 1
    assert time.monotonic() - start < 20
    assert all(r["verdict"] == "fail" for r in json.loads(result.stdout)["checks"])


def test_with_a_render_dir_kernel_and_initramfs_must_equal_the_staged_copies(runner, tmp_path: Path) -> None:
    """-o DIR: the served kernel/initramfs are compared (sha256) with DIR/tftp/, as `upi images` left them."""
    root, extra = tftp_root(tmp_path, runner)
    inv = load_inventory(inventory_path("dgxpod"))
    entry = boot_entries(inv)[0]
    staged = tmp_path / "out"  # the render dir tftp_root() rendered into
    (staged / "tftp" / entry.kernel).parent.mkdir(parents=True, exist_ok=True)
    (staged / "tftp" / entry.kernel).write_bytes(extra[entry.kernel])  # the same bytes
    (staged / "tftp" / entry.initrd).write_bytes(b"a newer initramfs that was never pushed")
    with serve_tftp(root, tmp_path) as lab:
        same = lab.inside(lambda: _check(runner, "-o", str(staged), server=lab_ip()))
        (staged / "tftp" / entry.kernel).unlink()
        gone = lab.inside(lambda: _check(runner, "-o", str(staged), server=lab_ip()))
    rows = {r["check"]: r for r in json.loads(same.stdout)["checks"]}
    assert same.exit_code == 1
    assert rows[f"TFTP {entry.kernel}"]["verdict"] == "pass"
    assert rows[f"TFTP {entry.kernel}"]["expected"].startswith("as staged (sha256 ")
    assert rows[f"TFTP {entry.initrd}"]["verdict"] == "fail"
    assert "not the copy `upi images` staged" in rows[f"TFTP {entry.initrd}"]["fix"]
    bad = {r["check"]: r for r in json.loads(gone.stdout)["checks"] if r["verdict"] == "fail"}
    assert set(bad) == {f"TFTP {entry.kernel}", f"TFTP {entry.initrd}"}
    assert "is missing or not a regular file: run `upi images`" in bad[f"TFTP {entry.kernel}"]["fix"]
