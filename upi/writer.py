"""Write a rendered tree: plan, diff, then replace all-or-nothing (stage, journal, rename).

DIR is locked while it is written (a second writer waits, then fails
clearly), nothing below DIR is reached through a symlink (upi.safefs), and a
write interrupted after its journal is complete is finished by the next
write into DIR, so readers see the old set or the new one (upi.staging).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from upi.errors import RenderError, UpiError, UsageError
from upi.render import MANIFEST, RenderedFile
from upi.safefs import DIR_MODE, Tree, UnsafePath, relpath, shown
from upi.staging import STAGING_PREFIX, Stager, recover, roll_forward, stage

Status = Literal["new", "changed", "unchanged", "removed"]
# Paths other upi commands own inside a render dir (upi ignition stages http/;
# installed.json is the record of installed nodes, upi.installed).
# own-ignition.json: the nodes `upi nodes add` published their own ignition for (upi.ownignition).
OWNED_ELSEWHERE = ("http/", "installed.json", "own-ignition.json")
MANIFEST_LIMIT = 64 << 20
LOCK_WAIT = 30.0  # seconds a second writer waits for the first


@dataclass(frozen=True)
class Change:
    """What writing would do to one path."""

    path: str
    status: Status


def _open(out: Path) -> Tree | None:
    """DIR opened for reading; None if it does not exist yet."""
    try:
        return Tree.open(out)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _dir_error(out, exc) from None


def _dir_error(out: Path, exc: OSError) -> UpiError:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return UsageError(f"{shown(out)} exists and is not a directory (or a path component is a file)")
    if exc.errno in (errno.ELOOP, errno.ENAMETOOLONG, errno.EINVAL):
        return UsageError(f"cannot use {shown(out)} as the output directory: {why}")
    return RenderError(f"cannot write {shown(out)}: {why}")


def read_manifest(tree: Tree | None) -> dict[str, Any]:
    """The last render's manifest.json ({} when there is none or it is unreadable)."""
    if tree is None:
        return {}
    try:
        data = tree.read(MANIFEST, MANIFEST_LIMIT)
        doc = json.loads(data) if data is not None else {}
    except (OSError, ValueError, RecursionError, UpiError):
        return {}
    return doc if isinstance(doc, dict) else {}


