"""Logs followed from look to look, as `tail -F` follows a file: each look reads only what is new.

A Follower keeps, per log, the file's identity (device and inode), the
offset it has read to, the partial last line, and a Digest: the events of
that log the stage table can use. A later look reads the bytes appended
since (locally, or over SSH: only they cross the link) and adds their
events; it starts over when the file was rotated (another identity) or
truncated (shorter than the offset). The first look reads the last
MAX_READ bytes, as before; so does a look that finds more than that
appended (what lies before is skipped, what was learnt is kept).

A Digest keeps what build_rows needs and nothing more: each event of a
node once (the first of its kind; again only when one comes with an
earlier time), the first event of each stranger, the GETs of a stage file
from anyone (the image's whole size), so a busy log costs its bytes once
and memory by its nodes, not its lines. Only the lines that can hold such an
event are parsed: found by what they contain (`DHCPACK(`, a stage file's
name) or how they start (an address in the machine network), with a
search that runs over the whole chunk, not line by line; their parsing is
logs.py's. Other lines (a shared server's other clients) say nothing of a
node: the `waiting` nodes' clock starts at the earliest event kept.
"""

from __future__ import annotations

import re
from datetime import datetime
from ipaddress import IPv4Network
from typing import Literal

from upi.inventory.model import Inventory
from upi.inventory.segments import segments
from upi.remote.base import Mark, Transport
from upi.status.logs import MAX_READ, MONTHS, Event, access_events, dhcp_fields, dnsmasq_event, stamp_of
from upi.status.stages import http_files, machine_ip

Kind = Literal["dnsmasq", "access"]
# The lines of dnsmasq's log that hold an event (logs.dnsmasq_events), found by a literal each
# (the search runs at memchr speed): a DHCP acknowledgement or discover, any TFTP line.
_DHCP_HINT = re.compile(rb"DHCP(?:ACK|DISCOVER)\(")
_TFTP_HINT = re.compile(re.escape(b"dnsmasq-tftp["))
# What precedes the DHCP text on dnsmasq's line (logs._DNSMASQ up to its text, then the xid):
# such a line's event is that of its text, which repeats (renewals): parsed once per text.
_DHCP_HEAD = re.compile(rb"([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) dnsmasq-dhcp\[\d+\]: (?:\d+ )?")
# Bytes that str.splitlines() also breaks lines at, or that decode to one (any non-ASCII byte):
# a chunk holding one is parsed line by line, exactly as before.
_ODD_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


def net_prefix(net: IPv4Network) -> bytes:
    """A pattern for the text an address of `net` starts with (a superset, checked again per line)."""
    octets = str(net.network_address).split(".")
    whole, rest = divmod(net.prefixlen, 8)
    head = "".join(o + r"\." for o in octets[:whole])
    if whole == 4:
        return head[:-2].encode() + rb"\b"
    if rest == 0:
        return (head or r"\d").encode()
    low = int(octets[whole])
    values = "|".join(str(v) for v in range(low, low + (1 << (8 - rest))))
    return f"{head}(?:{values})\\b".encode()


