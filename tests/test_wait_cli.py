"""`upi wait` through the CLI against the FAKE openshift-install and the FAKE API server.

These runs keep the bootstrap (--keep-bootstrap) and leave VMs alone
(--no-vms); test_wait_site.py removes the bootstrap for real.
"""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import inventory_path, table_row
from fake_apiserver import FakeApiServer
from wait_support import installer_log, make_assets, script, state, wait_args

from upi.cli import app

INVENTORY = inventory_path("dgxpod")
LIGHT = ("--keep-bootstrap", "--no-vms")

pytestmark = pytest.mark.usefixtures("fake_openshift_install")


@pytest.fixture
def assets(runner, tmp_path: Path) -> Path:
    return make_assets(runner, INVENTORY, tmp_path)


def wait(runner, assets: Path, kube: FakeApiServer, *extra: str):
    return runner.invoke(app, wait_args(INVENTORY, assets, kube, *LIGHT, *extra))


def test_clean_run_reaches_install_complete_and_lists_the_nodes(runner, tmp_path, assets, kube,
                                                                monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    kube.add_node("master-0", ready=True)
    kube.add_node("worker-0", ready=False)
    result = wait(runner, assets, kube)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "== bootstrap-complete: done" in out and "== install-complete: done" in out
    assert "INFO  API v1.29.6+aba1e8d up" in out
    assert "console: https://console-openshift-console.apps.dgxpod.nvidia.com" in out
    assert table_row(out, "master-0", "-", "Ready") and table_row(out, "worker-0", "-", "NotReady")
    assert state(assets) == {"bootstrap_complete", "install_complete"}


def test_api_timeout_is_retried_then_succeeds(runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path, bootstrap_complete=["api-timeout", "ok"])
    result = wait(runner, assets, kube, "--json")
    assert result.exit_code == 0, result.output
    assert ("== bootstrap-complete: retrying (bootstrap failed: timed out, still progressing), "
            "attempt 2") in result.stderr
    doc = json.loads(result.stdout)
    assert [(s["stage"], s["attempts"], s["status"]) for s in doc["stages"]] == [
        ("bootstrap_complete", 2, "done"), ("bootstrap_removed", None, "kept (--keep-bootstrap)"),
        ("install_complete", 1, "done")]
    assert installer_log(assets).count("for the Kubernetes API at") == 2


def test_bootstrap_failure_stops_with_the_installers_errors_and_removes_nothing(
        runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path, bootstrap_complete=["bootstrap-failed"])
    # Without --keep-bootstrap: the failure must stop before anything is removed.
    result = runner.invoke(app, wait_args(INVENTORY, assets, kube, "--no-vms"))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(
        "upi: error: wait-for bootstrap-complete failed (exit 5: bootstrap failed); "
        "the installer's last errors:\n  Bootstrap failed to complete: bootstrap process reported "
        "failure: bootkube.service failed on the bootstrap host\n")
    assert "remove the bootstrap" not in result.stdout
    assert "to initialize" not in installer_log(assets)
    assert state(assets) == set()


def test_kubeadmin_password_is_shown_only_when_asked(runner, tmp_path, assets, kube,
                                                     monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    password = (assets / "auth" / "kubeadmin-password").read_text().strip()
    result = wait(runner, assets, kube)
    assert result.exit_code == 0, result.output
    assert password in installer_log(assets)  # the installer did print it
    assert password not in result.stdout and password not in result.stderr
    assert 'and password: "<hidden>"' in result.stdout
    again = wait(runner, assets, kube, "--show-password", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["kubeadmin_password"] == password


def test_kubeconfig_to_copies_refuses_a_different_file_and_backs_it_up_with_force(
        runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    dest = tmp_path / "home" / ".kube" / "config"
    first = wait(runner, assets, kube, "--kubeconfig-to", str(dest))
    assert first.exit_code == 0, first.output
    assert dest.read_bytes() == (assets / "auth" / "kubeconfig").read_bytes()
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    same = wait(runner, assets, kube, "--kubeconfig-to", str(dest))
    assert f"kubeconfig: {dest} already holds this kubeconfig: nothing to do" in same.stdout

    dest.write_text("another cluster\n")
    refused = wait(runner, assets, kube, "--kubeconfig-to", str(dest))
    assert refused.exit_code == 2
    assert refused.stderr == (f"upi: error: --kubeconfig-to {dest} exists and holds another "
                              "kubeconfig; pass --force to back it up and replace it\n")
    assert refused.stdout == ""  # refused before waiting for anything
    forced = wait(runner, assets, kube, "--kubeconfig-to", str(dest), "--force")
    assert forced.exit_code == 0, forced.output
    backups = list(dest.parent.glob("config.*.bak"))
    assert [b.read_text() for b in backups] == ["another cluster\n"]
    assert dest.read_bytes() == (assets / "auth" / "kubeconfig").read_bytes()


def _age_ignition(assets: Path, hours: float) -> None:
    record = assets / ".upi-ignition.json"
    doc = json.loads(record.read_text())
    doc["made_at"] = (datetime.now(UTC) - timedelta(hours=hours)).isoformat(timespec="seconds")
    record.write_text(json.dumps(doc))


def test_ignition_older_than_24_hours_is_refused(runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    _age_ignition(assets, 25)
    result = wait(runner, assets, kube)
    assert result.exit_code == 2
    assert result.stderr == (
        "upi: error: the ignition files are 25.0 h old: their certificates expired at 24 h; run "
        "`upi ignition` again with a fresh assets directory; upi wait refuses to wait for nodes "
        "that cannot join\n")
    assert "for the Kubernetes API" not in installer_log(assets)


def test_ignition_older_than_12_hours_is_a_warning(runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    _age_ignition(assets, 13)
    result = wait(runner, assets, kube)
    assert result.exit_code == 0, result.output
    assert "upi: warning: the ignition files are 13.0 h old: boot the nodes now" in result.stdout


def test_a_dir_without_an_install_is_a_usage_error(runner, tmp_path, kube) -> None:
    result = runner.invoke(app, wait_args(INVENTORY, tmp_path / "nothing", kube))
    assert result.exit_code == 2
    assert result.stderr == (f"upi: error: --dir {tmp_path / 'nothing'}: no openshift-install state "
                             f"here; run `upi ignition {INVENTORY} --dir {tmp_path / 'nothing'} -o DIR` "
                             "first\n")


def test_log_level_warn_keeps_the_summary_and_debug_shows_the_installer_runs(
        runner, tmp_path, assets, kube, monkeypatch) -> None:
    script(monkeypatch, tmp_path)
    kube.add_node("master-0", ready=True)
    quiet = runner.invoke(app, ["--log-level", "warn", *wait_args(INVENTORY, assets, kube, *LIGHT)])
    assert quiet.exit_code == 0, quiet.output
    assert "== bootstrap-complete" not in quiet.stdout and "INFO  API" not in quiet.stdout
    # Into a pipe (CliRunner) the nodes table is aligned plain text (console.print_table).
    assert table_row(quiet.stdout, "master-0", "-", "Ready") and "CSRs approved: 0" in quiet.stdout
    (tmp_path / "again").mkdir()
    fresh = make_assets(runner, INVENTORY, tmp_path / "again")  # the first run's state would resume
    loud = runner.invoke(app, ["-v", *wait_args(INVENTORY, fresh, kube, *LIGHT)])
    assert loud.exit_code == 0, loud.output
    assert "== install-complete: done" in loud.stdout
    assert "upi: debug: run (streamed): " in loud.stderr and " wait-for install-complete" in loud.stderr
