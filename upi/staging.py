"""The staged, journaled replacement of a render dir's files, and its recovery after a kill.

Every file is first written into a staging dir inside DIR (same file system),
flushed to disk once, then a journal listing the renames is written; only
then are the files renamed into place, manifest.json last. A write killed
before the journal leaves DIR untouched; one killed after it is completed by
the next write into DIR (recover). The caller holds DIR's lock (writer.locked).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Sequence
from typing import NoReturn

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
    with Stager(tree) as stager:
        return stager.finish(files, removed)


class Stager:
    """A staging dir that fills while the render goes on: `feed` has a child process write files.

    Creating 5,000 files is kernel work and rendering the rest of the tree is
    Python work, so on a first render the two can overlap on two cores. A
    thread cannot do it: it needs the GIL back after every open, write and
    close, and waits up to the switch interval (5 ms) each time the render
    holds it. So `feed` forks (as Redis's background save does): the child
    creates the files it was given with the same `Tree.create` and exits,
    and the render goes on in the parent. `finish` waits for the child (what
    stopped it, if anything, is raised here: the same exception), writes the
    files it was not fed (or rewrites one the final list has otherwise),
    flushes the tree and writes the journal, as `stage` does. A process
    running threads never forks: `finish` then writes everything itself.
    Used as a context manager: leaving it without `finish` (a render error,
    a refusal, nothing changed) kills the child and removes the dir, so DIR
    is as it was.
    """

    def __init__(self, tree: Tree) -> None:
        self.name = STAGING_PREFIX + secrets.token_hex(8)
        os.mkdir(self.name, 0o700, dir_fd=tree.fd)
        self._tree = tree
        self._child: tuple[int, int, dict[str, RenderedFile]] | None = None  # pid, pipe, its files
        self._written: dict[str, RenderedFile] = {}  # what the child created, once it has ended
        self._done = False
        try:
            self._staged = Tree(tree.root / self.name, os.open(
                self.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=tree.fd))
        except BaseException:
            _remove_staging(tree, self.name)
            raise

    def __enter__(self) -> Stager:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            self.discard()

    def feed(self, files: Sequence[RenderedFile]) -> None:
        """Have a child process create `files` in the staging dir while this one renders on (once)."""
        if self._child is not None or self._written or threading.active_count() > 1 \
                or not hasattr(os, "fork"):
            return  # finish() writes them
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory or no process slot for a child: finish() writes them
            os.close(read)
            os.close(write)
            return
        if pid == 0:
            self._child_writes(files, read, write)
        os.close(write)
        self._child = (pid, read, {f.path: f for f in files})

    def _child_writes(self, files: Sequence[RenderedFile], read: int, write: int) -> NoReturn:
        """In the child: create `files`, hand the parent what went wrong, and leave without unwinding."""
        code = 1
        try:
            os.close(read)
            for f in files:
                self._staged.create(f.path, f.content, f.mode)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - raised again in the parent (_join)
            with contextlib.suppress(BaseException):
                write_all(write, _pickled(exc))
        finally:
            os._exit(code)

    def _join(self) -> None:
        """Wait for the child: its files are then written, or what stopped it is raised here."""
        if self._child is None:
            return
        files = self._child[2]
        status, said = self._reap()
        if status != 0:
            raise _unpickled(said)
        self._written = files

    def _reap(self) -> tuple[int, bytes]:
        """The child's exit code and what it said, once it has ended (never a zombie left)."""
        assert self._child is not None  # noqa: S101 - the callers check
        pid, read, _ = self._child
        self._child = None
        try:
            with os.fdopen(read, "rb") as pipe:
                said = pipe.read()
            _, status = os.waitpid(pid, 0)
        except BaseException:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            raise
        return os.waitstatus_to_exitcode(status), said

    def finish(self, files: list[RenderedFile], removed: list[str]) -> tuple[str, Journal]:
        """Every file of `files` staged and flushed, the journal written: the dir's name and journal."""
        self._join()
        staged = self._staged
        for path in self._written.keys() - {f.path for f in files}:  # fed, then left out
            staged.unlink(path)
        for f in files:
            early = self._written.get(f.path)
            if early is f or (early is not None and early.content == f.content and early.mode == f.mode):
                continue
            if early is not None:
                staged.unlink(f.path)
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
        staged.close()
        self._done = True
        return self.name, journal

    def discard(self) -> None:
        """Stop the child and remove the staging dir: nothing of it reaches DIR."""
        self._done = True
        if self._child is not None:
            with contextlib.suppress(OSError):
                os.kill(self._child[0], signal.SIGKILL)
            self._reap()  # what it said no longer matters: the error on its way out is the parent's
        self._staged.close()
        _remove_staging(self._tree, self.name)


def _pickled(exc: BaseException) -> bytes:
    """`exc` for the parent (the same exception: its type, errno and message), or an OSError saying it."""
    import pickle

    try:
        return pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - an exception that does not pickle is described instead
        return pickle.dumps(OSError(getattr(exc, "errno", None) or 0, str(exc) or type(exc).__name__))


def _unpickled(said: bytes) -> BaseException:
    """What the child of this very process sent (_pickled): never data from elsewhere."""
    import pickle

    try:
        exc = pickle.loads(said)  # noqa: S301 - written by our own fork, through a pipe only it holds
    except Exception:  # noqa: BLE001 - killed mid-write, or nothing said
        return OSError(0, "the staging writer ended early")
    return exc if isinstance(exc, BaseException) else OSError(0, "the staging writer ended early")


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
