"""Where an interrupted `upi wait` resumes: stages recorded in ASSETS/.upi-wait.json."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Stage = Literal["bootstrap_complete", "bootstrap_removed", "install_complete"]
STAGES: tuple[Stage, ...] = ("bootstrap_complete", "bootstrap_removed", "install_complete")
STATE_FILE = ".upi-wait.json"


@dataclass
class WaitState:
    """Stages already done, with the time (seconds) each one took."""

    done: dict[str, float] = field(default_factory=dict)

    def is_done(self, stage: Stage) -> bool:
        """Whether `stage` finished in an earlier or the current run."""
        return stage in self.done

    def mark(self, stage: Stage, seconds: float) -> None:
        """Record a finished stage."""
        self.done[stage] = round(seconds, 1)


def load_state(assets: Path) -> WaitState:
    """The recorded stages (none when the file is absent or unreadable)."""
    try:
        doc = json.loads((assets / STATE_FILE).read_text())
        done = {k: float(v) for k, v in doc.get("done", {}).items() if k in STAGES}
    except (OSError, ValueError, AttributeError, TypeError):
        done = {}
    return WaitState(done)


def save_state(assets: Path, state: WaitState) -> None:
    """Write the state atomically (a crash never leaves half a file)."""
    fd, tmp = tempfile.mkstemp(prefix=STATE_FILE, dir=assets)
    with os.fdopen(fd, "w") as fh:
        json.dump({"done": state.done}, fh, indent=2)
    Path(tmp).replace(assets / STATE_FILE)


INSTALLER_LOG = ".openshift_install.log"
MARK = b"Install complete!"


def install_completed(assets: Path) -> bool:
    """The cluster of ASSETS is installed: `upi wait` recorded install-complete, or the installer logged it.

    Day 2 hangs on this: such a cluster's day-1 ignition is not renewed by `upi ignition` (a new
    cluster identity) but served by the cluster itself (`upi nodes add`).
    """
    from upi.installer_log import parse_line

    if load_state(assets).is_done("install_complete"):
        return True
    try:
        data = (assets / INSTALLER_LOG).read_bytes()
    except OSError:
        return False
    if MARK not in data:
        return False
    return any(parse_line(line).kind == "install_complete"
               for line in data.decode(errors="replace").splitlines() if MARK.decode() in line)
