"""One error root for upi; the CLI maps each kind to an exit code.

Exit codes (docs/cli.md): 0 success, 1 a check or an operation failed,
2 bad usage or bad input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One located problem in a file: rendered as `FILE:LINE: field.path: message`."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class UpiError(Exception):
    """Base of every error upi reports to a user (never with a traceback)."""

    exit_code = 1
    field: str | None = None  # the option or key at fault, for `--json` errors


class InventoryError(UpiError):
    """The inventory (or a file it names) is invalid: exit 2."""

    exit_code = 2

    def __init__(self, problems: Sequence[str | Problem]) -> None:
        # Located problems keep their parts for `--json`; a bare string is a message alone.
        self.located = [p if isinstance(p, Problem) else Problem("", None, "", p) for p in problems]
        self.problems = [str(p) for p in problems]
        super().__init__("\n".join(self.problems))


class UsageError(UpiError):
    """Flags or arguments that cannot work together: exit 2."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        # Most messages start with the flag they are about (`--dir X: ...`).
        named = re.match(r"--[a-z][a-z-]*", message)
        self.field = field or (named.group() if named else None)


class RenderError(UpiError):
    """Rendering or writing the output tree failed."""


class CheckFailed(UpiError):
    """A check ran and found a problem."""


class CommandError(UpiError):
    """An external program failed; carries its argv, exit code and stderr."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        what = "timed out" if returncode is None else f"exited {returncode}"
        tail = stderr.strip().splitlines()[-5:]
        detail = ("\n" + "\n".join(tail)) if tail else ""
        super().__init__(f"{argv[0]} {what}{detail}")


class VmError(UpiError):
    """A libvirt operation on a VM node failed, or a VM differs from the inventory."""


class MissingExtra(UpiError):
    """An optional dependency is not installed; the message names the pip extra."""


class ClusterError(UpiError):
    """The cluster's API could not be reached, or refused a request."""
