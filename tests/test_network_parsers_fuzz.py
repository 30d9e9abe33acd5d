"""Property tests: every parser of what a server or a known_hosts file says fails only in its own way.

Whatever bytes arrive, each parser returns a value or raises the one error
its caller turns into a message: never a ValueError, RecursionError,
UnicodeDecodeError or IndexError that would end in a traceback. The
end-to-end tests (test_check_http_hostile, test_check_tftp_hostile,
test_kube_hostile, test_known_hosts) show those messages through the CLI.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from upi.check.http import Target, _age, _version, content_length, last_modified
from upi.check.httpget import Fetched
from upi.check.tftpclient import BLKSIZE, TftpError, _handle
from upi.csr.api import BadEvent, _event, _status_message
from upi.remote.hostkeys import KnownHosts, _line

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TEXT = st.text(st.characters(codec="utf-8"), max_size=80)
# JSON-ish bytes: mostly structure characters, so the parser gets deep before it fails.
JSONISH = st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b":", b",", b"1", b"null",
                                    b'"ignition"', b'"version"', b'"type"', b'"object"', b"\xff"]),
                   max_size=400).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(TEXT, st.text(st.sampled_from("0123456789 ,-+_²٣"), max_size=30)))
@example(value="0\x1f")  # str.strip() removed \x1f, then int() refused it: a traceback
@example(value="12\x0b")
def test_content_length_is_a_small_number_or_none(value: str) -> None:
    n = content_length(value)
    assert n is None or (0 <= n < 10**18 and value.strip().isascii())


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(TEXT, st.from_regex(
    r"(Mon|Tue|Foo), [0-9]{1,3} (Jan|Feb|Xyz) [0-9]{1,6} [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2} "
    r"(GMT|-0000|\+9999|UTC)?", fullmatch=True)))
def test_last_modified_parses_or_says_it_cannot_and_the_age_row_never_raises(value: str) -> None:
    when = last_modified(value)
    assert when is None or when.tzinfo is not None
    row = _age(Target("master.ign", "http://h/ignition/master.ign", True),
               Fetched(200, last_modified=value), NOW)
    assert row.verdict in ("pass", "warn", "fail")


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(JSONISH, st.binary(max_size=200)))
def test_an_ignition_body_is_a_version_or_none(body: bytes) -> None:
    version = _version(body)
    assert version is None or (isinstance(version, str) and len(version) <= 40)


@settings(max_examples=300, deadline=None)
@given(line=st.one_of(JSONISH, st.binary(max_size=200)))
def test_a_watch_line_is_an_event_or_a_bad_event(line: bytes) -> None:
    event = _event(line)
    assert isinstance(event, BadEvent) or (isinstance(event["type"], str)
                                           and isinstance(event["object"], dict))
    assert isinstance(_status_message(line), str)


@settings(max_examples=300, deadline=None)
@given(packet=st.one_of(
    st.binary(max_size=40),
    st.builds(lambda op, rest: struct.pack("!H", op) + rest, st.integers(0, 8), st.binary(max_size=40)),
    st.builds(lambda opts: struct.pack("!H", 6) + b"\0".join(opts), st.lists(st.binary(max_size=12),
                                                                             max_size=6)),
))
def test_a_tftp_packet_is_a_step_or_a_tftp_error(packet: bytes) -> None:
    try:
        step = _handle(packet, 1, 512, lambda _b: None, BLKSIZE)
    except TftpError:
        return
    assert 8 <= (step.block_size or 8) <= BLKSIZE


WORDS = st.sampled_from(["@revoked", "@cert-authority", "@other", "*", "host", "[h]:22", "|1|a|b",
                         "|1|YWJj|ZGVm", "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256",
                         "AAAAC3NzaC1lZDI1NTE5AAAAIJb/32nVr4k8Msgd212ptgU/YWT00NFFdF73y6Xd14tf",
                         "AAAA", "#", "\t", "é", "\x00"])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.one_of(WORDS, TEXT), max_size=6))
def test_a_known_hosts_line_is_a_key_a_revocation_or_skipped(words: list[str]) -> None:
    known = KnownHosts(Path("known_hosts"))
    _line(known, 1, " ".join(words).strip() or "x")
    assert len(known.entries) + len(known.revoked) + len(known.skipped) >= 1
