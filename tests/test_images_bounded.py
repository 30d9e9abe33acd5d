"""`upi images` from a hostile or broken mirror: bounded in size and time (issue 24).

The mirror is the FAKE HTTP server of tests/fake_http.py (no real server
sends a Content-Length of `²` or drips its headers); the kernel and the
initramfs are served properly, the rootfs is the misbehaving one. Each run
ends with exit 1 and the rootfs named as failed with the reason, never a
traceback; a partial file that cannot be resumed (too large, disk full) is
removed. Limits are lowered through the modules' constants so a test needs
seconds, not the hours a 64 KiB/s floor allows an 8 GiB file.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require_root
from fake_http import Script, drip, fake_http, response
from test_images import NAMES, fake_bytes, inventory

from upi.cli import app
from upi.images.stage import PARTIAL_DIR

MIB = 1 << 20
ROOTFS = NAMES["rootfs"]
HEAD = b"HTTP/1.1 200 OK\r\nConnection: close\r\n"


def endless() -> Iterator[bytes | float]:
    yield HEAD + b"\r\n"  # no Content-Length: the body ends when the connection does (never)
    yield from itertools.repeat(b"x" * 65536)


def length_head(value: str) -> bytes:
    return HEAD + f"Content-Length: {value}\r\n\r\n".encode("latin-1")


def redirect(to: str) -> Script:
    return [response(b"", status="302 Found", headers={"Location": to})]


HOSTILE: dict[str, tuple[object, str, bool]] = {  # script, reason, partial file removed
    "endless body": (endless, "sends more than upi takes for one RHCOS file (1,048,576 bytes)", True),
    "announced too large": (lambda: [length_head(str(10**12))],
                            "is 1,000,000,000,000 bytes, more than upi takes for one RHCOS file", True),
    "superscript length": (lambda: [length_head("\u00b2") + b"ab"],
                           "the server's Content-Length '\u00b2' is not a number", True),
    "5,000-digit length": (lambda: [length_head("9" * 5000) + b"ab"],
                           "the server's Content-Length '99999999999999999999' is not a number", True),
    "negative length": (lambda: [length_head("-1") + b"ab"], "the server's Content-Length '-1'", True),
    "dripping body": (lambda: [length_head("4096"), *drip(b"x" * 4096, 0.2)],
                      "slower than 64 KiB/s", False),
    "dripping headers": (lambda: drip(length_head("10") + b"0123456789", 0.2),
                         "no answer within 1 s", True),
    "redirect to ftp": (lambda: redirect("ftp://127.0.0.1/rootfs.img"),
                        "redirect to a ftp: URL refused (only http:// and https://)", True),
    "redirect to gopher": (lambda: redirect("gopher://127.0.0.1/rootfs.img"), "HTTP 302", True),
    "redirect to file": (lambda: redirect("file:///etc/passwd"), "HTTP 302", True),
}


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    import upi.images.fetch as fetch
    import upi.images.stage as stage

    monkeypatch.setattr(fetch, "HEAD_SECONDS", 1.0)
    monkeypatch.setattr(fetch, "RATE_GRACE", 1.0)
    monkeypatch.setattr(fetch, "MAX_FILE", MIB)
    monkeypatch.setattr(stage, "MAX_FILE", MIB)


def routes(rootfs: Script) -> dict[str, Script]:
    good = {f"/rhcos/4.19/{n}": [response(fake_bytes(n))] for n in NAMES.values() if n != ROOTFS}
    return {**good, "/rhcos/4.19/sha256sum.txt": [response(b"", status="404 Not Found")],
            f"/rhcos/4.19/{ROOTFS}": rootfs}


def run(runner, example_dir: Path, out: Path, rootfs: Script):
    inv = inventory(example_dir, NAMES)
    assert runner.invoke(app, ["render", str(inv), "-o", str(out)]).exit_code == 0
    with fake_http(routes(rootfs)) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/rhcos/4.19"
        result = runner.invoke(app, ["images", str(inv), "-o", str(out), "--from", url, "--json"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("fake_openshift_install", "small_limits")
@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_mirror_fails_the_file_in_bounded_time_and_size(runner, example_dir: Path,
                                                                  tmp_path: Path, case: str) -> None:
    make, reason, removed = HOSTILE[case]
    out = tmp_path / "out"
    result = run(runner, example_dir, out, make())  # type: ignore[operator]
    assert result.exit_code == 1, result.output
    files = {f["name"]: f for f in json.loads(result.stdout)["files"]}
    assert files[ROOTFS]["status"] == "failed"
    assert reason in files[ROOTFS]["detail"], files[ROOTFS]["detail"]
    assert [files[n]["status"] for n in NAMES.values() if n != ROOTFS] == ["fetched", "fetched"]
    assert not (out / "http/rhcos" / ROOTFS).exists()
    if removed:
        assert not (out / PARTIAL_DIR / f"{ROOTFS}.part").exists()


@pytest.mark.usefixtures("fake_openshift_install")
def test_a_file_larger_than_the_disk_holds_is_refused_before_a_byte_is_written(
        runner, example_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import upi.images.stage as stage

    monkeypatch.setattr(stage, "MAX_FILE", 1 << 62)  # only the disk's free space can refuse it
    out = tmp_path / "out"
    result = run(runner, example_dir, out, [length_head(str(1 << 60))])
    assert result.exit_code == 1, result.output
    files = {f["name"]: f for f in json.loads(result.stdout)["files"]}
    assert f"{ROOTFS} needs {1 << 60:,} more bytes but {PARTIAL_DIR}/ has " in files[ROOTFS]["detail"]
    assert not (out / PARTIAL_DIR / f"{ROOTFS}.part").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs (mount needs root): a disk that fills up."""
    require_root("mounting a tmpfs")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("fake_openshift_install")
def test_a_full_disk_is_a_clean_failure_and_the_partial_file_is_removed(
        runner, example_dir: Path, small_disk: Path) -> None:
    out = small_disk / "out"
    body = [HEAD + b"\r\n", *[b"x" * 65536] * 64]  # 4 MiB, no Content-Length: no check can foresee it
    result = run(runner, example_dir, out, body)
    assert result.exit_code == 1, result.output
    files = {f["name"]: f for f in json.loads(result.stdout)["files"]}
    assert files[ROOTFS]["status"] == "failed"
    assert f"no space left for {ROOTFS} in {PARTIAL_DIR}/" in files[ROOTFS]["detail"]
    assert "(the partial file was removed)" in files[ROOTFS]["detail"]
    assert not (out / PARTIAL_DIR / f"{ROOTFS}.part").exists()
    assert json.loads((out / "manifest.json").read_text())["images"]  # the others are recorded
