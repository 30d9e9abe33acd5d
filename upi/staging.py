"""The staged, journaled replacement of a render dir's files, and its recovery after a kill.

Every file is first written into a staging dir inside DIR (same file system),
flushed to disk once, then a journal listing the renames is written; only
then are the files renamed into place, manifest.json last. A write killed
before the journal leaves DIR untouched; one killed after it is completed by
the next write into DIR (recover). The caller holds DIR's lock (writer.locked).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat

from upi.render import MANIFEST, RenderedFile
from upi.safefs import Tree, UnsafePath, relpath, shown, syncfs, write_all

STAGING_PREFIX = ".upi-staging-"
# Temp names earlier upi versions wrote installed.json (tempfile.mkstemp) and manifest.json through.
LEFTOVER = re.compile(r"\.installed-[A-Za-z0-9_]{8}|\.upi-manifest\.new")
JOURNAL = ".upi-commit"  # in a staging dir: present = complete, to be renamed into place
JOURNAL_LIMIT = 64 << 20
Journal = dict[str, list[str]]  # {"replace": paths, manifest.json last; "remove": paths}


def stage(tree: Tree, files: list[RenderedFile], removed: list[str]) -> tuple[str, Journal]:
    """A new staging dir in `tree` with every file and a journal, flushed: its name and journal.

    The journal lists the renames (manifest.json last) and `removed`, the files to delete.
    """
    name = STAGING_PREFIX + secrets.token_hex(8)
    os.mkdir(name, 0o700, dir_fd=tree.fd)
    try:
        with Tree(tree.root / name, os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                            dir_fd=tree.fd)) as staged:
            for f in files:
                staged.create(f.path, f.content, f.mode)
            # One flush for the whole staged tree, not an fsync per file (5,000 journal commits).
            syncfs(staged.fd)
            journal = {"replace": sorted((f.path for f in files), key=lambda p: p == MANIFEST),
                       "remove": removed}
            fd = os.open(JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                         dir_fd=staged.fd)
            try:
                write_all(fd, json.dumps(journal).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.fsync(staged.fd)
    except BaseException:
        _remove_staging(tree, name)
        raise
    return name, journal


def roll_forward(tree: Tree, name: str, written: Journal | None = None) -> None:
    """Rename a complete staging dir's files into place, do its removals, delete it.

    `written`: the journal this process just wrote (its paths are upi's own); without
    it the journal is read back from the staging dir and every path in it checked.
    """
    stage_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=tree.fd)
    with Tree(tree.root / name, stage_fd) as stage:
        journal: object = written
        if journal is None:
            raw = stage.read(JOURNAL, JOURNAL_LIMIT)
            try:
                journal = json.loads(raw) if raw is not None else None
            except (ValueError, RecursionError):
                journal = None
        if isinstance(journal, dict):
            replace = journal.get("replace", [])
            remove = journal.get("remove", [])
            if written is None:
                replace = [p for p in replace if relpath(p)]
                remove = [p for p in remove if relpath(p)]
            _move_all(stage, tree, replace)
            for path in remove:
                st = tree.lstat(path)
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    tree.unlink(path)
    _remove_staging(tree, name)


def _move_all(stage: Tree, tree: Tree, paths: list[str]) -> None:
    """Rename the staged `paths` into `tree`, in order; a directory DIR lacks moves in one rename.

    A first render's tftp/ of 5,000 PXE files is then one rename, not 5,000.
    A path already gone from the stage was renamed before a kill: skipped.
    """
    moved: list[str] = []  # staged directories renamed whole ("tftp/")
    absent: dict[str, bool] = {}  # directory -> missing from DIR (asked once each)
    for path in paths:
        if moved and path.startswith(tuple(moved)):
            continue
        whole = _missing_dir(stage, tree, path, absent)
        if whole is not None:
            stage.forget(whole)  # its open fds now point into DIR
            stage.move_to(whole, tree)
            moved.append(whole + "/")
            continue
        st = stage.lstat(path)
        if st is not None and stat.S_ISREG(st.st_mode):  # else renamed before the kill
            stage.move_to(path, tree)


def _missing_dir(stage: Tree, tree: Tree, path: str, absent: dict[str, bool]) -> str | None:
    """The outermost directory of `path` that DIR lacks and the stage holds as a real directory."""
    parts = path.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        if rel not in absent:
            absent[rel] = tree.lstat(rel) is None
        if absent[rel]:
            st = stage.lstat(rel)
            return rel if st is not None and stat.S_ISDIR(st.st_mode) else None
    return None


def recover(tree: Tree) -> None:
    """Finish or discard what an interrupted write left in DIR (`.upi-staging-*`).

    Called with DIR locked, so no other writer owns them. A staging dir with
    its journal is rolled forward; one without never touched DIR and is
    deleted. Links and files under that name are unlinked, never followed.
    """
    with os.scandir(tree.fd) as entries:
        names = [e.name for e in entries]
    _remove_leftovers(tree, [n for n in names if LEFTOVER.fullmatch(n)])
    stale = [n for n in names if n.startswith(STAGING_PREFIX)]
    for name in stale:
        st = os.stat(name, dir_fd=tree.fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=tree.fd)
        elif _has_journal(tree, name):
            roll_forward(tree, name)
        else:
            _remove_staging(tree, name)


def _remove_leftovers(tree: Tree, names: list[str]) -> None:
    """Unlink an earlier upi's temp files (a link is unlinked, never followed); refuse a directory."""
    for name in names:
        st = os.stat(name, dir_fd=tree.fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{shown(tree.root / name)} is a directory where upi once kept a temp "
                             "file: upi never reads, writes or deletes through it; remove it")
        os.unlink(name, dir_fd=tree.fd)


def _has_journal(tree: Tree, name: str) -> bool:
    try:
        st = os.stat(f"{name}/{JOURNAL}", dir_fd=tree.fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode)


def _remove_staging(tree: Tree, name: str) -> None:
    # rmtree with dir_fd never follows a link inside the tree.
    shutil.rmtree(name, dir_fd=tree.fd, ignore_errors=True)
