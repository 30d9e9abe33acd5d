from __future__ import annotations

import json
import os
import time
from pathlib import Path

from check_helpers import LOOPBACK, http_server
from conftest import inventory_path

from upi.cli import app
from upi.inventory import load_inventory

IGNITION = json.dumps({"ignition": {"version": "3.2.0"}, "storage": {}})


def http_root(tmp_path: Path, age_hours: float = 1.0) -> Path:
    """The provisioner's HTTP root for dgxpod: RHCOS artifacts and the three ignition files."""
    root = tmp_path / "www"
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    for rel in (inv.rhcos.kernel, inv.rhcos.initramfs, inv.rhcos.rootfs):
        assert rel
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"\x7fELF" + b"\0" * 4096)
    (root / "ignition").mkdir()
    made = time.time() - age_hours * 3600
    for role in ("bootstrap", "master", "worker"):
        path = root / "ignition" / f"{role}.ign"
        path.write_text(IGNITION)
        os.utime(path, (made, made))
    return root


def check_http(runner, port: int, *extra: str):
    return runner.invoke(app, ["check", "http", str(inventory_path("dgxpod")), "--server", LOOPBACK,
                               "--port", str(port), *extra])


def test_served_artifacts_and_fresh_ignition_pass(runner, tmp_path: Path) -> None:
    with http_server(http_root(tmp_path)) as port:
        result = check_http(runner, port, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["checks"]
    assert [(r["check"], r["verdict"]) for r in rows] == [
        ("GET kernel", "pass"), ("GET initramfs", "pass"), ("GET rootfs", "pass"),
        ("GET bootstrap.ign", "pass"), ("age of bootstrap.ign", "pass"),
        ("GET master.ign", "pass"), ("age of master.ign", "pass"),
        ("GET worker.ign", "pass"), ("age of worker.ign", "pass"),
    ]
    assert rows[0]["got"] == "200, 4,100 bytes"
    assert rows[3]["got"] == f"ignition 3.2.0, {len(IGNITION)} bytes"


def test_missing_file_and_malformed_ignition_fail_with_a_fix(runner, tmp_path: Path) -> None:
    root = http_root(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    (root / str(inv.rhcos.initramfs)).unlink()
    (root / "ignition" / "worker.ign").write_text('{"ignition": {"config": {}}')
    with http_server(root) as port:
        result = check_http(runner, port)
    assert result.exit_code == 1
    base = f"http://{LOOPBACK}:{port}"
    assert [line for line in result.stdout.splitlines() if line.startswith("fail:")] == [
        f"fail: {base}/{inv.rhcos.initramfs}: HTTP 404 File not found: the server does not have "
        "the RHCOS initramfs: stage it with `upi images INVENTORY -o DIR --from SRC`, then publish "
        "it with `upi push INVENTORY -o DIR`",
        f"fail: {base}/ignition/worker.ign: not JSON with ignition.version; "
        "run `upi ignition` to make and copy the ignition files",
    ]
    assert result.stderr == "upi: error: 2 of 8 checks failed\n"


def test_ignition_older_than_12_hours_warns(runner, tmp_path: Path) -> None:
    with http_server(http_root(tmp_path, age_hours=13)) as port:
        result = check_http(runner, port)
    assert result.exit_code == 0, result.output
    warns = [line for line in result.stdout.splitlines() if line.startswith("warn:")]
    assert len(warns) == 3
    assert warns[0].startswith("warn: bootstrap.ign: the ignition files are 13.0 h old: boot the "
                               "nodes now, their certificates expire in 11.0 h")


def test_expired_ignition_fails(runner, tmp_path: Path) -> None:
    with http_server(http_root(tmp_path, age_hours=25)) as port:
        result = check_http(runner, port, "--json")
    assert result.exit_code == 1
    ages = [r for r in json.loads(result.stdout)["checks"] if r["check"].startswith("age of")]
    assert {(r["got"], r["verdict"]) for r in ages} == {("25.0 h", "fail")}
    assert "certificates expired at 24 h" in ages[0]["fix"]


def test_no_http_server_fails_every_url(runner, tmp_path: Path) -> None:
    from check_helpers import free_port

    port = free_port()
    result = check_http(runner, port, "--timeout", "0.5", "--json")
    assert result.exit_code == 1
    rows = json.loads(result.stdout)["checks"]
    assert {(r["got"], r["verdict"]) for r in rows} == {("connection refused", "fail")}
    assert {r["fix"].split(": ", 1)[1] for r in rows} == {
        f"nothing listens on {LOOPBACK}:{port}: start the web server that serves "
        "http://10.33.3.18:8080 there"}
