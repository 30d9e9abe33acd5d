"""`upi status` follows its logs (issue 29): a later look reads only what was appended since.

Each log's identity (device, inode) and offset are kept between looks: a
look after an append reads the appended bytes only, here or over SSH (a
real sshd; the bytes crossing the connection are counted by a relay in
front of it); a rotated log (another file at the path) or a truncated one
is read anew; a partial last line waits for its end; more appended than
the limit reads the last `limit` bytes and keeps what was learnt. What is
kept between looks gives the table every event of the log gives.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path
from pushkit import Sshd
from relay import Relay

import upi.status.look as status_cmd
from upi.inventory import load_inventory
from upi.remote import LocalTransport
from upi.remote.base import Mark, Span
from upi.status.follow import Follower
from upi.status.logs import access_events, dnsmasq_events
from upi.status.look import Looker, sources
from upi.status.stages import Cluster, build_rows

W0_MAC, W0_IP = "b8:ce:f6:10:33:44", "10.33.3.44"
W1_MAC, W1_IP = "b8:ce:f6:10:33:46", "10.33.3.46"
FILLER = "Nov 27 08:00:00 dnsmasq[4242]: query[A] registry.example.com from 10.33.3.99\n"


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _stamp(ago: float = 0) -> str:
    return (datetime.now().astimezone() - timedelta(seconds=ago)).strftime("%b %e %H:%M:%S")


def _ack(mac: str, ip: str, name: str, ago: float = 0) -> str:
    return f"{_stamp(ago)} dnsmasq-dhcp[4242]: 3918279 DHCPACK(br0) {ip} {mac} {name}\n"


class _Counted(LocalTransport):
    """The real local transport, counting the bytes each read of a log returns."""

    read = 0

    def read_tail(self, path: str, limit: int) -> bytes:
        data = super().read_tail(path, limit)
        _Counted.read += len(data)
        return data

    @contextlib.contextmanager
    def open_log(self, path: str, since: Mark | None, limit: int) -> Iterator[tuple[Span, Iterator[bytes]]]:
        with super().open_log(path, since, limit) as (span, chunks):
            yield span, self._count(chunks)

    @staticmethod
    def _count(chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            _Counted.read += len(chunk)
            yield chunk


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[_Counted]:
    monkeypatch.setattr(status_cmd, "LocalTransport", _Counted)
    _Counted.read = 0
    return _Counted


def _looker(log: Path) -> Looker:
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    src = sources(inv, dnsmasq_log=log, access_log=Path(os.devnull), out=None, assets=None, kubeconfig=None)
    return Looker(inv, src)


def _stage(looker: Looker, node: str, stage: str = "dhcp") -> bool:
    row = next(r for r in looker.look().rows if r.name == node)
    return stage in row.stages


def test_a_later_look_reads_only_what_was_appended(tmp_path: Path, counted: type[_Counted]) -> None:
    log = tmp_path / "dnsmasq.log"
    log.write_text(FILLER * 20_000 + _ack(W0_MAC, W0_IP, "worker-0"))
    with _looker(log) as looker:
        assert _stage(looker, "worker-0") and not _stage(looker, "worker-1")
        counted.read = 0
        appended = _ack(W1_MAC, W1_IP, "worker-1")
        with log.open("a") as fh:
            fh.write(appended)
        assert _stage(looker, "worker-1") and _stage(looker, "worker-0")
        assert counted.read == len(appended)  # not the 1.6 MB before it
        counted.read = 0
        assert _stage(looker, "worker-1")
        assert counted.read == 0  # nothing new, nothing read


def test_a_rotated_log_is_read_anew(tmp_path: Path, counted: type[_Counted]) -> None:
    """logrotate's rename and a new file: another inode at the path, longer than the old offset."""
    log = tmp_path / "dnsmasq.log"
    log.write_text(FILLER * 10 + _ack(W0_MAC, W0_IP, "worker-0"))
    with _looker(log) as looker:
        assert _stage(looker, "worker-0")
        log.rename(tmp_path / "dnsmasq.log.1")
        log.write_text(_ack(W1_MAC, W1_IP, "worker-1") + FILLER * 20)
        counted.read = 0
        assert _stage(looker, "worker-1")  # its line is before the old offset: read from the start
        assert counted.read == log.stat().st_size
        assert not _stage(looker, "worker-0")  # as before: only the file at the path is read


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path, counted: type[_Counted]) -> None:
    """logrotate's copytruncate: the same inode, shorter than the offset read to."""
    log = tmp_path / "dnsmasq.log"
    log.write_text(FILLER * 10 + _ack(W0_MAC, W0_IP, "worker-0"))
    with _looker(log) as looker:
        assert _stage(looker, "worker-0")
        ino = log.stat().st_ino
        with log.open("r+") as fh:
            fh.truncate(0)
            fh.write(_ack(W1_MAC, W1_IP, "worker-1"))
        assert log.stat().st_ino == ino
        assert _stage(looker, "worker-1") and not _stage(looker, "worker-0")


