from __future__ import annotations

import pytest

from upi.errors import CommandError
from upi.runner import run


def test_run_captures_output_and_exit_code() -> None:
    result = run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=5, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_nonzero_exit_raises_with_stderr() -> None:
    with pytest.raises(CommandError) as info:
        run(["sh", "-c", "echo broken >&2; exit 2"], timeout=5)
    assert info.value.returncode == 2
    assert "broken" in str(info.value)


def test_timeout_raises_instead_of_hanging() -> None:
    with pytest.raises(CommandError, match="timed out"):
        run(["sleep", "5"], timeout=0.2)


def test_missing_program_is_a_command_error() -> None:
    with pytest.raises(CommandError) as info:
        run(["/nonexistent/program"], timeout=5)
    assert info.value.returncode == 127
