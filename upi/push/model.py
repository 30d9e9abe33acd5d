"""What `upi push` moves, what it found on each host, and what it ran there."""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, Literal

from upi.errors import UpiError, UsageError
from upi.safefs import shown

Kind = Literal["dnsmasq", "tftp", "http", "haproxy"]
TargetName = Literal["provisioner", "load_balancer"]
# removed: upi's own file the render no longer has; kept: one it left in place (note says why).
Status = Literal["new", "changed", "unchanged", "removed", "kept"]
TARGETS: tuple[TargetName, ...] = ("provisioner", "load_balancer")
# Service configs are checked by their own program before they replace anything.
VALIDATED: tuple[Kind, ...] = ("dnsmasq", "haproxy")


class PushError(UpiError):
    """A push step failed on a host; the message carries that host's output."""


@dataclass(frozen=True)
class LocalFile:
    """A file of the render dir's http/ tree, pinned to the inode that was checked.

    It is opened again only to hash and upload it, never through a link, and
    only if it is still that same regular file (a file swapped for a link to
    a private key after the check is refused).
    """

    path: Path
    device: int
    inode: int
    recorded: str | None = None  # the sha256 `upi images` recorded for it in manifest.json

    def changed_since_staged(self, why: str) -> UsageError:
        """The error for an image whose content no longer matches its record."""
        return UsageError(f"{shown(self.path)} no longer matches what `upi images` recorded in "
                          f"manifest.json ({why}): changed or damaged since it was staged; nothing "
                          "was pushed. Run `upi images` again")

    def open(self) -> BinaryIO:
        """The file, opened without following a link; PushError if it is no longer the one checked."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                         | os.O_CLOEXEC)
        except OSError as exc:
            raise PushError(f"{self.path}: {exc.strerror}: it changed after it was checked; "
                            "push again") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (self.device, self.inode):
            os.close(fd)
            raise PushError(f"{self.path} was replaced after it was checked: nothing was uploaded "
                            "from it; push again")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")


@dataclass(frozen=True)
class Item:
    """One file to place: from the render dir (`source`) to a path on a host (`dest`)."""

    source: str
    dest: str
    mode: int
    kind: Kind
    content: bytes | None = None
    local: LocalFile | None = None  # large files (RHCOS images) are read only to upload
    root: str = "/"  # the target directory `dest` must stay below (a provisioner root)

    def payload(self) -> bytes | LocalFile:
        """What to upload: the bytes, or the local file to stream."""
        if self.content is not None:
            return self.content
        assert self.local is not None  # noqa: S101 - one of the two is always set
        return self.local

    @cached_property
    def sha256(self) -> str:
        """Hex digest of the payload (streamed once for files on disk).

        For an image `upi images` recorded it is the recorded sha256, once the
        file on disk is found to still have it (UsageError otherwise): the
        staged copy on the host is then checked against the record itself.
        """
        if self.content is not None:
            return hashlib.sha256(self.content).hexdigest()
        digest = hashlib.sha256()
        assert self.local is not None  # noqa: S101 - one of the two is always set
        with self.local.open() as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        got, want = digest.hexdigest(), self.local.recorded
        if want is not None and got != want:
            raise self.local.changed_since_staged(f"sha256 {got[:16]}..., recorded {want[:16]}...")
        return got

    def _beside(self, suffix: str) -> str:
        # Hidden (leading dot): dnsmasq's conf-dir and web servers' indexes skip it.
        head, tail = posixpath.split(self.dest)
        return posixpath.join(head, f".{tail}.{suffix}")

    @property
    def staged(self) -> str:
        """Where the new content is uploaded first: same dir, so the rename is atomic."""
        return self._beside("upi-new")

    @property
    def backup(self) -> str | None:
        """Where the replaced file is kept (one generation); none for the HTTP tree."""
        return None if self.kind == "http" else self._beside("upi-backup")

    @property
    def keep(self) -> str:
        """Where the replaced file is kept while the target's files are renamed into place.

        The backup; for the HTTP tree a hidden copy removed once every file is
        in place (it exists only to put the old file back if a rename fails).
        """
        return self.backup or self._beside("upi-old")


@dataclass(frozen=True)
class TargetPlan:
    """The files of one target and the command that reloads its service."""

    name: TargetName
    items: list[Item]
    reload: list[str]
    domain: str = ""  # the cluster's: names upi's ledger of the files it placed (upi.push.owned)
    prune: tuple[str, ...] = ()  # roots where a recorded file the render no longer has is removed


@dataclass(frozen=True)
class FileStatus:
    """One file on one host: new, changed or unchanged."""

    target: TargetName
    host: str
    source: str
    dest: str
    status: Status
    note: str = ""


@dataclass(frozen=True)
class Step:
    """A command run (or, in a dry run, to run) on a host, and why."""

    target: TargetName
    host: str
    purpose: str
    argv: list[str]
    returncode: int | None = None


@dataclass
class PushResult:
    """What a push found and did."""

    dry_run: bool
    files: list[FileStatus] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def changed(self) -> list[FileStatus]:
        """Files that were (or would be) uploaded or removed, or were left in place though stale."""
        return [f for f in self.files if f.status != "unchanged"]

    def to_json(self) -> dict[str, Any]:
        """The result for `--json`."""
        return {
            "dry_run": self.dry_run,
            "files": [vars(f) for f in self.files],
            "commands": [vars(s) for s in self.steps],
        }
