"""render and validate end their process without teardown: every byte still reaches the pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, inventory_path


def _upi(*args: str) -> subprocess.CompletedProcess[str]:
    # Block-buffered stdout, as in any shell: what a skipped teardown would fail to flush.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-m", "upi", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False, env=env)


def test_validate_into_a_pipe_prints_every_row_and_exits_0() -> None:
    inv = inventory_path("dgxpod")
    done = _upi("validate", str(inv))
    assert done.returncode == 0, done.stderr
    nodes = json.loads(_upi("validate", str(inv), "--json").stdout)["nodes"]
    rows = done.stdout.splitlines()
    assert rows[0].startswith(f"{inv}: valid.") and rows[1].split()[0] == "name"
    assert [r.split()[0] for r in rows[2:]] == [n["name"] for n in nodes]


def test_render_writes_everything_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _upi("render", str(inventory_path("dgxpod")), "-o", str(out))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert done.stdout.rstrip().endswith(f"wrote {out}: {len(manifest['files']) + 1} new, "
                                         "0 changed, 0 unchanged, 0 removed")


def test_an_error_still_exits_2_with_its_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [\n")
    done = _upi("validate", str(bad))
    assert done.returncode == 2 and "YAML syntax error" in done.stderr


def test_a_failed_check_still_prints_its_report_and_exits_1() -> None:
    """`upi check` ends without teardown too (its pools joined): the whole report, and exit 1."""
    import socket

    inv = inventory_path("dgxpod")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # bound, never answering
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        done = _upi("check", "dns", str(inv), "--server", "127.0.0.1", "--port", str(port),
                    "--timeout", "0.3", "--retries", "0", "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)  # block-buffered: lost entirely if the exit skipped the flush
    assert doc["counts"]["fail"] == len(doc["checks"]) >= 1
    assert f"127.0.0.1:{port}" in doc["checks"][0]["check"]
    assert "checks failed" in done.stderr
