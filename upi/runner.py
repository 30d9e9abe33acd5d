"""The one runner for external programs: argv lists, no shell, timeouts, captured output."""

from __future__ import annotations

import functools
import logging
import queue
import re
import shlex
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from upi.errors import CommandError

log = logging.getLogger(__name__)


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
    log.debug("run (timeout %gs): %s", timeout, shlex.join(args))
    started = time.monotonic()
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
    except PermissionError:
        raise CommandError(args, 126, f"{args[0]}: not executable (or in a directory upi may "
                           "not enter)") from None
    log.debug("%s exited %d after %.2fs", args[0], proc.returncode, time.monotonic() - started)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, proc.stderr or proc.stdout)
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)


@dataclass(frozen=True)
class Streamed:
    """How a streamed program exited, with its last output lines (already redacted)."""

    argv: tuple[str, ...]
    returncode: int
    tail: tuple[str, ...]


REDACTED = "<redacted>"


# A base64 secret can reach a line cut into pieces: `base64` wraps its output at 76 characters,
# so no line holds the whole text. Any run of this many characters of one is hidden too.
PIECE = 24
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+")


def redact(line: str, secrets: Sequence[str]) -> str:
    """`line` with every secret in `secrets` replaced (fragments under 8 characters are ignored).

    A secret written in base64's alphabet is also hidden where only a piece
    of it (PIECE characters or more) is in the line, as in wrapped output.
    """
    for secret in secrets:
        if len(secret) >= 8 and secret in line:
            line = line.replace(secret, REDACTED)
    pieces = _pieces(tuple(secrets))
    if pieces and len(line) >= PIECE:
        line = _BASE64.sub(lambda m: _hide_pieces(m.group(), pieces), line)
    return line


@functools.lru_cache(maxsize=4)
def _pieces(secrets: tuple[str, ...]) -> frozenset[str]:
    """Every PIECE-character piece of the secrets that are all base64 characters."""
    return frozenset(s[i:i + PIECE] for s in secrets if len(s) >= PIECE and _BASE64.fullmatch(s)
                     for i in range(len(s) - PIECE + 1))


def _hide_pieces(run: str, pieces: frozenset[str]) -> str:
    """`run` with every stretch covered by pieces of a secret replaced."""
    hidden = [False] * len(run)
    for i in range(len(run) - PIECE + 1):
        if run[i:i + PIECE] in pieces:
            hidden[i:i + PIECE] = [True] * PIECE
    if not any(hidden):
        return run
    out, i = [], 0
    while i < len(run):
        j = i
        while j < len(run) and hidden[j] == hidden[i]:
            j += 1
        out.append(REDACTED if hidden[i] else run[i:j])
        i = j
    return "".join(out)


def stream(
    argv: Sequence[str | Path],
    *,
    on_line: Callable[[str], None],
    timeout: float | None,
    secrets: Sequence[str] = (),
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    keep: int = 200,
    grace: float = 10.0,
) -> Streamed:
    """Run `argv`, passing each output line (stdout and stderr merged) to `on_line`.

    Lines are redacted of `secrets` before anyone sees them. On a timeout a
    CommandError is raised; on any exception in the caller's thread
    (KeyboardInterrupt included) the child is terminated, killed after
    `grace` seconds, and the exception propagates.
    """
    args = [str(a) for a in argv]
    log.debug("run (streamed): %s", redact(shlex.join(args), secrets))
    try:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", bufsize=1, cwd=cwd,
            env=dict(env) if env is not None else None,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise CommandError(args, 127, f"{args[0]}: cannot run: {exc.strerror}") from None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    tail: deque[str] = deque(maxlen=keep)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while (item := _next_line(lines, deadline)) is not None:
            line = redact(item.rstrip("\r\n"), secrets)
            tail.append(line)
            on_line(line)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        returncode = proc.wait(timeout=left)
    except (TimeoutError, subprocess.TimeoutExpired):
        raise CommandError(args, None, "\n".join(tail)) from None
    finally:
        if proc.poll() is None:
            _stop(proc, grace)
    log.debug("%s exited %d", args[0], returncode)
    return Streamed(tuple(args), returncode, tuple(tail))


def _pump(pipe: IO[str], lines: queue.Queue[str | None]) -> None:
    with pipe:
        for line in pipe:
            lines.put(line)
    lines.put(None)


def _next_line(lines: queue.Queue[str | None], deadline: float | None) -> str | None:
    # Short waits keep the main thread responsive to Ctrl-C and the deadline.
    while True:
        wait = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
        if wait <= 0:
            raise TimeoutError
        try:
            return lines.get(timeout=wait)
        except queue.Empty:
            continue


def _stop(proc: subprocess.Popen[str], grace: float) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
