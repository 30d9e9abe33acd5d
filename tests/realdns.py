"""Real dnsmasq answering DNS on a loopback port: the one helper every DNS test uses."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dns.exception
import dns.message
import dns.query
from conftest import require

LOOPBACK = "127.0.0.1"
TRIES = 5


def dns_port() -> int:
    """A loopback port free for UDP *and* TCP: dnsmasq binds both."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind((LOOPBACK, 0))
            port = int(udp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind((LOOPBACK, port))
                except OSError:
                    continue
                return port


def _answers(port: int) -> bool:
    try:
        dns.query.udp(dns.message.make_query("probe.invalid", "A"), LOOPBACK, port=port, timeout=0.2)
    except dns.exception.Timeout:
        return False
    return True


def _start(conf: Path, port: int) -> subprocess.Popen[bytes]:
    # dns.conf names no addresses (dhcp-pxe.conf binds both files to the provisioner's
    # interface; tests/test_dnsmasq_coexist.py runs the two together): alone it runs as
    # rendered, only on a free port, not 53.
    return subprocess.Popen(
        [require("dnsmasq"), "--keep-in-foreground", f"--port={port}",
         f"--conf-file={conf}", "--pid-file=", "--log-facility=-"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@contextlib.contextmanager
def serve_dns(conf: Path) -> Iterator[int]:
    """Run dnsmasq on `conf` until the block ends; yields the port it answers on.

    A port can be taken between choosing it and dnsmasq binding it (other
    tests run servers too): that start is retried on another port.
    """
    for _ in range(TRIES):
        port = dns_port()
        proc = _start(conf, port)
        end = time.monotonic() + 10
        while proc.poll() is None and not _answers(port):
            assert time.monotonic() < end, "dnsmasq did not answer within 10 s"
        if proc.poll() is None:
            break
        err = proc.stderr.read().decode() if proc.stderr else ""
        if "Address already in use" not in err:
            raise AssertionError(f"dnsmasq exited {proc.returncode}: {err}")
    else:
        raise AssertionError(f"dnsmasq found no free port in {TRIES} tries")
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(5)
