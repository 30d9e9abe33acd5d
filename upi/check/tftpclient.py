"""A small TFTP client (RFC 1350 reads, with RFC 2347/2348 blksize): what pxelinux and GRUB do.

Every wait has a timeout and a bounded number of retransmissions, so a
server that is down or unreachable fails in seconds, never hangs. The data
goes to a callback block by block: a 100 MB initramfs is never in memory.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

RRQ, DATA, ACK, ERROR, OACK = 1, 3, 4, 5, 6
DEFAULT_BLKSIZE = 512
# Fits an Ethernet frame (1500 - IP - UDP - TFTP headers), as PXE firmware asks for.
BLKSIZE = 1468


class TftpError(Exception):
    """The transfer failed: a server error packet, a timeout or a protocol fault."""


def _packet_error(data: bytes) -> str:
    code = struct.unpack("!H", data[2:4])[0] if len(data) >= 4 else 0
    message = data[4:].split(b"\0", 1)[0].decode(errors="replace")
    return f"TFTP error {code}: {message or 'no message'}"


def _options(data: bytes) -> dict[str, str]:
    parts = data[2:].split(b"\0")
    return {parts[i].decode().lower(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2)}


@dataclass(frozen=True)
class _Step:
    """What one received packet means: the packet to send next, and progress."""

    reply: bytes
    size: int = 0
    advance: int = 0
    done: bool = False
    block_size: int = 0


def _handle(data: bytes, expected: int, block_size: int, sink: Callable[[bytes], None]) -> _Step:
    opcode = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 0
    if opcode == ERROR:
        raise TftpError(_packet_error(data))
    if opcode == OACK and expected == 1:
        return _Step(struct.pack("!HH", ACK, 0),
                     block_size=int(_options(data).get("blksize", DEFAULT_BLKSIZE)))
    if opcode != DATA or len(data) < 4:
        raise TftpError(f"unexpected TFTP packet (opcode {opcode})")
    block = struct.unpack("!H", data[2:4])[0]
    if block != expected & 0xFFFF:  # a duplicate of an earlier block: ACK the last one again
        return _Step(struct.pack("!HH", ACK, (expected - 1) & 0xFFFF))
    payload = data[4:]
    sink(payload)
    return _Step(struct.pack("!HH", ACK, block), len(payload), 1, len(payload) < block_size)


def tftp_get(host: str, port: int, filename: str, sink: Callable[[bytes], None], *,
             timeout: float = 2.0, retries: int = 3, blksize: int = BLKSIZE) -> int:
    """Read `filename` from `host:port` in octet mode, handing each block to `sink`; returns its size.

    Raises TftpError naming what went wrong (server message, timeout, bad packet).
    """
    try:  # a name is looked up once; one that does not resolve is a TftpError, not a traceback
        family, _, _, _, dest = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    except (OSError, UnicodeError) as exc:
        raise TftpError(f"cannot find the address of {host}: {getattr(exc, 'strerror', None) or exc}"
                        ) from None
    request = struct.pack("!H", RRQ) + filename.encode() + b"\0octet\0"
    if blksize != DEFAULT_BLKSIZE:
        request += f"blksize\0{blksize}\0".encode()
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        last = request
        peer: tuple[str, int] | None = None
        size, expected, block_size = 0, 1, DEFAULT_BLKSIZE
        tries = 0
        while True:
            try:
                sock.sendto(last, peer or dest)
                data, addr = sock.recvfrom(65536 + 4)
            except TimeoutError:
                tries += 1
                if tries > retries:
                    what = "no answer" if peer is None else f"no block {expected}"
                    raise TftpError(f"{what} within {timeout:g} s ({retries} retries)") from None
                continue
            except OSError as exc:  # ICMP port unreachable and the like
                raise TftpError(str(exc.strerror or exc)) from None
            if peer is None:
                peer = (addr[0], addr[1])  # the server's transfer port (its TID)
            elif (addr[0], addr[1]) != peer:
                continue  # a stray packet from another TID: ignore it (RFC 1350)
            tries = 0
            step = _handle(data, expected, block_size, sink)
            if step.block_size:
                block_size = step.block_size
            last = step.reply
            if step.done:
                sock.sendto(last, peer)  # the final ACK ends the transfer
                return size + step.size
            size += step.size
            expected += step.advance
