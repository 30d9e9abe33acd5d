"""The openshift-install locator, streaming runner and exit meanings (reused by `upi wait`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from upi.errors import CommandError
from upi.installer import (
    EXIT_MEANINGS,
    Installer,
    InstallerFailed,
    InstallerNotFound,
    exit_meaning,
    locate,
    pull_secret_fragments,
    release_of,
)
from upi.runner import stream


def executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_exit_codes_have_the_installers_meanings() -> None:
    assert sorted(EXIT_MEANINGS) == [0, 1, 3, 4, 5, 6, 7, 8]
    assert exit_meaning(5) == "bootstrap failed"
    assert exit_meaning(8) == "interrupted"
    assert exit_meaning(42) == "unknown exit code 42"
    assert exit_meaning(None) == "timed out: upi stopped it"


def test_locate_prefers_flag_then_env_then_path(tmp_path: Path) -> None:
    flag, env = executable(tmp_path / "flag"), executable(tmp_path / "env")
    on_path = executable(tmp_path / "openshift-install")
    environ = {"UPI_OPENSHIFT_INSTALL": str(env), "PATH": str(tmp_path)}
    assert locate(flag, environ=environ) == flag
    assert locate(None, environ=environ) == env
    assert locate(None, environ={"PATH": str(tmp_path)}) == on_path


def test_locate_refuses_a_file_that_is_not_executable(tmp_path: Path) -> None:
    plain = tmp_path / "openshift-install"
    plain.write_text("")
    with pytest.raises(InstallerNotFound, match=r"UPI_OPENSHIFT_INSTALL: .* is not executable"):
        locate(None, environ={"UPI_OPENSHIFT_INSTALL": str(plain)})


def test_failure_carries_meaning_and_last_error_lines(tmp_path: Path) -> None:
    script = executable(tmp_path / "oi", "#!/bin/sh\necho 'level=info msg=Waiting up to 20m0s'\n"
                        "echo 'level=error msg=Bootstrap failed to complete'\n"
                        "echo 'level=fatal msg=Bootstrap failed to complete: timed out'\nexit 5\n")
    seen: list[str] = []
    with pytest.raises(InstallerFailed) as info:
        Installer(script, tmp_path).run("wait-for", "bootstrap-complete", on_line=seen.append)
    exc = info.value
    assert (exc.returncode, exc.meaning, exc.exit_code) == (5, "bootstrap failed", 1)
    assert exc.error_lines == ["ERROR Bootstrap failed to complete",
                               "FATAL Bootstrap failed to complete: timed out"]
    assert str(exc).startswith("openshift-install wait-for bootstrap-complete exited 5 (bootstrap failed)")
    assert seen[0] == "level=info msg=Waiting up to 20m0s"


def test_unchecked_run_returns_the_exit_code(tmp_path: Path) -> None:
    script = executable(tmp_path / "oi", "#!/bin/sh\necho 'level=fatal msg=bootstrap failed'\nexit 5\n")
    result = Installer(script, tmp_path).run("wait-for", "bootstrap-complete", on_line=lambda _: None,
                                             check=False)
    assert (result.returncode, result.tail) == (5, ("level=fatal msg=bootstrap failed",))


def test_runner_passes_the_assets_dir(tmp_path: Path) -> None:
    script = executable(tmp_path / "oi", '#!/bin/sh\necho "$@"\n')
    seen: list[str] = []
    Installer(script, tmp_path / "a").run("create", "manifests", on_line=seen.append)
    assert seen == [f"--dir {tmp_path / 'a'} create manifests"]


def test_secrets_are_redacted_before_anyone_sees_them() -> None:
    secret = '{"auths":{"quay.io":{"auth":"QUJDREVGR0hJSktM"}}}'
    fragments = pull_secret_fragments(secret)
    assert json.dumps(secret)[1:-1] in fragments and "QUJDREVGR0hJSktM" in fragments
    printed = f'pullSecret: Invalid value: {json.dumps(secret)}: bad\nauth: QUJDREVGR0hJSktM\n'
    seen: list[str] = []
    result = stream(["printf", "%s", printed], on_line=seen.append, timeout=10, secrets=fragments)
    assert seen == ['pullSecret: Invalid value: "<redacted>": bad', "auth: <redacted>"]
    assert list(result.tail) == seen


def test_interrupt_stops_the_child(tmp_path: Path) -> None:
    pids: list[int] = []

    def interrupt(line: str) -> None:
        pids.append(int(line))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stream(["sh", "-c", "echo $$; exec sleep 60"], on_line=interrupt, timeout=None, grace=5)
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_deadline_stops_the_child() -> None:
    with pytest.raises(CommandError, match="timed out"):
        stream(["sleep", "60"], on_line=lambda _: None, timeout=0.3, grace=5)


def test_release_of_reads_the_version_line() -> None:
    assert release_of("openshift-install 4.16.3") == (4, 16)
    assert release_of("openshift-install unreleased-master-1234") is None
