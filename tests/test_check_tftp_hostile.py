"""`upi check tftp` against a FAKE TFTP server that breaks the protocol on purpose.

Real serving is dnsmasq's job (tests/test_check_tftp.py); no real server
grants a block size of `abc`, sends blocks larger than agreed, repeats
block 1 forever or never ends a file, so a few lines of UDP code do. Every
row fails with its reason, in bounded time, never with a traceback.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from conftest import inventory_path

from upi.cli import app

LOOPBACK = "127.0.0.1"
DATA, ACK, ERROR, OACK = 3, 4, 5, 6
Behaviour = Callable[[socket.socket, tuple[str, int], threading.Event], None]


def _data(block: int, payload: bytes) -> bytes:
    return struct.pack("!HH", DATA, block & 0xFFFF) + payload


def oack(value: bytes) -> Behaviour:
    def run(sock, peer, stop):
        sock.sendto(struct.pack("!H", OACK) + b"blksize\0" + value + b"\0", peer)
        with contextlib.suppress(OSError):
            sock.recvfrom(100)
        sock.sendto(_data(1, b"x"), peer)
    return run


def raw(packet: bytes) -> Behaviour:
    return lambda sock, peer, stop: sock.sendto(packet, peer)


def oversized_block(sock, peer, stop) -> None:
    sock.sendto(_data(1, b"x" * 600), peer)  # no blksize was granted: 512 is the most


def endless(sock, peer, stop) -> None:
    block = 1
    while not stop.is_set():
        sock.sendto(_data(block, b"\0" * 512), peer)
        with contextlib.suppress(OSError):
            sock.recvfrom(100)
        block += 1


def duplicates(sock, peer, stop) -> None:
    while not stop.wait(0.05):
        sock.sendto(_data(1, b"\0" * 512), peer)  # block 1 again and again: never block 2


def crawl(sock, peer, stop) -> None:
    block = 1
    while not stop.wait(0.2):  # each block well inside the timeout, the file never near the end
        sock.sendto(_data(block, b"\0" * 512), peer)
        block += 1


def strays(sock, peer, stop) -> None:
    sock.sendto(_data(1, b"\0" * 512), peer)
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other.bind((LOOPBACK, 0))
    while not stop.wait(0.05):  # packets from another port: ignored, but they keep coming
        other.sendto(_data(2, b"\0" * 512), peer)
    other.close()


@contextlib.contextmanager
def fake_tftp(behaviour: Behaviour) -> Iterator[int]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind((LOOPBACK, 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def answer(peer: tuple[str, int]) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((LOOPBACK, 0))  # a transfer port of its own, as RFC 1350 says
            sock.settimeout(1)
            with contextlib.suppress(OSError):
                behaviour(sock, peer, stop)

    def serve() -> None:
        while not stop.is_set():
            try:
                _, peer = listener.recvfrom(1024)
            except OSError:
                continue
            threading.Thread(target=answer, args=(peer,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


CASES = {
    "blksize not a number": (oack(b"abc"), "the server granted blksize 'abc'"),
    "blksize zero": (oack(b"0"), "the server granted blksize '0'"),
    "blksize above the ask": (oack(b"65464"), "asked for at most 1468"),
    "blksize not ascii": (oack(b"\xff\xfe"), "the server granted blksize"),
    # RFC 2348: digits; `0512` read as 512 would pass the range check, `00008` as 8.
    "blksize with a leading zero": (oack(b"0512"), "the server granted blksize '0512'"),
    "blksize of leading zeros": (oack(b"00008"), "the server granted blksize '00008'"),
    "blksize in superscript digits": (oack("\u00b9\u00b2".encode()), "the server granted blksize"),
    "blksize of 5,000 digits": (oack(b"1" * 5000), "the server granted blksize '11111"),
    "error with junk": (raw(struct.pack("!HH", ERROR, 1) + b"\xff\x1b[2J\0"), "TFTP error 1: "),
    "one byte": (raw(b"\x00"), "unexpected TFTP packet (opcode 0)"),
    "unknown opcode": (raw(b"\x00\x09abc"), "unexpected TFTP packet (opcode 9)"),
    "short data": (raw(b"\x00\x03\x00"), "unexpected TFTP packet (opcode 3)"),
    "block larger than agreed": (oversized_block, "block 1 holds 600 bytes; the block size is 512"),
    "endless file": (endless, "the server does not end the file"),
    "block 1 forever": (duplicates, "slower than 64 KiB/s"),
    "crawling": (crawl, "slower than 64 KiB/s"),
    "stray packets forever": (strays, "slower than 64 KiB/s"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES)
def test_a_server_breaking_the_protocol_fails_each_file_in_bounded_time(runner, monkeypatch,
                                                                        case) -> None:
    import upi.check.tftpclient as client

    monkeypatch.setattr(client, "MAX_BYTES", 64 * 1024)
    monkeypatch.setattr(client, "RATE_GRACE", 1.0)
    behaviour, message = CASES[case]
    with fake_tftp(behaviour) as port:
        result = runner.invoke(app, ["check", "tftp", str(inventory_path("dgxpod")), "--server",
                                     LOOPBACK, "--port", str(port), "--timeout", "0.5",
                                     "--retries", "1", "--json"])
    assert "Traceback" not in result.output
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)["checks"]
    assert rows and all(r["verdict"] == "fail" for r in rows)
    assert all(message in r["got"] for r in rows), {r["got"] for r in rows}
    assert "\x1b" not in result.stdout
