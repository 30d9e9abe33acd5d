"""What is planted in a render directory is refused, not crashed on, and never followed.

A FIFO, a directory or a link where `upi images` keeps a partial download or
stages an RHCOS file; installed.json nested past json's recursion limit or a
link leading out of DIR; a temp file an earlier upi left behind. Each is
refused with one message naming the path (exit 2; 1 for a damaged record),
no traceback, nothing outside DIR read or written (docs/security.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from test_images import NAMES, fake_bytes, inventory, mirror, run_images

from upi.cli import app
from upi.images.stage import PARTIAL_DIR

KERNEL = NAMES["kernel"]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dir(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("kept\n")


def _link_out(path: Path) -> None:
    outside = path.parents[3] / "outside.txt" if len(path.parents) > 3 else path.parent / "x"
    outside.write_text("outside DIR\n")
    path.symlink_to(outside)


PLANTS: dict[str, Callable[[Path], None]] = {"FIFO": _fifo, "directory": _dir, "link out of DIR": _link_out}
WHERE = {
    "partial download": f"{PARTIAL_DIR}/{KERNEL}.part",
    "staged kernel (http)": f"http/rhcos/{KERNEL}",
    "staged kernel (tftp)": f"tftp/rhcos/{KERNEL}",
    "hard-link temp": f"tftp/rhcos/.{KERNEL}.upi-link",
}


@pytest.fixture
def site(runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> tuple[Path, Path, str]:
    inv = inventory(example_dir, NAMES)
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inv), "-o", str(out)]).exit_code == 0
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    return inv, out, str(src)


@pytest.mark.parametrize("plant", PLANTS)
@pytest.mark.parametrize("where", WHERE)
def test_images_refuses_what_is_planted_where_it_writes(runner, site, tmp_path: Path, where: str,
                                                         plant: str) -> None:
    inv, out, src = site
    rel = WHERE[where]
    target = out / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    PLANTS[plant](target)
    outside = tmp_path / "outside.txt"
    res = run_images(runner, inv, out, src)
    assert "Traceback" not in res.output and not isinstance(res.exception, OSError), res.exception
    assert res.exit_code == 2, res.output
    assert str(target) in res.stderr and "remove it" in res.stderr
    assert "never" in res.stderr  # ... reads, writes or follows it
    if plant == "link out of DIR":
        assert target.is_symlink() and outside.read_text() == "outside DIR\n"
    if plant == "directory":
        assert (target / "inside").read_text() == "kept\n"
    # Nothing half-done: no image recorded, none staged.
    assert "images" not in json.loads((out / "manifest.json").read_text())


def test_images_stages_once_the_planted_thing_is_removed(runner, site) -> None:
    inv, out, src = site
    target = out / WHERE["staged kernel (http)"]
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    assert run_images(runner, inv, out, src).exit_code == 2
    target.unlink()
    res = run_images(runner, inv, out, src)
    assert res.exit_code == 0, res.output
    assert target.read_bytes() == fake_bytes(KERNEL)


def _render(runner, inv: Path, out: Path):
    return runner.invoke(app, ["render", str(inv), "-o", str(out)])


def _record_link(record: Path, tmp: Path) -> None:
    (tmp / "elsewhere.json").write_text('{"nodes": {}}')
    record.symlink_to(tmp / "elsewhere.json")


# Each record upi keeps beside the render (upi.dirrecord), and how its refusal names it.
WHAT = {"installed.json": "upi's installed-nodes record",
        "own-ignition.json": "upi's record of the nodes that boot their own ignition"}
RECORDS: dict[str, tuple[Callable[[Path, Path], None], int, str]] = {
    # json.loads of 100,000 '[' raises RecursionError, not ValueError.
    "nested past the recursion limit": (
        lambda rec, tmp: rec.write_text('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}"), 1,
        "is not {what}"),
    "a link out of DIR": (_record_link, 2, "is a symbolic link, not {what}"),
    "a FIFO": (lambda rec, tmp: os.mkfifo(rec), 2, "is a FIFO (named pipe), not {what}"),
    "a directory": (lambda rec, tmp: rec.mkdir(), 2, "is a directory, not {what}"),
}


@pytest.mark.parametrize("name", WHAT)
@pytest.mark.parametrize("case", RECORDS)
@pytest.mark.parametrize("command", ["render", "images", "status"])
def test_a_planted_record_is_refused_by_every_reader(runner, site, tmp_path: Path, case: str,
                                                     command: str, name: str) -> None:
    inv, out, src = site
    record = out / name
    plant, code, message = RECORDS[case]
    message = message.format(what=WHAT[name])
    plant(record, tmp_path)
    before = sorted(p.name for p in out.iterdir())
    if command == "render":
        res = _render(runner, inv, out)
    elif command == "images":
        res = run_images(runner, inv, out, src)
    else:
        res = runner.invoke(app, ["status", str(inv), "-o", str(out), "--json"])
    assert "Traceback" not in res.output and not isinstance(res.exception, (OSError, RecursionError)), (
        res.exception)
    if command == "status" and name == "own-ignition.json":
        # status only takes the sizes of the nodes' own ignition files from it: a damaged record
        # leaves them unknown (upi.status.look._own_names), and status goes on, reading nothing through it.
        assert res.exit_code == 0, res.output
    else:
        assert res.exit_code == code, res.output
        assert f"{record}" in res.output and message in res.output
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written, nothing replaced
    if case == "a link out of DIR":
        assert (tmp_path / "elsewhere.json").read_text() == '{"nodes": {}}'


@pytest.mark.parametrize("leftover", [".installed-k2j4h1x8", ".upi-manifest.new"])
@pytest.mark.parametrize("plant", ["file", "FIFO", "directory", "link out of DIR"])
def test_a_temp_file_an_earlier_upi_left_is_cleaned_not_called_foreign(runner, site, tmp_path: Path,
                                                                        leftover: str, plant: str) -> None:
    """Earlier upi versions wrote installed.json and manifest.json through these temp names."""
    inv, out, src = site
    path = out / leftover
    outside = tmp_path / "outside.txt"
    outside.write_text("outside DIR\n")
    {"file": lambda: path.write_text("{}"), "FIFO": lambda: os.mkfifo(path),
     "directory": lambda: (path.mkdir(), (path / "x").write_text("x")),
     "link out of DIR": lambda: path.symlink_to(outside)}[plant]()
    res = _render(runner, inv, out)
    assert "Traceback" not in res.output and not isinstance(res.exception, OSError), res.exception
    if plant == "directory":  # not a file upi could have left: refused, kept
        assert res.exit_code == 2 and str(path) in res.stderr, res.output
        assert (path / "x").read_text() == "x"
    else:
        assert res.exit_code == 0, res.output
        assert not os.path.lexists(path)
    assert outside.read_text() == "outside DIR\n"
    assert run_images(runner, inv, out, src).exit_code == (2 if plant == "directory" else 0)
