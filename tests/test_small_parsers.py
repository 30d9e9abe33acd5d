"""Small parsers of flags and peers' answers: strict, never a traceback (issue 24, "small parsers").

The TFTP blksize of an OACK is in tests/test_check_tftp_hostile.py (a real
exchange); here: `approve-csr --manifests --image`, `--openshift-install`
given as a relative path, and the numbers other parsers read.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml
from conftest import FAKE_OPENSHIFT_INSTALL, inventory_path
from test_images import NAMES, fake_bytes, inventory, mirror, run_images

from upi.cli import app
from upi.digits import natural

INVENTORY = str(inventory_path("dgxpod"))

GOOD_IMAGES = [
    "registry.example.com/infra/upi:0.1.0",
    "localhost:5000/upi",
    "quay.io/acme/upi@sha256:" + "0123456789abcdef" * 4,
    "quay.io/acme/upi:1.2@sha256:" + "f" * 64,
    "10.0.0.5:5000/upi:1",
]

BAD_IMAGES = {
    "no registry": ("upi:0.1", "names no registry host"),
    "bare word": ("upi", "names no registry host"),
    "a URL": ("https://quay.io/acme/upi", "is written as a URL"),
    "upper case": ("quay.io/Acme/upi", "is not a repository"),
    "empty repository": ("quay.io/", "is not a repository"),
    "double slash": ("quay.io/acme//upi", "is not a repository"),
    "short digest": ("quay.io/acme/upi@sha256:abc", "has a digest that is not sha256"),
    "digest upper hex": ("quay.io/acme/upi@sha256:" + "A" * 64, "has a digest that is not sha256"),
    "tag starting with a dash": ("quay.io/acme/upi:-x", "has a tag that is not"),
    "tag too long": ("quay.io/acme/upi:" + "t" * 129, "has a tag that is not"),
    "port out of range": ("quay.io:99999/upi", "registry host[:port]"),
    "line break": ("quay.io/acme/upi:1\n  command: [sh]", "line break"),
    "space": ("quay.io/acme/upi 1", "a space"),
    "not ascii": ("quay.io/acme/upí", "not ASCII"),
    "too long": ("quay.io/" + "a" * 300, "longer than 255"),
}


@pytest.mark.parametrize("case", BAD_IMAGES)
def test_manifests_refuse_an_image_that_is_no_image_reference(runner, case) -> None:
    image, message = BAD_IMAGES[case]
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--manifests", "--image", image])
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"upi: error: --image {image[:200]!r} ")
    assert message in result.stderr
    assert result.stdout == ""  # no manifest with a broken image goes out


@pytest.mark.parametrize("image", GOOD_IMAGES)
def test_manifests_take_a_full_image_reference(runner, image) -> None:
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--manifests", "--image", image])
    assert result.exit_code == 0, result.output
    deployment = [d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "Deployment"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image


def _installer_here(where: Path) -> Path:
    copy = where / "openshift-install"
    shutil.copy(FAKE_OPENSHIFT_INSTALL, copy)
    copy.chmod(0o755)
    return copy


@pytest.mark.parametrize("given", ["./openshift-install", "openshift-install", "bin/../openshift-install"])
def test_a_relative_openshift_install_is_found_in_the_current_directory(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path,
        monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    _installer_here(work)
    monkeypatch.delenv("UPI_OPENSHIFT_INSTALL")
    monkeypatch.chdir(work)
    inv_path = inventory(example_dir, NAMES)
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    result = run_images(runner, inv_path, tmp_path / "out", str(src), "--openshift-install", given)
    assert result.exit_code == 0, result.output


def test_a_relative_openshift_install_in_the_environment_is_found_too(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _installer_here(tmp_path)
    monkeypatch.setenv("UPI_OPENSHIFT_INSTALL", "./openshift-install")
    monkeypatch.chdir(tmp_path)
    inv_path = inventory(example_dir, NAMES)
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    result = run_images(runner, inv_path, tmp_path / "out", str(src))
    assert result.exit_code == 0, result.output


def test_a_missing_a_plain_and_a_directory_installer_are_each_named(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inv_path = inventory(example_dir, NAMES)
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    cases = {"./nothing": f"{tmp_path / 'nothing'} does not exist",
             "./plain": f"{plain} is not executable (chmod +x it)",
             "./adir": f"{tmp_path / 'adir'} is a directory, not a program file",
             "./fifo": f"{tmp_path / 'fifo'} is a FIFO (named pipe), not a program file"}
    for given, message in cases.items():
        result = run_images(runner, inv_path, tmp_path / "out", str(tmp_path), "--openshift-install", given)
        assert "Traceback" not in result.output
        assert result.exit_code == 2, (given, result.output)
        assert f"upi: error: --openshift-install: {message}" in result.stderr, (given, result.stderr)
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)


@pytest.mark.parametrize("item", ["\u00b2=16443", "6443=\u00b9", "6443=" + "1" * 5000, "0006443=16443",
                                  "6443=016443"])
def test_a_port_map_that_is_no_pair_of_plain_numbers_is_bad_usage(runner, item) -> None:
    result = runner.invoke(app, ["check", "lb", INVENTORY, "--port-map", item, "--server", "127.0.0.1"])
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert f"--port-map {item[:40]}" in result.stderr


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("512", 512), ("0512", None), ("00008", None),
                                             ("\u00b2", None), ("\u0663", None), ("1" * 5000, None),
                                             ("", None), ("+5", None), (" 5", None), ("-1", None)])
def test_natural_reads_plain_digits_only(text: str, value: int | None) -> None:
    assert natural(text) == value


def test_natural_takes_leading_zeros_only_when_asked() -> None:
    assert natural("0512", leading_zeros=True) == 512
    assert natural("0" * 40 + "7", leading_zeros=True) == 7
    assert natural("9" * 20, leading_zeros=True) is None


@pytest.mark.parametrize("length", ["9" * 5000, "\u00b2"])
def test_a_bmc_content_length_that_is_no_plain_number_is_not_a_traceback(runner, example_dir: Path,
                                                                        tmp_path: Path, length: str) -> None:
    from fake_http import response
    from test_bmc_hostile import JSON, power_status

    answer = response(b"[1, 2]", headers={**JSON, "Content-Length": length})
    url, result = power_status(runner, example_dir, tmp_path, [answer])  # asserts: exit 1, no traceback
    for node in ("worker-0", "worker-1"):
        assert f"{node} (BMC {url}): " in result.stderr
