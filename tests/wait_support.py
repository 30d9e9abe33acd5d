"""Helpers for the `upi wait` tests: an installed assets dir, a scripted FAKE installer, the CLI call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_kube import FakeKube

from upi.cli import app


def make_assets(runner, inventory: Path, root: Path) -> Path:
    """`upi ignition` with the fake installer, as a user runs it before `upi wait`."""
    assets = root / "assets"
    result = runner.invoke(app, ["ignition", str(inventory), "--dir", str(assets),
                                 "-o", str(root / "ign-out")])
    assert result.exit_code == 0, result.output
    return assets


def script(monkeypatch: pytest.MonkeyPatch, root: Path, **outcomes: list[str]) -> Path:
    """Outcomes of the fake's wait-for runs: {"bootstrap_complete": ["api-timeout", "ok"], ...}."""
    plan = root / "wait-plan.json"
    plan.write_text(json.dumps({k.replace("_", "-"): v for k, v in outcomes.items()}))
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_WAIT", str(plan))
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_RELEASE", str(root / "release"))
    return plan


def wait_args(inventory: Path, assets: Path, kube: FakeKube, *extra: str) -> list[str]:
    """`upi wait` with a fast retry and the fake API server's kubeconfig."""
    return ["wait", str(inventory), "--dir", str(assets), "--kubeconfig", str(kube.kubeconfig),
            "--retry-pause", "0", *extra]


def installer_log(assets: Path) -> str:
    """What the fake installer wrote to ASSETS/.openshift_install.log."""
    return (assets / ".openshift_install.log").read_text()


def state(assets: Path) -> set[str]:
    """Stages recorded in ASSETS/.upi-wait.json."""
    path = assets / ".upi-wait.json"
    return set(json.loads(path.read_text())["done"]) if path.exists() else set()
