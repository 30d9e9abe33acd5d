"""Read openshift-install's log lines: stages, errors, and secrets to hide.

On a terminal the installer prints `INFO msg`; piped, `level=info msg=<text>`
with no time and no quotes, a message with newlines split over several lines
(../shared/reference/real-installer.md). Its .openshift_install.log keeps
logrus' full form, `time="..." level=info msg="<quoted>"`. All three shapes
are understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Level = Literal["debug", "info", "warning", "error", "fatal"]
EventKind = Literal[
    "waiting_api", "api_up", "waiting_bootstrap", "bootstrap_complete",
    "waiting_cluster", "waiting_operators", "install_complete", "console", "error", "other",
]

_LOGFMT = re.compile(r'^time="[^"]*"\s+level=(\w+)\s+msg=(?:"((?:[^"\\]|\\.)*)"\s*$|(.*))')
_TEXT = re.compile(r"^(DEBUG|INFO|WARNING|WARN|ERROR|FATAL)\s+(.*)$")
# Quoted only when the whole rest of the line is one quoted string; otherwise the
# message is the rest of the line as it stands (a message may start with a quote).
_PLAIN_LOGFMT = re.compile(r'^level=(\w+)\s+msg=(?:"((?:[^"\\]|\\.)*)"\s*$|(.*))')
_PASSWORD = re.compile(r'(password:?\s*)("?)[^"\s]+("?)', re.IGNORECASE)

_STAGES: list[tuple[re.Pattern[str], EventKind]] = [
    (re.compile(r"^Waiting up to \S+ .*for the Kubernetes API"), "waiting_api"),
    (re.compile(r"^API v\S+ up"), "api_up"),
    (re.compile(r"^Waiting up to \S+ .*for bootstrapping to complete"), "waiting_bootstrap"),
    (re.compile(r"^It is now safe to remove the bootstrap resources"), "bootstrap_complete"),
    (re.compile(r"^Waiting up to \S+ .*for the cluster at \S+ to initialize"), "waiting_cluster"),
    (re.compile(r"^Waiting up to \S+ .*each cluster operator has finished progressing"),
     "waiting_operators"),
    (re.compile(r"^Install complete!"), "install_complete"),
    (re.compile(r"^Access the OpenShift web-console here: (\S+)"), "console"),
]


@dataclass(frozen=True)
class LogEvent:
    """One installer log line: its level, its message (secrets hidden) and what it means."""

    level: Level
    message: str
    kind: EventKind
    value: str | None = None


def redact(message: str) -> str:
    """Hide the kubeadmin password the installer prints at the end."""
    return _PASSWORD.sub(lambda m: f"{m.group(1)}{m.group(2)}<hidden>{m.group(3)}", message)


def _level(word: str) -> Level:
    word = word.lower()
    if word == "warn":
        return "warning"
    if word in ("debug", "info", "warning", "error", "fatal"):
        return word  # type: ignore[return-value]  # narrowed by the membership test
    return "info"


def _split(line: str) -> tuple[Level, str]:
    line = line.rstrip("\n")
    for pattern in (_LOGFMT, _PLAIN_LOGFMT):
        m = pattern.match(line)
        if m:
            if m.group(2) is None:
                return _level(m.group(1)), m.group(3)
            return _level(m.group(1)), m.group(2).replace('\\"', '"').replace("\\n", "\n")
    m = _TEXT.match(line)
    if m:
        return _level(m.group(1)), m.group(2).strip()
    return "info", line.strip()


def display(line: str) -> str:
    """A log line as the installer shows it on a terminal: `LEVEL message`, secrets hidden."""
    event = parse_line(line)
    return f"{event.level.upper():<5} {event.message}" if line.strip() else ""


def parse_line(line: str) -> LogEvent:
    """Classify one line of openshift-install output."""
    level, message = _split(line)
    message = redact(message)
    for pattern, stage in _STAGES:
        m = pattern.match(message)
        if m:
            return LogEvent(level, message, stage, m.group(1) if m.groups() else None)
    kind: EventKind = "error" if level in ("error", "fatal") else "other"
    return LogEvent(level, message, kind)