def test_a_partial_last_line_waits_for_its_end(tmp_path: Path, counted: type[_Counted]) -> None:
    log = tmp_path / "dnsmasq.log"
    line = _ack(W1_MAC, W1_IP, "worker-1")
    cut = line.index(W1_MAC) + 8  # within the MAC: no event yet
    log.write_text(FILLER + line[:cut])
    with _looker(log) as looker:
        assert not _stage(looker, "worker-1")
        with log.open("a") as fh:
            fh.write(line[cut:])
        assert _stage(looker, "worker-1")
        follower = looker.followers["dnsmasq"]
        assert follower.pending == b"" and len(follower.digest.events) == 1


def test_a_last_line_without_a_newline_is_read(tmp_path: Path, counted: type[_Counted]) -> None:
    """A copy of a log whose last line has no newline: its event counts, and is not counted twice."""
    log = tmp_path / "dnsmasq.log"
    log.write_text(_ack(W0_MAC, W0_IP, "worker-0").rstrip("\n"))
    with _looker(log) as looker:
        assert _stage(looker, "worker-0")
        with log.open("a") as fh:
            fh.write("\n" + _ack(W1_MAC, W1_IP, "worker-1"))
        assert _stage(looker, "worker-0") and _stage(looker, "worker-1")
        assert len(looker.followers["dnsmasq"].digest.events) == 2


def test_more_appended_than_the_limit_reads_the_last_limit_and_keeps_what_was_learnt(tmp_path: Path) -> None:
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    log = tmp_path / "dnsmasq.log"
    log.write_text(_ack(W0_MAC, W0_IP, "worker-0", ago=60))
    follower = Follower(inv, "dnsmasq", str(log), limit=4096)
    now = datetime.now().astimezone()
    assert [e.mac for e in follower.look(LocalTransport(), now)] == [W0_MAC]
    with log.open("a") as fh:
        fh.write(FILLER * 1000 + _ack(W1_MAC, W1_IP, "worker-1"))
    assert [e.mac for e in follower.look(LocalTransport(), now)] == [W0_MAC, W1_MAC]
    assert follower.mark is not None and follower.mark.offset == log.stat().st_size


def test_a_line_longer_than_the_limit_is_dropped_not_kept_across_looks(tmp_path: Path) -> None:
    """A log that grows without newlines (garbage) costs no more memory look after look."""
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    log = tmp_path / "dnsmasq.log"
    log.write_text(_ack(W0_MAC, W0_IP, "worker-0"))
    follower = Follower(inv, "dnsmasq", str(log), limit=4096)
    now = datetime.now().astimezone()
    for _ in range(5):
        with log.open("a") as fh:
            fh.write("x" * 3000)
        assert [e.mac for e in follower.look(LocalTransport(), now)] == [W0_MAC]
        assert len(follower.pending) <= 4096
    with log.open("a") as fh:  # the end of the garbage line, then a real one
        fh.write("y" * 100 + _ack(W0_MAC, W0_IP, "worker-0").replace("DHCPACK", "DHCPNAK") + "\n"
                 + _ack(W1_MAC, W1_IP, "worker-1"))
    assert [e.mac for e in follower.look(LocalTransport(), now)] == [W0_MAC, W1_MAC]


