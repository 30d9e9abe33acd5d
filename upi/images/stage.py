"""`upi images`: stage the RHCOS files the boot files name, sha256-checked, into a render dir.

Kernel and initramfs go under DIR/tftp/ (pxelinux and GRUB read them over
TFTP) and all of them under DIR/http/ at the path `http_base_url` serves,
so `upi push` publishes them. Each file is streamed into
DIR/http/.upi-partial/<name>.part while its sha256 is computed (a rerun
resumes it), renamed into place only when the digest is the expected one,
and recorded under `images` in manifest.json (`upi render` keeps them).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from upi.errors import UsageError
from upi.facts.boot import tftp_path
from upi.images.fetch import MAX_FILE, SUMS, FetchFailed, Source, parse_sums
from upi.images.stream import Stream
from upi.inventory.model import Inventory
from upi.render import MANIFEST, PUBLIC, RenderedFile
from upi.renderdir import Transaction, transaction
from upi.safefs import Tree, UnsafePath, kind_of, relpath, sha256_fd, shown, write_all

KEYS = ("kernel", "initramfs", "rootfs", "image")
OVER_TFTP = ("kernel", "initramfs")
PARTIAL_DIR = "http/.upi-partial"
Progress = Callable[[str, int, int | None], None]
Status = Literal["fetched", "resumed", "unchanged", "failed"]


@dataclass(frozen=True)
class Wanted:
    """One RHCOS file: inventory key, file name, and where in DIR the boot files expect it."""

    key: str
    name: str
    targets: tuple[str, ...]


@dataclass
class Staged:
    """What happened to one file."""

    key: str
    name: str
    targets: tuple[str, ...]
    status: Status
    sha256: str = ""
    size: int = 0
    detail: str = ""
    fingerprints: dict[str, list[int]] = field(default_factory=dict)  # target -> fingerprint()


@dataclass
class ImagesResult:
    """Every file's outcome and the warnings about the inventory's choice of RHCOS."""

    release: str
    staged: list[Staged]
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Staged]:
        """Files not staged."""
        return [s for s in self.staged if s.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        """The result for `--json`."""
        return {"rhcos_release": self.release, "warnings": self.warnings,
                "files": [{k: v for k, v in vars(s).items() if k != "fingerprints"}
                          | {"targets": list(s.targets)} for s in self.staged]}


def http_path(inv: Inventory, value: str) -> str | None:
    """Where `value` sits under DIR/http/; None for a URL another server serves."""
    if not urlsplit(value).scheme:
        return value.lstrip("/")
    base = inv.provisioner.http_base_url.rstrip("/") + "/"
    return value[len(base):].split("?", 1)[0] if value.startswith(base) else None


def wanted_images(inv: Inventory) -> list[Wanted]:
    """The inventory's RHCOS files, each with the DIR paths the boot files use."""
    out = []
    for key in KEYS:
        value = getattr(inv.rhcos, key)
        if value is None:
            continue
        paths = []
        if key in OVER_TFTP:
            paths.append(f"tftp/{tftp_path(value)}")
        if (served := http_path(inv, value)) is not None:
            paths.append(f"http/{served}")
        name = urlsplit(value).path.rsplit("/", 1)[-1]
        out.append(Wanted(key, name, tuple(p for p in paths if relpath(p))))
    return out


def stream_warnings(wanted: list[Wanted], stream: Stream, installer: str) -> list[str]:
    """Say which inventory files are not the ones this installer was built for."""
    notes = []
    for w in wanted:
        built = stream.artifacts.get(w.key)
        if built is not None and built.name != w.name:
            notes.append(f"rhcos.{w.key} is {w.name}, but {installer} was built for RHCOS "
                         f"{stream.release} ({built.name}): boot the RHCOS the installer was "
                         "built for (set rhcos: to its files and download them), or use the "
                         "installer of that RHCOS")
    return notes


def expected_sums(wanted: list[Wanted], stream: Stream, source: Source) -> tuple[dict[str, str], list[str]]:
    """File name -> sha256: the installer's stream first, then the source's sha256sum.txt."""
    by_stream = stream.sha256_by_name()
    listed = parse_sums(source.read_small(SUMS) or "")
    sums, notes = {}, []
    for w in wanted:
        if w.name in by_stream:
            sums[w.name] = by_stream[w.name]
            if listed.get(w.name, by_stream[w.name]) != by_stream[w.name]:
                notes.append(f"{source.where(SUMS)} lists another sha256 for {w.name} than the "
                             "installer's stream; the stream's is checked")
        elif w.name in listed:
            sums[w.name] = listed[w.name]
    return sums, notes


