from __future__ import annotations

import pytest

from upi.installer_log import parse_line
from upi.wait.policy import classify
from upi.wait.state import load_state, save_state


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ('level=info msg="Waiting up to 20m0s (until 3:04PM UTC) for the Kubernetes API at '
         'https://api.dgxpod.nvidia.com:6443..."', "waiting_api"),
        ("INFO API v1.29.6+aba1e8d up", "api_up"),
        ('time="2026-11-22T13:00:00Z" level=info msg="Waiting up to 45m0s (until 3:49PM UTC) for '
         'bootstrapping to complete..."', "waiting_bootstrap"),
        ('level=info msg="It is now safe to remove the bootstrap resources"', "bootstrap_complete"),
        ("INFO Install complete!", "install_complete"),
        ('level=error msg="Bootstrap failed to complete: timed out waiting for the condition"', "error"),
        ("DEBUG Still waiting for the cluster to initialize", "other"),
    ],
)
def test_installer_lines_map_to_stages(line: str, kind: str) -> None:
    assert parse_line(line).kind == kind


def test_console_url_is_extracted() -> None:
    event = parse_line('level=info msg="Access the OpenShift web-console here: '
                       'https://console-openshift-console.apps.dgxpod.nvidia.com"')
    assert event.kind == "console"
    assert event.value == "https://console-openshift-console.apps.dgxpod.nvidia.com"


@pytest.mark.parametrize(
    "line",
    [
        'level=info msg="Login to the console with user: \\"kubeadmin\\", '
        'and password: \\"Ab3dE-fGh1J-kLm2N-oPq3R\\""',
        'INFO Login to the console with user: "kubeadmin", and password: "Ab3dE-fGh1J-kLm2N-oPq3R"',
    ],
)
def test_kubeadmin_password_is_never_passed_on(line: str) -> None:
    event = parse_line(line)
    assert "Ab3dE-fGh1J-kLm2N-oPq3R" not in event.message
    assert "<hidden>" in event.message


def test_api_timeout_is_retried_but_a_broken_bootstrap_is_not() -> None:
    assert classify(5, ["Bootstrap failed to complete: timed out waiting for the condition"]).retry
    assert classify(1, ['Get "https://api.x:6443/version": dial tcp 10.0.0.1:6443: i/o timeout']).retry
    verdict = classify(5, ["Bootstrap failed to complete: bootstrap process failed"])
    assert not verdict.retry and verdict.reason == "bootstrap failed"
    assert classify(7, []).retry
    assert not classify(8, ["context deadline exceeded"]).retry
    assert not classify(3, ["timed out waiting for the condition"]).retry


def test_state_survives_a_restart(tmp_path) -> None:
    state = load_state(tmp_path)
    assert not state.is_done("bootstrap_complete")
    state.mark("bootstrap_complete", 812.34)
    save_state(tmp_path, state)
    again = load_state(tmp_path)
    assert again.is_done("bootstrap_complete") and not again.is_done("install_complete")
    assert again.done["bootstrap_complete"] == 812.3


def test_a_corrupt_state_file_starts_over(tmp_path) -> None:
    (tmp_path / ".upi-wait.json").write_text("{not json")
    assert load_state(tmp_path).done == {}