# --- over SSH: a relay in front of a real sshd counts what crosses the connection ------------


def _ssh_looker(example_dir: Path, tmp_path: Path, sshd: Sshd, port: int, log: Path) -> Looker:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {sshd.host_pub}\n")
    path = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["provisioner"].update(dnsmasq_log=str(log), http_access_log=None,
                              ssh={"host": "127.0.0.1", "port": port, "user": "root",
                                   "known_hosts": str(known), "identity_file": str(sshd.client_key)})
    path.write_text(yaml.safe_dump(doc))
    inv = load_inventory(path, check_files=False)
    return Looker(inv, sources(inv, dnsmasq_log=None, access_log=None, out=None, assets=None,
                               kubeconfig=None))


def test_over_ssh_only_the_appended_bytes_cross_the_connection(example_dir: Path, tmp_path: Path,
                                                               sshd: Sshd) -> None:
    log = tmp_path / "dnsmasq.log"
    log.write_text(FILLER * 40_000 + _ack(W0_MAC, W0_IP, "worker-0"))  # 3.2 MB
    relay = Relay(sshd.port)
    try:
        with _ssh_looker(example_dir, tmp_path, sshd, relay.port, log) as looker:
            assert _stage(looker, "worker-0")
            assert relay.down > log.stat().st_size  # the first look: the whole log (it is under 64 MiB)
            before = relay.down
            appended = _ack(W1_MAC, W1_IP, "worker-1") * 100  # 8 KB
            with log.open("a") as fh:
                fh.write(appended)
            assert _stage(looker, "worker-1")
            # The appended bytes and the SSH session's own: a channel, the command, its header line.
            assert len(appended) < relay.down - before < len(appended) + 16_384
            before = relay.down
            assert _stage(looker, "worker-1")
            assert relay.down - before < 16_384  # nothing new: no log bytes at all
            # Rotated on the host: another inode, read anew.
            log.rename(tmp_path / "dnsmasq.log.1")
            log.write_text(FILLER * 100 + _ack(W0_MAC, W0_IP, "worker-0"))
            assert _stage(looker, "worker-0") and not _stage(looker, "worker-1")
            log.unlink()
            snap = looker.look()
            assert snap.unread == [f"{looker.provisioner.name}:{log}: No such file"]
            log.mkdir()  # as the SFTP read said it
            snap = looker.look()
            assert snap.unread == [f"{looker.provisioner.name}:{log}: a directory, not a regular file"]
            log.rmdir()
            log.write_text(_ack(W1_MAC, W1_IP, "worker-1"))  # back: read anew
            assert _stage(looker, "worker-1") and not _stage(looker, "worker-0")
    finally:
        relay.close()


# --- what is kept gives the table every event gives ------------------------------------------