class Digest:
    """The events of one log that build_rows can use, in the log's order, each kept once.

    build_rows over these gives the table it gives over every event of the
    log: a stage is its earliest event (kept: each new earliest of a kind),
    a note or a stranger its first (kept), the image's size the largest
    body (kept: every size). `earliest` is that of the events kept.
    """

    def __init__(self, inv: Inventory) -> None:
        self.events: list[Event] = []
        self._files = http_files(inv)
        self._macs = {n.mac.lower() for n in inv.nodes}
        self._ips = {str(n.ip) for n in inv.nodes}
        self._could_be = machine_ip(inv)
        self._ours: dict[str, bool] = {}
        self._seen: dict[tuple[object, ...], datetime] = {}
        self._strangers: set[tuple[str, str]] = set()
        self._texts: dict[bytes, tuple[str, str | None, str] | None] = {}  # a DHCP line's text, read
        nets = b"|".join(net_prefix(seg.cidr) for seg in segments(inv))  # the racks behind relays too
        self._lead = re.compile(rb"\n(?:::ffff:)?(?:" + nets + rb")")
        self._names = tuple(re.compile(re.escape(n.encode())) for n in (".ign", *self._files))

    def _stage_file(self, path: str | None) -> bool:
        name = (path or "").rsplit("/", 1)[-1]
        return name.endswith(".ign") or name in self._files

    def _machine(self, ip: str) -> bool:
        known = self._ours.get(ip)
        if known is None:
            known = self._ours[ip] = self._could_be(ip)
        return known

    def wanted(self, ev: Event) -> bool:
        """Whether build_rows can use `ev` at all (a node's, a stranger's, a stage file's size).

        A node's DHCP discover tells nothing (its lease does).
        """
        if ev.mac:
            return ev.kind == "dhcp" or ev.mac.lower() not in self._macs
        if (ev.ip or "") in self._ips:
            return ev.kind != "http" or self._stage_file(ev.path)
        return self._machine(ev.ip or "") or (ev.kind == "http" and self._stage_file(ev.path))

    def add(self, ev: Event) -> None:
        """Keep `ev` if it tells build_rows something the events kept do not."""
        if not self.wanted(ev):
            return
        if ev.mac and ev.mac.lower() not in self._macs:
            self._first(("mac", ev.mac.lower()), ev)
            return
        if not ev.mac and (ev.ip or "") not in self._ips:
            if ev.kind != "http" or not self._stage_file(ev.path):
                self._first(("ip", ev.ip or ""), ev)
                return
            if self._machine(ev.ip or ""):
                self._strangers.add(("ip", ev.ip or ""))  # this one is kept below: it is new
        key = (ev.kind, ev.ip, ev.mac, ev.path, ev.status, ev.method, ev.size)
        old = self._seen.get(key)
        if old is None or ev.time < old:
            self._seen[key] = ev.time
            self.events.append(ev)

    def _first(self, stranger: tuple[str, str], ev: Event) -> None:
        if stranger not in self._strangers:
            self._strangers.add(stranger)
            self.events.append(ev)

    def dnsmasq(self, chunk: bytes, now: datetime) -> None:
        """Add the events of complete lines of dnsmasq's log: its DHCP lines, then its TFTP lines.

        In a plain chunk (ASCII, lines broken at newlines only) a DHCP line of
        the usual shape is read from its stamp and its text (parsed once per
        text); any other line with a hint is parsed whole (logs.dnsmasq_event).
        The DHCP events (by MAC) and the TFTP ones (by IP) are apart in
        build_rows: which comes first changes nothing.
        """
        plain = _plain(chunk)
        stamps: dict[tuple[str, ...], datetime | None] = {}
        times: dict[tuple[bytes, ...], datetime | None] = {}  # the same, by the stamp's bytes
        last = -1
        for m in _DHCP_HINT.finditer(chunk):
            at, end = m.start(), chunk.find(b"\n", m.start())
            text, fields = chunk[at:end if end >= 0 else len(chunk)], None
            if plain:
                if text not in self._texts:
                    self._texts[text] = dhcp_fields(text.decode())
                fields = self._texts[text]
                if fields is None or (fields[0] != "dhcp" and fields[2].lower() in self._macs):
                    continue  # nothing, or a node's discover: nothing build_rows uses, whatever its head
            start = _line_start(chunk, at)
            if start == last:
                continue  # a second hint on the line: the line was read
            last = start
            head = _DHCP_HEAD.fullmatch(chunk, start, at) if plain else None
            if head is None or fields is None:
                self._lines(chunk, start, now, stamps)
                continue
            raw = head.group(1, 2, 3, 4, 5)
            if raw in times:
                stamp = times[raw]
            else:
                parts = tuple(p.decode() for p in raw)
                stamp = times[raw] = stamp_of(parts, now, stamps) if parts[0] in MONTHS else None
            if stamp is not None and not self._known(fields, stamp):
                self.add(Event(stamp, fields[0], ip=fields[1], mac=fields[2]))
        last = -1
        for m in _TFTP_HINT.finditer(chunk):
            start = _line_start(chunk, m.start())
            if start != last:
                self._lines(chunk, start, now, stamps)
                last = start

    def _lines(self, chunk: bytes, start: int, now: datetime,
               stamps: dict[tuple[str, ...], datetime | None]) -> None:
        """Add the events of the line of dnsmasq's log at `start`, parsed whole."""
        end = chunk.find(b"\n", start)
        for line in chunk[start:end if end >= 0 else len(chunk)].decode(errors="replace").splitlines():
            if (ev := dnsmasq_event(line, now, stamps)) is not None:
                self.add(ev)

    def _known(self, fields: tuple[str, str | None, str], stamp: datetime) -> bool:
        """Whether a DHCP event with these fields at `stamp` would be dropped by add (cheaply)."""
        kind, ip, mac = fields
        if mac.lower() not in self._macs:
            return ("mac", mac.lower()) in self._strangers
        old = self._seen.get((kind, ip, mac, None, None, None, None))
        return old is not None and stamp >= old

    def access(self, chunk: bytes) -> None:
        """Add the events of complete lines of an access log."""
        if not _plain(chunk):
            for ev in access_events(chunk.decode(errors="replace").splitlines()):
                self.add(ev)
            return
        starts = {0} if self._lead.match(b"\n" + chunk[:64]) else set()
        starts.update(m.start() + 1 for m in self._lead.finditer(chunk))
        for name in self._names:
            starts.update(_line_start(chunk, m.start()) for m in name.finditer(chunk))
        for start in sorted(starts):
            end = chunk.find(b"\n", start)
            for ev in access_events(chunk[start:end if end >= 0 else len(chunk)].decode(errors="replace")
                                    .splitlines()):
                self.add(ev)


