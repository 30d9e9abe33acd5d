"""Two writers of one render directory at once lose nothing (docs/render.md, "Concurrent writers").

Each pair of writers (render+render, render+flip, flip+flip, render+images,
images+flip) runs ROUNDS times, each writer a process of its own
(tests/renderdir_writers.py), both told to go at the same instant. After
every round: no installed.json entry and no image record is lost, and every
per-MAC PXE file boots disk exactly when installed.json says its node is
installed (an installer file beside an "installed" record reinstalls a DGX
at its next PXE boot, wiping its disk).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_images import NAMES, fake_bytes, inventory, mirror
from typer.testing import CliRunner

from upi.cli import app
from upi.facts import boot_entries
from upi.inventory import load_inventory

pytestmark = pytest.mark.slow  # 5 pairs x 20 rounds: about 45 s on a 2-core VM

ROUNDS = 20
WRITERS = Path(__file__).parent / "renderdir_writers.py"


class Writer:
    """One writer process, serving a round per DIR it is sent."""

    def __init__(self, kind: str, inv: Path, arg: str = "") -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen([sys.executable, str(WRITERS), kind, str(inv), arg], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ready(self, out: Path) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{out}\n")
        self.proc.stdin.flush()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _installer(text: str) -> bool:
    return "coreos.inst" in text or "coreos.live" in text


def _check(inv_path: Path, out: Path, installed: set[str], images: int) -> None:
    record = json.loads((out / "installed.json").read_text())["nodes"] if installed else {}
    if not installed:
        assert not (out / "installed.json").exists() or not json.loads(
            (out / "installed.json").read_text())["nodes"]
    assert set(record) == installed, "an installed.json entry was lost"
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest.get("images", {})) == images, "image records were lost"
    for e in boot_entries(load_inventory(inv_path)):
        text = (out / e.config_path).read_text()
        assert _installer(text) == (e.node.name not in installed), (
            f"{e.config_path} of {e.node.name} disagrees with installed.json")
        assert manifest["files"][e.config_path]["sha256"] == hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def site(example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> Iterator[tuple[Path, Path, str]]:
    """The inventory, a rendered DIR every round starts from, and a mirror for `upi images`."""
    inv = inventory(example_dir, NAMES)
    base = tmp_path / "base"
    res = CliRunner().invoke(app, ["render", str(inv), "-o", str(base)])
    assert res.exit_code == 0, res.output
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    yield inv, base, str(src)


PAIRS = {
    "render+render": ((("render", ""), ("render", "")), set(), 0),
    "render+flip": ((("render", ""), ("flip", "worker-0")), {"worker-0"}, 0),
    "flip+flip": ((("flip", "worker-0"), ("flip", "worker-1")), {"worker-0", "worker-1"}, 0),
    "render+images": ((("render", ""), ("images", "SRC")), set(), 5),
    "images+flip": ((("images", "SRC"), ("flip", "worker-1")), {"worker-1"}, 5),
}


@pytest.mark.parametrize("pair", list(PAIRS))
def test_two_writers_at_once_lose_no_record(site: tuple[Path, Path, str], tmp_path: Path, pair: str) -> None:
    inv, base, src = site
    kinds, installed, images = PAIRS[pair]
    writers = [Writer(kind, inv, src if arg == "SRC" else arg) for kind, arg in kinds]
    try:
        for n in range(ROUNDS):
            out = tmp_path / f"round-{n}"
            shutil.copytree(base, out)
            for w in writers:
                w.ready(out)
            for w in writers:
                w.go()
            answers = [w.answer() for w in writers]
            assert answers == ["ok", "ok"], f"round {n}: {answers}"
            _check(inv, out, installed, images)
            shutil.rmtree(out)
    finally:
        for w in writers:
            w.close()