def _random_logs(rng: random.Random, odd: bool) -> tuple[str, str]:
    """dnsmasq and access log lines for dgxpod's nodes, strangers and others, repeated, out of order."""
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    now = datetime.now().astimezone()
    nodes = [(n.name, n.mac, str(n.ip)) for n in inv.nodes] + [
        ("stranger", "00:25:90:aa:bb:cc", "10.33.3.99"), ("other", "00:25:90:aa:bb:cd", "192.0.2.7")]
    rootfs = inv.rhcos.rootfs
    dns, acc = [], []
    for _ in range(3000):
        name, mac, ip = rng.choice(nodes)
        when = now - timedelta(seconds=rng.randrange(7200))
        stamp = when.strftime("%b %e %H:%M:%S")
        dns.append(rng.choice([
            f"{stamp} dnsmasq-dhcp[7]: {rng.randrange(99)} DHCPACK(br0) {ip} {mac} {name}\n",
            f"{stamp} dnsmasq-dhcp[7]: {rng.randrange(99)} DHCPDISCOVER(br0) {mac} no address available\n",
            f"{stamp} dnsmasq-dhcp[7]: {rng.randrange(99)} DHCPDISCOVER(br0) {mac} \n",
            f"{stamp} dnsmasq-tftp[7]: sent /tftp/grub.cfg-01-{mac.replace(':', '-')} to {ip}\n",
            f"{stamp} dnsmasq-tftp[7]: sent /tftp/{inv.rhcos.kernel} to {ip}\n",
            f"{stamp} dnsmasq-tftp[7]: sent /tftp/{inv.rhcos.initramfs} to {ip}\n",
            f"{stamp} dnsmasq-tftp[7]: file /tftp/grubx64.efi not found for {ip}\n",
            f"{stamp} dnsmasq[7]: query[A] api.example.com from {ip}\n"]))
        clf = when.strftime("%d/%b/%Y:%H:%M:%S %z")
        path = rng.choice([f"/{rootfs}", "/ignition/worker.ign", "/ignition/master.ign", "/repo/x.rpm",
                           "/ignition/missing.ign"])
        size = rng.choice([9, 1000, 4096])
        acc.append(f'{rng.choice(["", "::ffff:"])}{ip} - - [{clf}] "{rng.choice(["GET", "GET", "HEAD"])} '
                   f'{path} HTTP/1.1" {rng.choice([200, 200, 404, 403, 206, 500])} {size} "-" "curl"\n')
        if odd and rng.random() < 0.01:  # what str.splitlines() breaks at besides newlines, non-ASCII
            odd = rng.choice(["\r", "\x0c", "\x1e", "\u2028", "\x85", "caf\u00e9 "])
            dns.append(odd + dns[-1])
            acc.append(odd + acc[-1])
    # Strangers seen first (or only) fetching something else: their first line is no stage file's.
    clf = now.strftime("%d/%b/%Y:%H:%M:%S %z")
    acc[1:1] = [f'10.33.3.99 - - [{clf}] "GET /repo/x.rpm HTTP/1.1" 200 5 "-" "dnf"\n',
                f'::ffff:10.33.3.98 - - [{clf}] "GET /index.html HTTP/1.1" 200 5 "-" "curl"\n']
    return "".join(dns), "".join(acc)


def _table(inv, events) -> tuple[object, object]:  # noqa: ANN001 - a test's shorthand
    now = datetime.now().astimezone()
    rows, strangers = build_rows(inv, events, installed={}, cluster=Cluster(), now=now, threshold=1e9)
    return [(r.name, r.stages, r.notes, r.current, r.since) for r in rows], strangers


@pytest.mark.parametrize(("seed", "odd"), [(1, False), (2, False), (3, True), (4, True)])
def test_what_is_kept_gives_the_table_of_every_event_read_at_once_or_in_pieces(tmp_path: Path, seed: int,
                                                                              odd: bool) -> None:
    """Plain chunks take the quick way; a chunk with an odd line break or non-ASCII the exact one."""
    rng = random.Random(seed)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    dns, acc = _random_logs(rng, odd)
    now = datetime.now().astimezone()
    every = {"dnsmasq": list(dnsmasq_events(dns.splitlines(), now)),
             "access": list(access_events(acc.splitlines()))}
    logs = {"dnsmasq": tmp_path / "dnsmasq.log", "access": tmp_path / "access.log"}
    followers = {kind: Follower(inv, kind, str(path)) for kind, path in logs.items()}  # type: ignore[arg-type]
    for path in logs.values():
        path.write_bytes(b"")
    text = {"dnsmasq": dns.encode(), "access": acc.encode()}
    done = dict.fromkeys(logs, 0)
    while any(done[k] < len(text[k]) for k in logs):  # appended in random pieces, a look after each
        for kind, path in logs.items():
            piece = text[kind][done[kind]:done[kind] + rng.randrange(1, 20_000)]
            with path.open("ab") as fh:
                fh.write(piece)
            done[kind] += len(piece)
            followers[kind].look(LocalTransport(), now)
    kept = {kind: follower.look(LocalTransport(), now) for kind, follower in followers.items()}
    for kind in logs:  # each log alone, then both
        assert len(kept[kind]) < len(every[kind]) / 2  # times out of order: each new earliest is kept
        assert _table(inv, kept[kind]) == _table(inv, every[kind]), kind
    assert _table(inv, kept["dnsmasq"] + kept["access"]) == _table(inv, every["dnsmasq"] + every["access"])