def fingerprint(st: os.stat_result) -> list[int]:
    """What changes whenever a file's bytes may have: its inode, mtime and ctime (ns).

    An edit in place moves mtime and ctime (ctime cannot be set back, mtime can:
    `touch -r`); a file replaced is another inode. manifest.json records it
    beside the sha256, so a rerun rehashes only a file that changed since.
    """
    return [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _holds(tree: Tree, rel: str, sha: str, recorded: dict[str, dict[str, Any]]) -> bool:
    """`rel` is a regular file with digest `sha`.

    The record is trusted only while the file is the one `upi images` staged,
    untouched since (size and fingerprint); any other file is hashed again, so
    a staged file damaged in place is found and staged again, not called
    "unchanged" while `upi push` refuses it (docs/security.md).
    """
    st = tree.lstat(rel)
    if st is None or not stat.S_ISREG(st.st_mode):
        return False
    record = recorded.get(rel, {})
    if (record.get("sha256") == sha and record.get("size") == st.st_size
            and record.get("fingerprint") == fingerprint(st)):
        return True
    fd = tree.open_read(rel)
    if fd is None:
        return False
    try:
        return sha256_fd(fd)[0] == sha
    finally:
        os.close(fd)


class _Discarded(FetchFailed):
    """A failure after which the partial file is removed (it is wrong or cannot grow), not resumed."""


def _download(tree: Tree, source: Source, w: Wanted, sha: str, on_progress: Progress,
              limit: int = MAX_FILE) -> tuple[Status, int]:
    """Stream `w` into its partial file (resuming it), check the digest, rename into place.

    At most `limit` bytes (announced or sent); the disk must hold what the
    source announces before a byte is written. Too large, or the disk full:
    the partial file is removed and nothing is staged.
    """
    part = f"{PARTIAL_DIR}/{w.name}.part"
    try:
        return _stream(tree, source, w, sha, on_progress, limit, part)
    except _Discarded:
        tree.unlink(part)
        raise


def _stream(tree: Tree, source: Source, w: Wanted, sha: str, on_progress: Progress, limit: int,
            part: str) -> tuple[Status, int]:
    digest, have = hashlib.sha256(), 0
    fd = tree.open_read(part)
    if fd is not None:
        try:
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
                have += len(chunk)
        finally:
            os.close(fd)
    if have > limit:  # longer than the file can be: not a start to resume from
        tree.unlink(part)
        digest, have = hashlib.sha256(), 0
    with source.open(w.name, have) as opened:
        if opened.offset != have:  # the source cannot resume: start over
            tree.unlink(part)
            digest, have = hashlib.sha256(), 0
        if opened.total is not None and opened.total > limit:
            raise _Discarded(f"{source.where(w.name)} is {opened.total:,} bytes, more than "
                             f"{_what(limit)} ({limit:,}); not staged")
        resumed = have > 0
        out = tree.open_append(part, PUBLIC)
        try:
            os.fchmod(out, PUBLIC)
            if opened.total is not None:
                _check_space(out, opened.total - have, w.name)
            on_progress(w.name, have, opened.total)
            for chunk in opened.chunks:
                if have + len(chunk) > limit:
                    raise _Discarded(f"{source.where(w.name)} sends more than {_what(limit)} "
                                     f"({limit:,} bytes); not staged")
                digest.update(chunk)
                write_all(out, chunk)
                have += len(chunk)
                on_progress(w.name, have, opened.total)
            os.fsync(out)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _Discarded(f"no space left for {w.name} in {PARTIAL_DIR}/ after {have:,} bytes "
                                 "(the partial file was removed); free some and run upi images "
                                 "again") from None
            raise
        finally:
            os.close(out)
    got = digest.hexdigest()
    if got != sha:
        tree.unlink(part)  # a bad file is not resumed from either
        raise FetchFailed(f"sha256 mismatch: expected {sha}, got {got} from {source.where(w.name)}; "
                          "not staged")
    tree.move_to(part, tree, w.targets[0])
    return ("resumed" if resumed else "fetched"), have


def _refuse_planted(tree: Tree, wanted: list[Wanted]) -> None:
    """Refuse (exit 2) anything but a regular file where staging writes: nothing is staged then.

    A FIFO, a directory, a device or a link at a partial download, a staged
    file or the temp name a second copy is linked through would hang the read,
    crash the rename, or lead out of DIR: upi never reads, writes or follows it.
    """
    for w in wanted:
        paths = [f"{PARTIAL_DIR}/{w.name}.part"]
        for target in w.targets:
            parent, _, name = target.rpartition("/")
            paths += [target, f"{parent}/.{name}.upi-link"]
        for rel in paths:
            st = tree.lstat(rel)  # UnsafePath for a link or a file on the way
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"{shown(tree.root / rel)} is {kind_of(st.st_mode)}: `upi images` "
                                 "writes a regular file there and never reads, writes or follows "
                                 "anything else; remove it")


def _what(limit: int) -> str:
    return "its recorded size" if limit != MAX_FILE else "upi takes for one RHCOS file"


