"""A host over SSH (paramiko): checked host key, timeouts, one retry on a dropped link."""

from __future__ import annotations

import contextlib
import errno
import select
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import paramiko

from upi.remote.base import CHUNK, SBIN_DIRS, Content, Mark, Span, copy_into, refuse_irregular, tail_of
from upi.remote.errors import HostKeyError, RemoteError
from upi.remote.hostkeys import RefuseUnknown, changed_key, load_known_hosts, revoked_key
from upi.runner import Result

T = TypeVar("T")
# A link that broke under us: reconnect once and try again.
DROPPED = (EOFError, ConnectionError, paramiko.SSHException)
# Every remote command runs in a POSIX shell with a known locale and sbin on PATH.
PRELUDE = f'export LC_ALL=C PATH="$PATH:{":".join(SBIN_DIRS)}"; exec '


# What a remote command may print on each stream: upi runs checks (haproxy -c, dnsmasq
# --test, sha256sum, systemctl) whose output is a few KiB; a host answering with more is
# broken or hostile, and is not kept in memory.
OUTPUT_CAP = 4 * 1024 * 1024


# How long output may still trail the exit status before upi stops waiting for EOF.
EOF_GRACE = 5.0


class _Timeout(Exception):
    pass


def _past(moment: float | None) -> bool:
    return moment is not None and time.monotonic() >= moment


class _TooMuch(Exception):
    pass


def remote_command(argv: Sequence[str]) -> str:
    """The shell line sent for `argv`: every argument quoted."""
    return PRELUDE + shlex.join(argv)


