"""Every rendered file of the example inventories, byte for byte.

A change to a template, a fact or the model shows up here as a diff to review.
Regenerate on purpose with `pytest tests/test_golden.py --update-golden`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, inventory_path

from upi.cli import app

GOLDEN = Path(__file__).resolve().parent / "golden"
# Rendered here only: the disconnected variant of dgxpod (mirror/imageset-config.yaml).
GOLDEN_ONLY = ["disconnected"]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", EXAMPLES + GOLDEN_ONLY)
def test_render_matches_golden_files(runner, tmp_path: Path, name: str, update_golden: bool,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The csr/ units call the upi that rendered them: here one installed as /usr/local/bin/upi.
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/upi", "render"])
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path(name)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    golden = GOLDEN / name
    if update_golden:
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(out, golden)
        return
    rendered, expected = _tree(out), _tree(golden)
    assert sorted(rendered) == sorted(expected), "the set of rendered files changed"
    for path, content in expected.items():
        assert rendered[path].decode() == content.decode(), f"{name}/{path} differs from the golden file"
