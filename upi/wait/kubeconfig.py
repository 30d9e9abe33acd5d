"""`--kubeconfig-to PATH`: copy ASSETS/auth/kubeconfig, never clobbering a different file."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from upi.errors import UsageError

PRIVATE = 0o600


@dataclass(frozen=True)
class CopyOutcome:
    """What happened at the destination."""

    dest: Path
    action: Literal["copied", "identical", "replaced"]
    backup: Path | None = None

    def __str__(self) -> str:
        if self.action == "identical":
            return f"{self.dest} already holds this kubeconfig: nothing to do"
        if self.action == "replaced":
            return f"copied to {self.dest} (0600); the previous file is kept as {self.backup}"
        return f"copied to {self.dest} (0600)"


def check_copy(src: Path, dest: Path, *, force: bool) -> None:
    """Refuse, before any waiting, a copy that could not be made at the end."""
    if not src.is_file():
        raise UsageError(f"--kubeconfig-to: {src} does not exist: run `upi ignition` for this --dir")
    if dest.is_dir():
        raise UsageError(f"--kubeconfig-to {dest} is a directory; name the file (e.g. ~/.kube/config)")
    if dest.is_file() and dest.read_bytes() != src.read_bytes() and not force:
        raise UsageError(f"--kubeconfig-to {dest} exists and holds another kubeconfig; pass --force "
                         "to back it up and replace it")


def copy_kubeconfig(src: Path, dest: Path, *, force: bool, now: datetime | None = None) -> CopyOutcome:
    """Copy `src` to `dest` with mode 0600; back up a different `dest` first (only with `force`)."""
    check_copy(src, dest, force=force)
    data = src.read_bytes()
    backup = None
    if dest.is_file():
        if dest.read_bytes() == data:
            return CopyOutcome(dest, "identical")
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
        backup = dest.with_name(f"{dest.name}.{stamp}.bak")
        shutil.copy2(dest, backup)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    with os.fdopen(fd, "wb") as fh:  # mkstemp makes it 0600: never readable by others, even briefly
        fh.write(data)
    Path(tmp).chmod(PRIVATE)
    Path(tmp).replace(dest)
    return CopyOutcome(dest, "replaced" if backup else "copied", backup)
