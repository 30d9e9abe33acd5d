"""The openshift-install locator, streaming runner and exit meanings (reused by `upi wait`)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
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


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _go_json(text: str) -> str:
    """`text` inside a JSON string as Go's encoding/json writes it: <, > and & as \\u escapes."""
    quoted = json.dumps(text)[1:-1]
    return quoted.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _pull_secret() -> tuple[str, str, str]:
    """A pull secret as the console hands it out (and its second registry's user and password)."""
    user, password = "12345678|uhc-pool-3f0c", "eyJhbGciOiJSUzUxMiJ9.eyJzdWIiOiJh&b<c>d"
    doc = {"auths": {
        "cloud.openshift.com": {"auth": _b64("openshift-release-dev+ocm:TOKEN0123456789"),
                                "email": "admin@example.com"},
        "registry.redhat.io": {"auth": _b64(f"{user}:{password}"),
                               "email": "admin@example.com"}}}
    return json.dumps(doc, indent=2) + "\n", user, password


def _forms(secret: str, user: str, password: str) -> dict[str, str]:
    """Each way the pull secret can reach the installer's output (a line, or lines)."""
    compact = json.dumps(json.loads(secret), separators=(",", ":"))
    return {
        "JSON-escaped": f'pullSecret: Invalid value: "{json.dumps(compact)[1:-1]}": bad',
        "JSON-escaped twice": f'level=error msg="{json.dumps(json.dumps(compact)[1:-1])[1:-1]}"',
        "Go json (HTML-safe escapes)": f'"pullSecret":"{_go_json(compact)}"',
        "base64 of the file": f"data:;base64,{base64.b64encode(secret.encode()).decode()}",
        "base64, compact": base64.b64encode(compact.encode()).decode(),
        "base64 inside a larger document": base64.b64encode(b'{"x":"' + secret.encode() + b'"}').decode(),
        "base64, URL-safe": base64.urlsafe_b64encode(b"ab" + secret.encode()).decode(),
        # As `base64` prints it: lines of 76 characters, none holding the whole text.
        "base64, wrapped": base64.encodebytes(secret.encode()).decode().rstrip("\n"),
        "the auth value, wrapped in a larger base64": base64.encodebytes(
            b"x" * 40 + json.dumps(json.loads(secret)["auths"]["registry.redhat.io"]).encode()
        ).decode().rstrip("\n"),
        "user:password": f"authenticating as {user}:{password} failed",
        "the password alone": f"token {password} rejected",
        "the password JSON-escaped": f'"password":"{_go_json(password)}"',
    }


@pytest.mark.parametrize("form", list(_forms(*_pull_secret())))
def test_every_form_of_the_pull_secret_is_redacted(form: str) -> None:
    secret, user, password = _pull_secret()
    text = _forms(secret, user, password)[form]
    seen: list[str] = []
    stream(["printf", "%s\n", text], on_line=seen.append, timeout=10, secrets=pull_secret_fragments(secret))
    assert len(seen) == len(text.splitlines())
    shown = "\n".join(seen)
    assert "<redacted>" in shown, shown
    decoded = []  # what the base64 runs decode to (each line's, and the lines' joined), at each alignment
    for run in [*re.findall(r"[A-Za-z0-9+/_-]{12,}", shown), "".join(seen)]:
        for skip in range(4):
            chunk = run[skip:]
            chunk = chunk[:len(chunk) - len(chunk) % 4]
            with contextlib.suppress(ValueError):
                decoded.append(base64.b64decode(chunk.replace("-", "+").replace("_", "/")).decode("latin-1"))
    for text in (shown, *decoded):
        for part in (password[:12], password[-12:], "TOKEN0123456", "release-dev+ocm:"):
            assert part not in text, (form, shown)


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
