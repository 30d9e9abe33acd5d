"""Events from the logs a UPI install leaves: dnsmasq's (DHCP, TFTP) and the HTTP server's access log.

Only lines these programs write are read; any other line is skipped, never
an error (a log is the site's, shared with other programs). dnsmasq's
log-facility file has syslog-style stamps without a year (`Nov 25 12:13:21`):
the year is the one that puts the stamp nearest before `now`. The access log
is the common or combined format nginx and httpd write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

# How a server listening on IPv6 for IPv4 too (nginx `listen [::]:80 ipv6only=off`) logs an IPv4 client.
MAPPED = "::ffff:"
# A log is first read from its end (status.follow): an install's events are recent; a site's log may be large.
MAX_READ = 64 << 20

MONTHS = {m: i for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)}
_DNSMASQ = re.compile(
    r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (dnsmasq-dhcp|dnsmasq-tftp)\[\d+\]: (.*)$")
_ACK = re.compile(r"^(?:\d+ )?DHCPACK\([^)]*\) (\S+) ([0-9a-f]{2}(?::[0-9a-f]{2}){5})\b")
_DISCOVER = re.compile(r"^(?:\d+ )?DHCPDISCOVER\([^)]*\) (?:\S+ )?([0-9a-f]{2}(?::[0-9a-f]{2}){5})(.*)$")
_SENT = re.compile(r"^sent (\S+) to (\S+)$")
_MISSING = re.compile(r"^file (\S+) not found(?: for (\S+))?$")
_ACCESS = re.compile(
    r'^(\S+) \S+ \S+ \[(\d\d)/([A-Z][a-z]{2})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)\] '
    r'"([A-Z]+) (\S+)(?: [^"]*)?" (\d{3}) (\d{1,18}|-)(?: |$)')


@dataclass(frozen=True)
class Event:
    """One thing a log says happened.

    `kind`: dhcp (an acknowledged lease), dhcp-discover, dhcp-refused (no
    address for that MAC), tftp (a file sent), tftp-missing, or http: its
    `method`, `status` and `size`, the body bytes sent (nginx's
    $body_bytes_sent, httpd's %b: fewer than the file's size when the client
    or the link gave up mid-way; `-` in httpd's log is 0).
    """

    time: datetime
    kind: str
    ip: str | None = None
    mac: str | None = None
    path: str | None = None
    status: int | None = None
    method: str | None = None
    size: int | None = None


def _year_stamp(month: int, day: int, hms: tuple[int, int, int], now: datetime) -> datetime | None:
    """The stamp in the year that puts it nearest before `now` (a day of clock skew allowed)."""
    for year in (now.year, now.year - 1):
        try:
            stamp = datetime(year, month, day, *hms, tzinfo=now.tzinfo)
        except ValueError:  # 29 Feb in another year
            continue
        if stamp <= now + timedelta(days=1):
            return stamp
    return None


def dnsmasq_events(lines: Iterable[str], now: datetime) -> Iterator[Event]:
    """DHCP acknowledgements and refusals, TFTP files sent and missing, from dnsmasq's log.

    Its stamps are local time, as is `now` (an aware datetime in the local zone).
    """
    for line in lines:
        if (ev := dnsmasq_event(line, now)) is not None:
            yield ev


def dnsmasq_event(line: str, now: datetime,
                  stamps: dict[tuple[str, ...], datetime | None] | None = None) -> Event | None:
    """The event one line of dnsmasq's log tells, if any (dnsmasq_events).

    `stamps`: the times of stamps read before with this `now` (a cache, filled here).
    """
    m = _DNSMASQ.match(line)
    if not m or m.group(1) not in MONTHS:
        return None
    stamp = stamp_of(m.group(1, 2, 3, 4, 5), now, stamps)
    if stamp is None:
        return None
    text = m.group(7)
    if m.group(6) == "dnsmasq-dhcp":
        if dhcp := dhcp_fields(text):
            return Event(stamp, dhcp[0], ip=dhcp[1], mac=dhcp[2])
    elif sent := _SENT.match(text):
        return Event(stamp, "tftp", ip=sent.group(2), path=sent.group(1))
    elif missing := _MISSING.match(text):
        return Event(stamp, "tftp-missing", ip=missing.group(2), path=missing.group(1))
    return None


def stamp_of(parts: tuple[str, ...], now: datetime,
             stamps: dict[tuple[str, ...], datetime | None] | None = None) -> datetime | None:
    """The time of a dnsmasq stamp (month name, day, hours, minutes, seconds), cached in `stamps`."""
    if stamps is not None and parts in stamps:
        return stamps[parts]
    stamp = _year_stamp(MONTHS[parts[0]], int(parts[1]), (int(parts[2]), int(parts[3]), int(parts[4])), now)
    if stamps is not None:
        stamps[parts] = stamp
    return stamp


def dhcp_fields(text: str) -> tuple[str, str | None, str] | None:
    """kind, IP and MAC of a DHCP event, from the text of a dnsmasq-dhcp line (after the tag)."""
    if ack := _ACK.match(text):
        return "dhcp", ack.group(1), ack.group(2)
    if disc := _DISCOVER.match(text):
        return ("dhcp-refused" if "no address available" in disc.group(2) else "dhcp-discover",
                None, disc.group(1))
    return None


def access_events(lines: Iterable[str]) -> Iterator[Event]:
    """Requests from an access log in the common or combined format (nginx, httpd)."""
    for line in lines:
        m = _ACCESS.match(line)
        if not m or m.group(3) not in MONTHS:
            continue
        sign = 1 if m.group(8) == "+" else -1
        zone = timezone(sign * timedelta(hours=int(m.group(9)), minutes=int(m.group(10))))
        try:
            stamp = datetime(int(m.group(4)), MONTHS[m.group(3)], int(m.group(2)), int(m.group(5)),
                             int(m.group(6)), int(m.group(7)), tzinfo=zone)
        except ValueError:
            continue
        path = m.group(12).split("?", 1)[0]
        size = 0 if m.group(14) == "-" else int(m.group(14))
        yield Event(stamp, "http", ip=m.group(1).removeprefix(MAPPED), path=path, status=int(m.group(13)),
                    method=m.group(11), size=size)
