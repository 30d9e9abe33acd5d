"""The wait loop against a scripted installer (the end-to-end test uses the fake binary)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from upi.wait.driver import WaitFailed, WaitHooks, WaitOptions, run_wait
from upi.wait.state import load_state

OK = {
    "bootstrap-complete": ['level=info msg="API v1.29.6 up"',
                           'level=info msg="It is now safe to remove the bootstrap resources"'],
    "install-complete": ['level=info msg="Install complete!"',
                         'level=info msg="Access the OpenShift web-console here: '
                         'https://console-openshift-console.apps.c.example.com"'],
}
API_TIMEOUT = (5, ['level=error msg="Bootstrap failed to complete: timed out waiting for the condition"'])
BROKEN = (5, ['level=error msg="Bootstrap failed to complete: bootstrap process failed"'])


class Script:
    """An installer whose runs follow a script: (exit code, lines) per call and target."""

    def __init__(self, plan: dict[str, list[tuple[int, list[str]]]]) -> None:
        self.plan = plan
        self.calls: list[str] = []
        self.now = 0.0

    def run(self, target: str, feed: Callable[[str], None]) -> int:
        self.calls.append(target)
        steps = self.plan.get(target) or [(0, OK[target])]
        code, lines = steps.pop(0) if len(steps) > 1 else steps[0]
        for line in lines:
            feed(line)
        self.now += 60
        return code


def _hooks(script: Script, removed: list[str]) -> WaitHooks:
    def sleep(seconds: float) -> None:
        script.now += seconds

    return WaitHooks(run_installer=script.run, remove_bootstrap=lambda: removed.append("bootstrap"),
                     clock=lambda: script.now, sleep=sleep)


def test_clean_run_waits_removes_bootstrap_and_finds_the_console(tmp_path: Path) -> None:
    script, removed = Script({}), []
    result = run_wait(_hooks(script, removed), WaitOptions(tmp_path))
    assert script.calls == ["bootstrap-complete", "install-complete"]
    assert removed == ["bootstrap"]
    assert result.console_url == "https://console-openshift-console.apps.c.example.com"
    assert set(load_state(tmp_path).done) == {"bootstrap_complete", "bootstrap_removed",
                                              "install_complete"}


def test_api_timeout_is_retried_then_succeeds(tmp_path: Path) -> None:
    script = Script({"bootstrap-complete": [API_TIMEOUT, (0, OK["bootstrap-complete"])]})
    result = run_wait(_hooks(script, []), WaitOptions(tmp_path))
    assert script.calls == ["bootstrap-complete", "bootstrap-complete", "install-complete"]
    assert result.attempts["bootstrap-complete"] == 2


def test_broken_bootstrap_stops_with_the_installers_error(tmp_path: Path) -> None:
    script, removed = Script({"bootstrap-complete": [BROKEN]}), []
    with pytest.raises(WaitFailed) as info:
        run_wait(_hooks(script, removed), WaitOptions(tmp_path))
    assert "exit 5: bootstrap failed" in str(info.value)
    assert "bootstrap process failed" in str(info.value)
    assert removed == [] and script.calls == ["bootstrap-complete"]


def test_timeouts_stop_at_the_budget(tmp_path: Path) -> None:
    script = Script({"bootstrap-complete": [API_TIMEOUT]})
    with pytest.raises(WaitFailed, match="gave up after"):
        run_wait(_hooks(script, []), WaitOptions(tmp_path, bootstrap_budget=300, retry_pause=30))
    assert 2 <= len(script.calls) <= 5


def test_rerun_resumes_after_the_bootstrap_was_removed(tmp_path: Path) -> None:
    first = Script({"install-complete": [(8, ['level=fatal msg="interrupted"'])]})
    with pytest.raises(Exception, match="interrupted"):
        run_wait(_hooks(first, []), WaitOptions(tmp_path))
    second, removed = Script({}), []
    result = run_wait(_hooks(second, removed), WaitOptions(tmp_path))
    assert second.calls == ["install-complete"]
    assert removed == []
    assert result.resumed == ["bootstrap_complete", "bootstrap_removed"]


def test_keep_bootstrap_leaves_it_alone(tmp_path: Path) -> None:
    removed: list[str] = []
    run_wait(_hooks(Script({}), removed), WaitOptions(tmp_path, keep_bootstrap=True))
    assert removed == []