def _check_space(fd: int, needed: int, name: str) -> None:
    """The file system holding `fd` has room for `needed` more bytes (for an unprivileged writer)."""
    st = os.fstatvfs(fd)
    free = st.f_bavail * st.f_frsize
    if needed > free:
        raise _Discarded(f"{name} needs {needed:,} more bytes but {PARTIAL_DIR}/ has {free:,} free; "
                         "free some and run upi images again")


def _known_size(sha: str, recorded: dict[str, dict[str, Any]]) -> int:
    """The size a file of digest `sha` had when it was staged before, else MAX_FILE."""
    sizes = [r.get("size") for r in recorded.values() if r.get("sha256") == sha]
    return next((s for s in sizes if isinstance(s, int) and not isinstance(s, bool) and s > 0), MAX_FILE)


def _stage_one(tree: Tree, source: Source, w: Wanted, sha: str | None,
               recorded: dict[str, dict[str, Any]], on_progress: Progress) -> Staged:
    if not w.targets:
        return Staged(w.key, w.name, (), "failed", detail="served by another host (a full URL "
                      "outside http_base_url and not over TFTP): nothing to stage here")
    if sha is None:
        return Staged(w.key, w.name, w.targets, "failed",
                      detail=f"no sha256 known for {w.name}: neither the installer's stream nor "
                      f"{source.where(SUMS)} lists it; not staged")
    good = next((t for t in w.targets if _holds(tree, t, sha, recorded)), None)
    status: Status = "unchanged"
    detail = ""
    try:
        if good is None:
            if damaged := [t for t in w.targets if tree.lstat(t) is not None]:
                detail = (f"{', '.join(damaged)} in {shown(tree.root)} did not match its sha256 "
                          "(changed since it was staged): staged again")
            status, _ = _download(tree, source, w, sha, on_progress, _known_size(sha, recorded))
            good = w.targets[0]
    except FetchFailed as exc:
        return Staged(w.key, w.name, w.targets, "failed", sha, detail=str(exc))
    for target in w.targets:
        if target != good and not _holds(tree, target, sha, recorded):
            tree.link_to(good, target)
    # Taken last: linking a second name changes the inode's ctime.
    prints = {t: fingerprint(st) for t in w.targets if (st := tree.lstat(t)) is not None}
    st = tree.lstat(good)
    return Staged(w.key, w.name, w.targets, status, sha, st.st_size if st else 0, detail,
                  fingerprints=prints)


def _record(txn: Transaction, inv: Inventory, staged: list[Staged]) -> None:
    """manifest.json with `images` replaced: staged files in, the ones no longer wanted removed."""
    tree, doc, previous = txn.tree, txn.records.manifest, txn.records.images
    images: dict[str, dict[str, Any]] = {}
    for s in staged:
        if s.status != "failed":
            for target in s.targets:
                images[target] = {"sha256": s.sha256, "size": s.size, "mode": f"{PUBLIC:04o}",
                                  "rhcos": s.key, "fingerprint": s.fingerprints.get(target)}
    failed = {t for s in staged if s.status == "failed" for t in s.targets}
    for path, record in previous.items():
        if path in images:
            continue
        if path in failed or record.get("loader"):  # keep the last good one: the boot files still
            images[path] = record  # name it; signed loaders (upi.images.loaders) are not RHCOS files
        else:
            tree.unlink(path)
    doc = dict(doc) if doc else {}
    doc.setdefault("cluster", inv.cluster.domain)
    doc.setdefault("openshift_version", inv.cluster.openshift_version)
    doc.setdefault("files", {})
    doc["images"] = dict(sorted(images.items()))
    txn.write_manifest(RenderedFile(MANIFEST, (json.dumps(doc, indent=2) + "\n").encode(), PUBLIC))


def stage_images(inv: Inventory, out: Path, source: Source, stream: Stream, installer: str,
                 on_progress: Progress = lambda name, done, total: None) -> ImagesResult:
    """Stage every RHCOS file of `inv` into `out` (locked while it runs), then record them."""
    wanted = wanted_images(inv)
    notes = stream_warnings(wanted, stream, installer)
    sums, more = expected_sums(wanted, stream, source)
    notes += more
    with transaction(out) as txn:
        doc = txn.records.manifest
        if doc.get("cluster", inv.cluster.domain) != inv.cluster.domain:
            raise UsageError(f"{out} was rendered for {doc.get('cluster')}, not "
                             f"{inv.cluster.domain}: pass the render dir of this inventory")
        _refuse_planted(txn.tree, wanted)
        staged = [_stage_one(txn.tree, source, w, sums.get(w.name), txn.records.images, on_progress)
                  for w in wanted]
        _record(txn, inv, staged)
    notes += [s.detail for s in staged if s.status != "failed" and s.detail]
    return ImagesResult(stream.release, staged, notes)
