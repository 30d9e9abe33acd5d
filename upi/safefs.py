"""Files under a directory, reached without ever following a symbolic link.

Every path upi reads back from disk (manifest.json entries, a staging
journal, the http/ tree) is hostile until checked: `relpath` accepts only a
plain relative path, and `Tree` resolves it one component at a time from an
open directory with O_NOFOLLOW, so neither `../`, an absolute path nor a
symlink planted inside the directory can lead outside it (docs/render.md, docs/push.md).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from upi.errors import RenderError, UpiError, UsageError

DIR_MODE = 0o755
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted where a file should be must not hang.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_COMPONENTS = 64
_CONTROL = re.compile("[\x00-\x1f\x7f]")  # relpath's refusal, one scan (5,000 paths a render)
MAX_PATH = 1024


class UnsafePath(UsageError):
    """A path inside a directory that upi refuses to read, write or delete through."""


def relpath(value: object) -> str | None:
    """`value` if it is a plain relative POSIX path below a directory, else None.

    Refused: non-strings, empty, absolute, `.`/`..`/empty components, NUL,
    backslashes and control characters (which would forge lines in output
    and in `sha256sum` listings), over MAX_PATH bytes or MAX_COMPONENTS deep.
    """
    if not isinstance(value, str) or not value or len(value.encode(errors="replace")) > MAX_PATH:
        return None
    if value.startswith("/") or "\\" in value or _CONTROL.search(value):
        return None
    parts = value.split("/")
    if len(parts) > MAX_COMPONENTS or any(p in ("", ".", "..") for p in parts):
        return None
    return value


def shown(path: Path | str, limit: int = 160) -> str:
    """A path for a message: cut in the middle when it is too long to read."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data`: a short write is retried, never ignored."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - write(2) returns >0 or raises
            raise OSError(errno.EIO, "write returned 0")
        view = view[n:]


@functools.cache
def _syncfs_call() -> Any:
    """The C library's syncfs(2), or None where it has none.

    The process's own symbols hold libc (dlopen(NULL)): no ctypes.util.find_library,
    which runs `ldconfig -p` (20 ms of every render).
    """
    import ctypes  # only when flushing: `upi --help` and validate never load it

    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # pragma: no cover - not glibc/Linux
        return None


