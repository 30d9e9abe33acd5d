"""Which installer failures are worth waiting through, and which stop the install."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from upi.installer import exit_meaning

# openshift-install exit codes (the table is upi.installer.EXIT_MEANINGS).
OPERATORS_NOT_STABLE = 7
INTERRUPTED = 8

# Error text that means "it did not finish in time", not "it broke": API not up
# yet, bootstrap or cluster still progressing when the installer's budget ran out.
_TIMEOUT_MARKS = (
    "timed out waiting for the condition",
    "context deadline exceeded",
    "i/o timeout",
    "failed waiting for kubernetes api",
    "connection refused",
    "no route to host",
    "client rate limiter wait returned an error",
)


@dataclass(frozen=True)
class Verdict:
    """Retry the same wait, or stop with why."""

    retry: bool
    reason: str


def meaning(code: int) -> str:
    """The installer's exit code in words."""
    return exit_meaning(code)


def classify(code: int, error_lines: Sequence[str]) -> Verdict:
    """Decide on a failed `wait-for` from its exit code and its error lines."""
    text = "\n".join(error_lines).lower()
    if code == INTERRUPTED:
        return Verdict(False, "the installer was interrupted")
    if code == OPERATORS_NOT_STABLE:
        return Verdict(True, "cluster operators still progressing")
    if code in (1, 5, 6) and any(mark in text for mark in _TIMEOUT_MARKS):
        return Verdict(True, f"{meaning(code)}: timed out, still progressing")
    return Verdict(False, meaning(code))