def _collect(chan: paramiko.Channel, timeout: float,
             cap: int = OUTPUT_CAP) -> tuple[int, bytes, bytes]:
    """Read stdout and stderr until the command exits; _Timeout at `timeout`, _TooMuch past `cap`."""
    deadline = time.monotonic() + timeout
    settle: float | None = None  # when the exit status came, plus EOF_GRACE
    out, err = bytearray(), bytearray()
    while True:
        if len(out) > cap or len(err) > cap:
            chan.close()
            raise _TooMuch
        if chan.recv_ready():
            out += chan.recv(65536)
        elif chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        elif chan.exit_status_ready() and (chan.eof_received or chan.closed or _past(settle)):
            # sshd sends the exit status when it reaps the command, which can be before it has
            # forwarded the last of the command's output: EOF says the output is complete (a
            # daemon the command left holding its stdout gets EOF_GRACE, then is not waited for).
            # Output that landed between the checks above and this one is buffered: read it all.
            while chan.recv_ready():
                out += chan.recv(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            if len(out) > cap or len(err) > cap:
                chan.close()
                raise _TooMuch
            return chan.recv_exit_status(), bytes(out), bytes(err)
        else:
            if settle is None and chan.exit_status_ready():
                settle = time.monotonic() + EOF_GRACE
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                chan.close()
                raise _Timeout
            # The channel's fd wakes on stdout data and close; stderr is polled.
            select.select([chan], [], [], min(remaining, 0.05))


# A log's new bytes, read on the host: SFTP tells no inode, so the file is opened once as
# stdin, its identity and size taken from that open file (stat -L /dev/stdin), and only the
# bytes from the mark to that size are sent (tail -c +N seeks, head -c stops). Exit 10-12:
# missing, not a regular file (its mode on stderr), unreadable. Arguments: PATH IDENT OFFSET LIMIT.
LOG_READ = r"""
[ -e "$1" ] || exit 10
[ -f "$1" ] || { stat -L -c %f -- "$1" >&2; exit 11; }
[ -r "$1" ] || exit 12
want=$2 off=$3 lim=$4
send() {
  set -- $(stat -L -c '%d:%i %s' /dev/stdin) || exit 13
  start=0
  if [ "$1" = "$want" ] && [ "$off" -le "$2" ]; then start=$off; fi
  if [ $(($2 - start)) -gt "$lim" ]; then start=$(($2 - lim)); fi
  echo "$1 $2 $start"
  tail -c +$((start + 1)) | head -c $(($2 - start))
}
send < "$1"
"""
HEADER_MAX = 128  # "device:inode size start\n"


def _log_error(path: str, rc: int, err: bytes) -> OSError:
    """The OSError a local read would raise, from LOG_READ's exit status and output."""
    if rc == 10:
        return FileNotFoundError(errno.ENOENT, "No such file", path)
    if rc == 11:
        try:
            refuse_irregular(path, int(err.split()[0], 16))
        except (OSError, ValueError, IndexError) as exc:
            return exc if isinstance(exc, OSError) else OSError(errno.EINVAL, "not a regular file", path)
    if rc == 12 or b"Permission denied" in err:
        return PermissionError(errno.EACCES, "Permission denied", path)
    why = err.decode(errors="replace").strip().splitlines()
    return OSError(errno.EIO, (why[-1] if why else f"exit {rc}")[:200], path)


class SshTransport:
    """One SSH connection to a host, opened on first use."""

    def __init__(self, host: str, *, port: int = 22, user: str = "root",
                 known_hosts: Path, identity_file: Path | None = None,
                 connect_timeout: float = 10.0, command_timeout: float = 60.0) -> None:
        self.host, self.port, self.user = host, port, user
        self.known_hosts, self.identity_file = known_hosts, identity_file
        self.connect_timeout, self.command_timeout = connect_timeout, command_timeout
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None

    @property
    def name(self) -> str:
        """`user@host:port`, for messages."""
        return f"{self.user}@{self.host}:{self.port}"

    def _connect(self) -> paramiko.SSHClient:
        known = load_known_hosts(self.known_hosts)
        client = paramiko.SSHClient()
        known.install(client)
        client.set_missing_host_key_policy(RefuseUnknown(self.host, self.port, known))
        t = self.connect_timeout
        try:
            client.connect(
                self.host, port=self.port, username=self.user,
                key_filename=str(self.identity_file) if self.identity_file else None,
                allow_agent=True, look_for_keys=self.identity_file is None,
                timeout=t, banner_timeout=t, auth_timeout=t, channel_timeout=t)
        except HostKeyError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            if exc.key.asbytes() in known.revoked:
                raise revoked_key(self.host, self.port, exc.key, known) from None
            raise changed_key(self.host, self.port, exc.key, exc.expected_key, self.known_hosts) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise RemoteError(f"{self.name}: login refused ({exc}); check identity_file, "
                              "the SSH agent and the host's authorized_keys") from None
        except (OSError, *DROPPED) as exc:
            client.close()
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise RemoteError(f"cannot connect to {self.name}: {why}") from None
        return client

    def _retrying(self, what: str, op: Callable[[paramiko.SSHClient], T]) -> T:
        for attempt in (1, 2):
            if self._client is None:
                self._client = self._connect()
            try:
                return op(self._client)
            except DROPPED as exc:
                self.close()
                if attempt == 2:
                    raise RemoteError(f"{self.name}: connection dropped twice during {what}: "
                                      f"{exc or type(exc).__name__}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> Result:
        """Run `argv` on the host (arguments shell-quoted); a timeout is a RemoteError."""
        limit = timeout or self.command_timeout

        def op(client: paramiko.SSHClient) -> Result:
            transport = client.get_transport()
            if transport is None or not transport.is_active():
                raise EOFError("connection closed")
            chan = transport.open_session(timeout=self.connect_timeout)
            chan.exec_command(remote_command(argv))
            rc, out, err = _collect(chan, limit)
            chan.close()
            return Result(tuple(argv), rc, out.decode(errors="replace"), err.decode(errors="replace"))

        try:
            return self._retrying(argv[0], op)
        except _Timeout:
            raise RemoteError(f"{self.name}: `{shlex.join(argv)}` timed out after {limit:g} s") from None
        except _TooMuch:
            raise RemoteError(f"{self.name}: `{shlex.join(argv)}` printed more than "
                              f"{OUTPUT_CAP // (1024 * 1024)} MiB; output dropped") from None

    def write_file(self, path: str, content: Content, mode: int) -> None:
        """Upload over SFTP into a new file (O_EXCL: never through a link planted at `path`).

        A leftover at `path` (an older staged copy, or a planted link) is
        removed first, the link itself, not what it points to.

        The mode is set on the open handle while the file is still empty. The
        caller checks the uploaded bytes (sha256sum on the host): pipelined
        writes report a failure late, or not at all if it comes at close.
        """
        def op(client: paramiko.SSHClient) -> None:
            sftp = self._sftp_of(client)
            with contextlib.suppress(FileNotFoundError):
                sftp.remove(path)
            with sftp.open(path, "wxb") as fh:  # x: O_EXCL
                fh.chmod(mode)
                fh.set_pipelined(True)  # don't wait for each chunk's ack
                copy_into(fh, content)
                fh.flush()

        try:
            self._retrying(f"upload of {path}", op)
        except OSError as exc:
            raise RemoteError(f"{self.name}: cannot write {path}: {exc}") from None

    def _sftp_of(self, client: paramiko.SSHClient) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = client.open_sftp()
            self._sftp.get_channel().settimeout(self.command_timeout)  # type: ignore[union-attr]
        return self._sftp

    def read_tail(self, path: str, limit: int) -> bytes:
        """The end of a file on the host, read over SFTP (Transport.read_tail).

        Only the tail crosses the link: the file is opened, its size taken from
        the open handle, and at most `limit` bytes read from there. Only a
        regular file is opened: the SFTP server would block on a FIFO.
        """
        def op(client: paramiko.SSHClient) -> bytes:
            sftp = self._sftp_of(client)
            refuse_irregular(path, sftp.stat(path).st_mode)
            with sftp.open(path, "rb") as fh:
                return tail_of(fh, fh.stat().st_size or 0, limit)

        return self._retrying(f"read of {path}", op)

    @contextlib.contextmanager
    def open_log(self, path: str, since: Mark | None, limit: int) -> Iterator[tuple[Span, Iterator[bytes]]]:
        """The new bytes of a log on the host (Transport.open_log): only they cross the link.

        One command (LOG_READ) opens the file, says its identity and size,
        and sends the bytes from the mark (or the last `limit`); a silence of
        command_timeout is a RemoteError, as is a link that drops mid-way.
        """
        argv = ["sh", "-c", LOG_READ, "upi-log", path, since.ident if since else "-",
                str(since.offset if since else 0), str(limit)]

        def start(client: paramiko.SSHClient) -> paramiko.Channel:
            transport = client.get_transport()
            if transport is None or not transport.is_active():
                raise EOFError("connection closed")
            chan = transport.open_session(timeout=self.connect_timeout)
            chan.settimeout(self.command_timeout)
            chan.exec_command(remote_command(argv))
            return chan

        chan = self._retrying(f"read of {path}", start)
        try:
            head = self._log_header(chan, path)
            span = Span(head[0], head[2], head[1])
            yield span, self._log_chunks(chan, path, span.end - span.start)
        except (OSError, *DROPPED) as exc:
            if isinstance(exc, OSError) and exc.filename == path:
                raise
            raise RemoteError(f"{self.name}: read of {path} failed: {exc or type(exc).__name__}") from None
        finally:
            chan.close()

    def _log_header(self, chan: paramiko.Channel, path: str) -> tuple[str, int, int]:
        """LOG_READ's first line (identity, size, start), or the OSError its exit status means."""
        head = b""
        while b"\n" not in head and len(head) < HEADER_MAX:
            data = chan.recv(1)
            if not data:
                break
            head += data
        if not head.endswith(b"\n"):
            # A host that says no header may still not exit: the status is waited for as long
            # as a silence may last, and its stderr read up to 4 KiB.
            rc = chan.recv_exit_status() if chan.status_event.wait(self.command_timeout) else -1
            err = b""
            while len(err) < 4096 and (data := chan.recv_stderr(4096 - len(err))):
                err += data
            raise _log_error(path, rc, err)
        try:
            ident, size, begin = head.decode(errors="replace").split()
            return ident, int(size), int(begin)
        except ValueError:
            raise OSError(errno.EIO, "the host's answer is no log read's", path) from None

    @staticmethod
    def _log_chunks(chan: paramiko.Channel, path: str, count: int) -> Iterator[bytes]:
        while count > 0:
            data = chan.recv(min(CHUNK, count))
            if not data:
                raise EOFError(f"{path}: the host sent {count} bytes fewer than it said")
            count -= len(data)
            yield data

    def close(self) -> None:
        """Close the SFTP session and the connection."""
        if self._sftp is not None:
            self._sftp.close()
        if self._client is not None:
            self._client.close()
        self._sftp = self._client = None
