"""The one runner for external programs: argv lists, no shell, timeouts, captured output."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from upi.errors import CommandError


@dataclass(frozen=True)
class Result:
    """What a finished program printed and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    check: bool = True,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> Result:
    """Run `argv` to completion; raise CommandError on a timeout or (if `check`) non-zero exit."""
    args = [str(a) for a in argv]
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input_text,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        raise CommandError(args, None, stderr) from None
    except FileNotFoundError:
        raise CommandError(args, 127, f"{args[0]}: program not found") from None
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, proc.stderr or proc.stdout)
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)