def manifest_files(doc: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """A manifest's files (path -> sha256) whose paths are safe, and the refused entries."""
    files = doc.get("files")
    if not isinstance(files, dict):
        return {}, []
    good, bad = {}, []
    for path, meta in files.items():
        sha = meta.get("sha256") if isinstance(meta, dict) else None
        if relpath(path) is None or path.startswith(STAGING_PREFIX) or not isinstance(sha, str):
            bad.append(repr(path)[:80])
        else:
            good[path] = sha
    return good, bad


IMAGE_DIRS = ("tftp/", "http/")


def manifest_images(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The RHCOS files `upi images` staged (path -> record); hostile entries dropped.

    Only plain paths under tftp/ or http/ with a sha256 and a size are kept:
    `upi render` keeps them, `upi push` publishes them, `upi images` replaces them.
    """
    images = doc.get("images")
    if not isinstance(images, dict):
        return {}
    good = {}
    for path, meta in images.items():
        if (relpath(path) is None or not path.startswith(IMAGE_DIRS) or not isinstance(meta, dict)
                or not isinstance(meta.get("sha256"), str) or len(meta["sha256"]) != 64
                or not isinstance(meta.get("size"), int)):
            continue
        good[path] = {k: meta[k] for k in ("sha256", "size", "mode", "rhcos", "fingerprint", "loader")
                      if k in meta}
    return good


def previous_manifest(out: Path) -> dict[str, Any]:
    """The last render's manifest.json ({} when there is none or it is unreadable)."""
    tree = _open(out)
    try:
        return read_manifest(tree)
    finally:
        if tree:
            tree.close()


def previous_files(out: Path) -> dict[str, str]:
    """Files the last render wrote (from its manifest.json), path -> sha256; unsafe paths dropped."""
    return manifest_files(previous_manifest(out))[0]


def _existing(tree: Tree) -> set[str]:
    # A staging dir (this write's, filling now, or one recover() left) is never walked.
    return {rel for rel, _ in tree.walk(skip=STAGING_PREFIX)}


def _plan(tree: Tree | None, files: list[RenderedFile], previous: dict[str, str]) -> list[Change]:
    changes = []
    missing: set[str] = set()  # directories DIR lacks: asked once, not once per file in them
    for f in files:
        parent = f.path.rpartition("/")[0]
        st = None
        if tree and parent not in missing:
            st = tree.lstat(f.path)
            if st is None and parent and tree.dir_fd(parent) is None:
                missing.add(parent)
        if st is None:
            changes.append(Change(f.path, "new"))
        elif stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{shown(tree.root / f.path)} is a directory; upi writes a file there: "  # type: ignore[union-attr]
                             "remove it")
        elif (not stat.S_ISREG(st.st_mode) or st.st_size != len(f.content)
              or stat.S_IMODE(st.st_mode) != f.mode or tree.read(f.path) != f.content):  # type: ignore[union-attr]
            changes.append(Change(f.path, "changed"))
        else:
            changes.append(Change(f.path, "unchanged"))
    wanted = {f.path for f in files}
    for path in sorted(set(previous) - wanted):
        st = tree.lstat(path) if tree else None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            changes.append(Change(path, "removed"))
    return changes


def plan(out: Path, files: list[RenderedFile]) -> list[Change]:
    """Per path: new, changed, unchanged, or removed (written last time, not now)."""
    tree = _open(out)
    try:
        return _plan(tree, files, manifest_files(read_manifest(tree))[0])
    finally:
        if tree:
            tree.close()


def _foreign(tree: Tree, files: list[RenderedFile], previous: dict[str, str],
             doc: dict[str, Any]) -> list[str]:
    images = set(manifest_images(doc))
    ours = set(previous) | images | {f.path for f in files} | {MANIFEST}
    return sorted(p for p in _existing(tree) - ours if not p.startswith(OWNED_ELSEWHERE))


def foreign_files(out: Path, files: list[RenderedFile]) -> list[str]:
    """Files in `out` that upi did not write (neither now nor last time)."""
    tree = _open(out)
    if tree is None:
        return []
    with tree:
        doc = read_manifest(tree)
        return _foreign(tree, files, manifest_files(doc)[0], doc)


def unified_diff(out: Path, files: list[RenderedFile], changes: list[Change]) -> str:
    """A unified diff of every new, changed or removed text file (secrets elided)."""
    tree = _open(out)
    try:
        return _diff(tree, files, changes)
    finally:
        if tree:
            tree.close()


def _diff(tree: Tree | None, files: list[RenderedFile], changes: list[Change]) -> str:
    by_path = {f.path: f for f in files}
    chunks = []
    for change in changes:
        if change.status == "unchanged":
            continue
        st = tree.lstat(change.path) if tree else None
        new = by_path.get(change.path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            chunks.append(f"--- {change.path}: {change.status} (not a regular file: not shown)\n")
            continue
        if (new and new.mode == 0o600) or (st is not None and st.st_mode & 0o077 == 0):
            chunks.append(f"--- {change.path}: {change.status} (holds secrets: not shown)\n")
            continue
        old_bytes = (tree.read(change.path) if tree and st else None) or b""
        new_bytes = new.content if new else b""
        if _binary(old_bytes) or _binary(new_bytes):
            chunks.append(f"--- {change.path}: {change.status} (binary: not shown)\n")
            continue
        old = old_bytes.decode(errors="replace").splitlines(True)
        new_lines = new_bytes.decode(errors="replace").splitlines(True)
        chunks.extend(difflib.unified_diff(old, new_lines, f"a/{change.path}", f"b/{change.path}"))
    return "".join(chunks)


def _binary(content: bytes) -> bool:
    """Boot loaders (--bootloaders) are binary; a NUL byte in the first 8 KiB says so, as git does."""
    return b"\0" in content[:8192]


def check_output_dir(out: Path) -> None:
    """Refuse output directories no render should touch: `/` (and '' which means `.`, refused by the CLI)."""
    if os.path.realpath(out) == "/":
        raise UsageError(f"refusing to write into {out} (the root directory): name a directory "
                         "of its own, e.g. -o out/dgxpod")


@contextlib.contextmanager
def locked(out: Path) -> Iterator[Tree]:
    """DIR created if needed (mode 0755 exactly), opened and locked for writing.

    The lock is flock(2) on DIR itself (no lock file to leave behind); a
    second writer waits up to LOCK_WAIT seconds, then fails naming DIR.
    """
    check_output_dir(out)
    try:
        _make_dirs(out)
        tree = Tree.open(out)
    except OSError as exc:
        raise _dir_error(out, exc) from None
    try:
        _lock(tree.fd, out)
        yield tree
    finally:
        tree.close()  # closing the last fd releases the lock


def _make_dirs(out: Path) -> None:
    """`out` and its missing parents, each 0755 exactly (never 0777 under umask 000)."""
    missing = []
    path = out
    while not path.is_dir():
        if path.is_symlink():
            with contextlib.suppress(FileNotFoundError):  # dangling: "not a directory" below
                path.stat()  # a loop raises ELOOP here
        if path.is_symlink() or path.exists():
            raise OSError(errno.ENOTDIR, "not a directory")
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(DIR_MODE)
            path.chmod(DIR_MODE)


def _lock(fd: int, out: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise RenderError(f"another upi process is writing {shown(out)} (waited {LOCK_WAIT:g} s); "
                                  "run this again when it has finished") from None
            time.sleep(0.05)
        except OSError:  # a file system without flock (some NFS): write unlocked, as before
            return


@dataclass(frozen=True)
class TreeUpdate:
    """What a write did (or, dry run, would do): every path's change, and the diff if asked for."""

    changes: list[Change]
    diff: str | None = None


def write_tree(out: Path, files: list[RenderedFile], *, force: bool = False) -> list[Change]:
    """Write `files` under `out` all-or-nothing (update_tree); each path's change."""
    return update_tree(out, files, force=force).changes


def update_tree(out: Path, files: list[RenderedFile], *, force: bool = False, diff: bool = False,
                dry_run: bool = False) -> TreeUpdate:
    """Plan once, diff if asked, and unless `dry_run` write `files` under `out`.

    Every file is first written into a staging dir inside `out` (same file
    system) with every write checked; the staged tree is flushed to disk
    (syncfs: a failed flush is an error), a journal listing the renames is
    written, then the files are renamed into place, manifest.json last. A
    write killed before the journal leaves DIR untouched; one killed after
    it is completed by the next write into DIR. The plan and the diff are
    made with DIR locked, so they describe exactly what is written.
    """
    if dry_run:
        tree = open_existing(out)
        try:
            return preview(tree, files, read_manifest(tree), diff=diff)
        finally:
            if tree:
                tree.close()
    with locked(out) as tree:
        recover(tree)
        return commit(tree, out, files, read_manifest(tree), force=force, diff=diff)


def open_existing(out: Path) -> Tree | None:
    """DIR opened for reading (a dry run: no lock, nothing written); None if it does not exist yet."""
    return _open(out)


def preview(tree: Tree | None, files: list[RenderedFile], doc: dict[str, Any], *,
            diff: bool = False) -> TreeUpdate:
    """What writing `files` over the DIR open at `tree` (manifest `doc`) would do, and its diff."""
    changes = _plan(tree, files, manifest_files(doc)[0])
    return TreeUpdate(changes, _diff(tree, files, changes) if diff else None)


def commit(tree: Tree, out: Path, files: list[RenderedFile] | None, doc: dict[str, Any], *,
           force: bool = False, diff: bool = False, records: tuple[RenderedFile, ...] = (),
           stager: Stager | None = None) -> TreeUpdate:
    """With DIR locked (`tree`) and its manifest `doc` read under that lock: write `files` and `records`.

    `files` (None: leave the rendered files as they are) replace the last
    render's, manifest.json last (those the plan finds unchanged are left in
    place, not written again); `records` (installed.json) are files other
    commands own, staged and renamed in the same journaled commit, so a kill
    leaves the old set or the new one, records included. `stager`: a
    staging dir already filling with files fed during the render (a first
    render); it is finished here, or, when nothing is written, left to its
    owner to remove.
    """
    text: str | None = None
    changes: list[Change] = []
    try:
        removed: list[str] = []
        if files is not None:
            previous = manifest_files(doc)[0]
            changes = _plan(tree, files, previous)  # first: it refuses links on the way
            if not force:
                _refuse_foreign(out, _foreign(tree, files, previous, doc))
            text = _diff(tree, files, changes) if diff else None
            removed = [c.path for c in changes if c.status == "removed"]
        if not records and all(c.status == "unchanged" for c in changes):
            return TreeUpdate(changes, text)
        # A file the plan found unchanged (same bytes, same mode) stays as it is: a day-2
        # render of 5,000 nodes that changes a few files stages those few, not 5,000.
        unchanged = {c.path for c in changes if c.status == "unchanged"}
        staged = [*records, *(f for f in files or () if f.path not in unchanged)]
        name, journal = stager.finish(staged, removed) if stager else stage(tree, staged, removed)
    except OSError as exc:
        raise RenderError(f"cannot write {shown(out)}: {exc.strerror or exc}; "
                          "the files already there were left as they were") from None
    try:
        roll_forward(tree, name, journal)
    except OSError as exc:
        raise RenderError(f"cannot write {shown(out)}: {exc.strerror or exc} while renaming the "
                          "staged files into place; the next `upi render` into it completes "
                          "this write") from None
    return TreeUpdate(changes, text)


def _refuse_foreign(out: Path, foreign: list[str]) -> None:
    if foreign:
        shown_names = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UsageError(
            f"{out} holds files upi did not write ({shown_names}); render into an empty "
            "directory, or pass --force to write beside them"
        )