def syncfs(fd: int) -> None:
    """Flush the file system holding `fd` to disk, and RAISE if that failed.

    os.sync() cannot report a failed writeback; syncfs(2) does (Linux >= 5.8),
    so a disk that filled or failed while flushing is an error, not exit 0.
    """
    call = _syncfs_call()
    if call is None:  # pragma: no cover - not Linux
        os.sync()
        return
    if call(fd) != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Tree:
    """An open directory; paths below it are resolved without following links."""

    def __init__(self, root: Path, fd: int) -> None:
        self.root, self.fd = root, fd
        self._dirs: dict[str, int] = {"": fd}

    @classmethod
    def open(cls, root: Path) -> Tree:
        """Open `root` itself (a link naming the directory is followed: that is the user's choice)."""
        return cls(root, os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))

    def close(self) -> None:
        """Close every directory opened."""
        for fd in self._dirs.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._dirs.clear()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse(self, rel: str, what: str) -> UnsafePath:
        return UnsafePath(f"{shown(self.root / rel)} is {what}: upi never reads, writes or deletes "
                          "through it; remove it (or render into another directory)")

    def dir_fd(self, rel: str, *, create: bool = False) -> int | None:
        """The open directory `rel` ('' is the root); None if missing and not `create`.

        A symlink or a non-directory on the way is refused (UnsafePath). Created
        directories get DIR_MODE exactly, whatever the umask.
        """
        if rel in self._dirs:
            return self._dirs[rel]
        parent, _, name = rel.rpartition("/")
        pfd = self.dir_fd(parent, create=create)
        if pfd is None:
            return None
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, DIR_MODE, dir_fd=pfd)
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
            os.fchmod(fd, DIR_MODE)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            raise self._refuse(rel, "a symbolic link" if stat.S_ISLNK(st.st_mode)
                               else "not a directory") from None
        self._dirs[rel] = fd
        return fd

    def _split(self, rel: str, *, create: bool = False) -> tuple[int | None, str]:
        parent, _, name = rel.rpartition("/")
        return self.dir_fd(parent, create=create), name

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry `rel` itself (a link is not followed); None if missing."""
        dfd, name = self._split(rel)
        if dfd is None:
            return None
        try:
            return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _open_existing(self, rel: str) -> int | None:
        """A read fd on `rel` without following links; None if missing, a link, a FIFO or a dir."""
        dfd, name = self._split(rel)
        if dfd is None:
            return None
        try:
            return os.open(name, _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                return None
            raise

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """The bytes of regular file `rel`; None if missing, a link or not a regular file."""
        fd = self._open_existing(rel)
        if fd is None:
            return None
        try:
            return read_fd(fd, limit, self.root / rel)
        except _NotRegular:
            return None
        finally:
            os.close(fd)

    def unlink(self, rel: str) -> bool:
        """Remove file or link `rel` (never what a link points to); False if it was missing."""
        dfd, name = self._split(rel)
        if dfd is None:
            return False
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return False
        return True

    def create(self, rel: str, content: bytes, mode: int) -> None:
        """Create `rel` (which must not exist) with `mode` exactly and all of `content`."""
        dfd, name = self._split(rel, create=True)
        assert dfd is not None  # noqa: S101 - create=True makes the directory
        # Created with its final mode: a secret is never readable by others, not even briefly.
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            write_all(fd, content)
            os.fchmod(fd, mode)  # the umask may have trimmed it
        finally:
            os.close(fd)  # close reports deferred write errors (NFS): not suppressed

    def open_read(self, rel: str) -> int | None:
        """A blocking read fd on regular file `rel` (to stream a large file); None otherwise."""
        fd = self._open_existing(rel)
        if fd is None:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return fd

    def open_append(self, rel: str, mode: int) -> int:
        """An fd appending to regular file `rel`, created (with its directories) if missing."""
        dfd, name = self._split(rel, create=True)
        assert dfd is not None  # noqa: S101 - create=True makes the directory
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, mode, dir_fd=dfd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise self._refuse(rel, "not a regular file")
        os.set_blocking(fd, True)
        return fd

    def link_to(self, rel: str, dest_rel: str) -> None:
        """Hard-link `rel` as `dest_rel` (same tree), replacing a file or link there."""
        sdfd, sname = self._split(rel)
        ddfd, dname = self._split(dest_rel, create=True)
        assert sdfd is not None and ddfd is not None  # noqa: S101 - both resolved above
        temp = f".{dname}.upi-link"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=ddfd)
        os.link(sname, temp, src_dir_fd=sdfd, dst_dir_fd=ddfd, follow_symlinks=False)
        os.replace(temp, dname, src_dir_fd=ddfd, dst_dir_fd=ddfd)

    def move_to(self, rel: str, dest: Tree, dest_rel: str | None = None) -> None:
        """Rename `rel` to `dest_rel` in `dest` (same file system), replacing a file or link there."""
        sdfd, sname = self._split(rel)
        ddfd, dname = dest._split(dest_rel or rel, create=True)
        assert sdfd is not None and ddfd is not None  # noqa: S101 - both resolved above
        os.replace(sname, dname, src_dir_fd=sdfd, dst_dir_fd=ddfd)

    def forget(self, rel: str) -> None:
        """Close the directories opened at `rel` and below (it is about to move away)."""
        for key in [k for k in self._dirs if k == rel or k.startswith(rel + "/")]:
            with contextlib.suppress(OSError):
                os.close(self._dirs.pop(key))

    def walk(self, rel: str = "", *, skip: str | None = None) -> list[tuple[str, os.stat_result]]:
        """Every non-directory entry below `rel` (links included, never followed).

        `skip`: entries directly below `rel` whose name starts with it are left
        out, and not descended into.

        A tree nested deeper than MAX_COMPONENTS is refused (UnsafePath), not
        walked until the stack or the file descriptors run out.
        """
        dfd = self.dir_fd(rel)
        if dfd is None:
            return []
        found: list[tuple[str, os.stat_result]] = []
        self._walk(dfd, rel, rel.count("/") + bool(rel), found, skip)
        return found

    def _walk(self, dfd: int, rel: str, depth: int, found: list[tuple[str, os.stat_result]],
              skip: str | None = None) -> None:
        if depth >= MAX_COMPONENTS:
            raise self._refuse(rel, f"nested more than {MAX_COMPONENTS} directories deep")
        with os.scandir(dfd) as entries:
            names = [(e.name, e.stat(follow_symlinks=False)) for e in entries
                     if skip is None or not e.name.startswith(skip)]
        for name, st in sorted(names):
            child = f"{rel}/{name}" if rel else name
            if not stat.S_ISDIR(st.st_mode):
                found.append((child, st))
                continue
            try:
                cfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError as exc:  # replaced by a link or a file since the scan
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise
                found.append((child, os.stat(name, dir_fd=dfd, follow_symlinks=False)))
                continue
            try:
                self._walk(cfd, child, depth + 1, found)
            finally:
                os.close(cfd)

    def parent_of(self, rel: str) -> tuple[int, str]:
        """The open directory holding `rel`, and its last component (UnsafePath on the way)."""
        dfd, name = self._split(rel)
        if dfd is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.root / rel))
        return dfd, name


class _NotRegular(Exception):
    pass


def read_fd(fd: int, limit: int | None, where: Path) -> bytes:
    """All bytes of the regular file open at `fd`, at most `limit` (RenderError beyond)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise _NotRegular
    if limit is not None and st.st_size > limit:
        raise RenderError(f"{shown(where)} is {st.st_size} bytes; upi reads at most {limit}")
    os.set_blocking(fd, True)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def sha256_fd(fd: int) -> tuple[str, int]:
    """sha256 (hex) and size of what is left to read at `fd`, read in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def kind_of(mode: int) -> str:
    """What a non-regular file is, for messages."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


class UnreadableFile(UpiError):
    """A file the inventory names is not a plain, reasonably sized file (exit 2)."""

    exit_code = 2


NAMED_FILE_LIMIT = 4 << 20  # a pull secret, public key, CA bundle or known_hosts


def read_named_file(path: Path, limit: int = NAMED_FILE_LIMIT) -> bytes:
    """A file the inventory names: a regular file of at most `limit` bytes, read without hanging.

    FIFOs, devices, sockets and directories are refused (UnreadableFile) before
    a single byte is read: a FIFO with no writer would block forever and
    /dev/zero never ends. OSError passes through for the caller's message.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{shown(path)} is {kind_of(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise UnreadableFile(f"{shown(path)} is {st.st_size} bytes; upi reads at most {limit}")
        os.set_blocking(fd, True)
        data = os.read(fd, limit + 1)
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
            data += chunk
        if len(data) > limit:  # it grew while we read
            raise UnreadableFile(f"{shown(path)} is over {limit} bytes; upi reads at most {limit}")
        return data
    finally:
        os.close(fd)


def read_named_text(path: Path, limit: int = NAMED_FILE_LIMIT) -> str:
    """read_named_file as UTF-8 text; any failure is UnreadableFile (its message names `path`)."""
    try:
        return read_named_file(path, limit).decode("utf-8")
    except OSError as exc:
        raise UnreadableFile(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{shown(path)} is not UTF-8 text (byte {exc.start})") from None
