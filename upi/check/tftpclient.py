"""A small TFTP client (RFC 1350 reads, with RFC 2347/2348 blksize): what pxelinux and GRUB do.

Every wait has a timeout and a bounded number of retransmissions, so a
server that is down or unreachable fails in seconds, never hangs. The data
goes to a callback block by block: a 100 MB initramfs is never in memory.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from upi.check.reach import miss
from upi.digits import natural

RRQ, DATA, ACK, ERROR, OACK = 1, 3, 4, 5, 6
DEFAULT_BLKSIZE = 512
# Fits an Ethernet frame (1500 - IP - UDP - TFTP headers), as PXE firmware asks for.
BLKSIZE = 1468
MAX_BYTES = 2 * 1024**3  # an RHCOS initramfs is ~100 MiB; a file that never ends is cut here
MIN_RATE = 64 * 1024  # bytes/s over the whole transfer, judged after RATE_GRACE seconds
RATE_GRACE = 10.0


class TftpError(Exception):
    """The transfer failed: a server error packet, a timeout or a protocol fault.

    `cause` is set when the server was not reached at all (`upi.check.reach.Cause`).
    """

    def __init__(self, message: str, cause: str = "") -> None:
        super().__init__(message)
        self.cause = cause


def _packet_error(data: bytes) -> str:
    code = struct.unpack("!H", data[2:4])[0] if len(data) >= 4 else 0
    message = data[4:].split(b"\0", 1)[0].decode(errors="replace")
    return f"TFTP error {code}: {message or 'no message'}"


def _options(data: bytes) -> dict[str, str]:
    parts = data[2:].split(b"\0")
    return {parts[i].decode("ascii", "replace").lower(): parts[i + 1].decode("ascii", "replace")
            for i in range(0, len(parts) - 1, 2)}


def _blksize(data: bytes, asked: int) -> int:
    """The block size an OACK grants: 8 to what was asked (RFC 2348), else a TftpError."""
    value = _options(data).get("blksize", str(DEFAULT_BLKSIZE))
    size = natural(value)  # RFC 2348 says digits: `0512` or `00008` is not a block size
    if size is None or not 8 <= size <= asked:
        raise TftpError(f"the server granted blksize {value[:20]!r}; asked for at most {asked}")
    return size


@dataclass(frozen=True)
class _Step:
    """What one received packet means: the packet to send next, and progress."""

    reply: bytes
    size: int = 0
    advance: int = 0
    done: bool = False
    block_size: int = 0


def _handle(data: bytes, expected: int, block_size: int, sink: Callable[[bytes], None],
            asked: int = BLKSIZE) -> _Step:
    opcode = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 0
    if opcode == ERROR:
        raise TftpError(_packet_error(data))
    if opcode == OACK and expected == 1:
        return _Step(struct.pack("!HH", ACK, 0), block_size=_blksize(data, asked))
    if opcode != DATA or len(data) < 4:
        raise TftpError(f"unexpected TFTP packet (opcode {opcode})")
    block = struct.unpack("!H", data[2:4])[0]
    if block != expected & 0xFFFF:  # a duplicate of an earlier block: ACK the last one again
        return _Step(struct.pack("!HH", ACK, (expected - 1) & 0xFFFF))
    payload = data[4:]
    if len(payload) > block_size:
        raise TftpError(f"block {block} holds {len(payload)} bytes; the block size is {block_size}")
    sink(payload)
    return _Step(struct.pack("!HH", ACK, block), len(payload), 1, len(payload) < block_size)


def _pace(size: int, start: float, max_bytes: int) -> None:
    """Refuse a transfer that never ends or crawls: each block in time is not enough."""
    if size > max_bytes:
        raise TftpError(f"more than {max_bytes:,} bytes: the server does not end the file")
    elapsed = time.monotonic() - start
    if elapsed > RATE_GRACE and size / elapsed < MIN_RATE:
        raise TftpError(f"{size:,} bytes in {elapsed:.0f} s: slower than {MIN_RATE // 1024} KiB/s "
                        "(a server that stalls between blocks)")


# Linux <linux/in.h> IP_RECVERR, <linux/in6.h> IPV6_RECVERR (the socket module lacks them).
_RECVERR: dict[int, tuple[int, int]] = {socket.AF_INET: (socket.IPPROTO_IP, 11),
                                      socket.AF_INET6: (socket.IPPROTO_IPV6, 25)}


def _report_icmp(sock: socket.socket, family: int) -> None:
    """Have an ICMP error (port unreachable: nothing listens) end the wait at once.

    The server answers from a new port (its TID), so the socket cannot be
    connected, and an unconnected UDP socket drops ICMP errors unless
    IP_RECVERR is set (Linux udp(7)); elsewhere the wait times out as before.
    """
    level_opt = _RECVERR.get(family)
    if level_opt and sys.platform == "linux":
        with contextlib.suppress(OSError):
            sock.setsockopt(level_opt[0], level_opt[1], 1)


def tftp_get(host: str, port: int, filename: str, sink: Callable[[bytes], None], *,
             timeout: float = 2.0, retries: int = 3, blksize: int = BLKSIZE,
             max_bytes: int | None = None) -> int:
    """Read `filename` from `host:port` in octet mode, handing each block to `sink`; returns its size.

    Raises TftpError naming what went wrong (server message, timeout, bad packet,
    a file past `max_bytes`, a transfer slower than MIN_RATE after RATE_GRACE).
    """
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    try:  # a name is looked up once; one that does not resolve is a TftpError, not a traceback
        family, _, _, _, dest = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    except (OSError, UnicodeError) as exc:
        why = miss(exc)
        raise TftpError(why.text, why.cause) from None
    request = struct.pack("!H", RRQ) + filename.encode() + b"\0octet\0"
    if blksize != DEFAULT_BLKSIZE:
        request += f"blksize\0{blksize}\0".encode()
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        _report_icmp(sock, family)
        last = request
        peer: tuple[str, int] | None = None
        size, expected, block_size = 0, 1, DEFAULT_BLKSIZE
        tries = 0
        start = time.monotonic()
        while True:
            try:
                sock.sendto(last, peer or dest)
                data, addr = sock.recvfrom(65536 + 4)
            except TimeoutError:
                tries += 1
                if tries > retries:
                    what = "no answer" if peer is None else f"no block {expected}"
                    raise TftpError(f"{what} within {timeout:g} s ({retries} retries)",
                                    "timeout" if peer is None else "") from None
                continue
            except OSError as exc:  # ICMP port unreachable, no route and the like
                why = miss(exc)
                raise TftpError(why.text, why.cause) from None
            _pace(size, start, max_bytes)  # stray and duplicate packets count against the time too
            if peer is None:
                peer = (addr[0], addr[1])  # the server's transfer port (its TID)
            elif (addr[0], addr[1]) != peer:
                continue  # a stray packet from another TID: ignore it (RFC 1350)
            tries = 0
            step = _handle(data, expected, block_size, sink, blksize)
            if step.block_size:
                block_size = step.block_size
            last = step.reply
            if step.done:
                sock.sendto(last, peer)  # the final ACK ends the transfer
                return size + step.size
            size += step.size
            expected += step.advance