def _plain(chunk: bytes) -> bool:
    """ASCII, broken into lines at newlines only: what str.splitlines() would split it at too."""
    return chunk.isascii() and not any(b in chunk for b in _ODD_BREAKS)


def _line_start(chunk: bytes, at: int) -> int:
    """Where the line holding `at` starts (looked for near `at` first: lines are short)."""
    near = chunk.rfind(b"\n", max(0, at - 256), at)
    return near + 1 if near >= 0 or at <= 256 else chunk.rfind(b"\n", 0, at) + 1


class Follower:
    """One log, read look after look from where the last look stopped."""

    def __init__(self, inv: Inventory, kind: Kind, path: str, limit: int = MAX_READ) -> None:
        self.inv, self.kind, self.path, self.limit = inv, kind, path, limit
        self.mark: Mark | None = None
        self.pending = b""  # the last line, not complete yet
        self.skipping = False  # within a line cut at its start, or longer than `limit`: dropped
        self.digest = Digest(inv)

    def look(self, where: Transport, now: datetime) -> list[Event]:
        """The log's events so far: those kept, the new bytes' added, the partial last line's.

        A read that fails (the file gone, the link dropped) forgets
        everything: the next look starts over.
        """
        try:
            self._read(where, now)
        except BaseException:
            self.mark, self.pending, self.skipping, self.digest = None, b"", False, Digest(self.inv)
            raise
        tail = Digest(self.inv)
        self._feed(tail, self.pending, now)
        return self.digest.events + tail.events

    def _read(self, where: Transport, now: datetime) -> None:
        with where.open_log(self.path, self.mark, self.limit) as (span, chunks):
            if not span.follows(self.mark):
                mark = self.mark
                gap = mark is not None and span.ident == mark.ident and span.start > mark.offset
                if not gap:  # first look, rotated, truncated: start over
                    self.digest = Digest(self.inv)
                self.pending, self.skipping = b"", span.start > 0  # the first line is cut
            received = 0
            for chunk in chunks:
                received += len(chunk)
                data = self.pending + chunk
                if self.skipping:
                    cut = data.find(b"\n")
                    if cut < 0:
                        self.pending = b""
                        continue
                    data, self.skipping = data[cut + 1:], False
                cut = data.rfind(b"\n") + 1
                self._feed(self.digest, data[:cut], now)
                self.pending = data[cut:]
                if len(self.pending) > self.limit:  # no line is that long: garbage, not kept
                    self.pending, self.skipping = b"", True
            self.mark = Mark(span.ident, span.start + received)

    def _feed(self, digest: Digest, data: bytes, now: datetime) -> None:
        if not data:
            return
        if self.kind == "dnsmasq":
            digest.dnsmasq(data, now)
        else:
            digest.access(data)
