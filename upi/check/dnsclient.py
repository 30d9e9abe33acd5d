"""A pipelined DNS client: many queries in flight on one UDP socket.

A thread per query is slower than a plain serial loop under the GIL; one
socket with a window of outstanding queries keeps the server busy instead.
Each query has its own deadline and is re-sent `retries` times; a truncated
answer is asked again over TCP. Queries go only to the server named: never
through /etc/resolv.conf.
"""

from __future__ import annotations

import functools
import selectors
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype


@dataclass(frozen=True)
class Query:
    """One question: a name and a record type (`A`, `PTR`, `SRV`)."""

    name: str
    rdtype: str


@dataclass(frozen=True)
class Answer:
    """What the server said: rcode and the answer values, or `error` when it did not."""

    rcode: str
    values: tuple[str, ...] = ()
    error: str = ""
    refused: bool = False  # ICMP port unreachable came back: nothing listens on that UDP port


@dataclass
class _Pending:
    index: int
    message: dns.message.Message
    wire: bytes
    deadline: float
    tries: int


@functools.cache
def _rdtype(text: str) -> dns.rdatatype.RdataType:
    """`A` -> RdataType.A, looked up once per type (dnspython's from_text costs ~30 us a call)."""
    return dns.rdatatype.from_text(text)


def answer_values(response: dns.message.Message, rdtype: str) -> tuple[str, ...]:
    """The answer section's values of `rdtype`, in order, names without the final dot."""
    want = _rdtype(rdtype)
    out: list[str] = []
    for rrset in response.answer:
        if rrset.rdtype == want:
            out.extend(rd.to_text().rstrip(".") for rd in rrset)
    return tuple(out)


def _to_answer(response: dns.message.Message, rdtype: str) -> Answer:
    return Answer(dns.rcode.to_text(response.rcode()), answer_values(response, rdtype))


class _Pipeline:
    """The send/receive loop behind `query_all`."""

    def __init__(self, queries: Sequence[Query], server: str, port: int, *, window: int,
                 timeout: float, retries: int, progress: Callable[[int], None] | None) -> None:
        self.queries, self.server, self.port = queries, server, port
        self.window, self.timeout, self.retries = max(1, min(window, 60000)), timeout, retries
        self.progress = progress or (lambda _n: None)
        self.results: list[Answer | None] = [None] * len(queries)
        self.pending: dict[int, _Pending] = {}
        self.next_index = 0
        self.next_id = 0
        self.refused = False
        family = socket.AF_INET6 if ":" in server else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)

    def run(self) -> list[Answer]:
        try:
            self.sock.connect((self.server, self.port))
            self.sock.setblocking(False)
            with selectors.DefaultSelector() as sel:
                sel.register(self.sock, selectors.EVENT_READ)
                while self.next_index < len(self.queries) or self.pending:
                    self._fill()
                    wait = min(p.deadline for p in self.pending.values()) - time.monotonic()
                    if sel.select(max(0.0, wait)):
                        self._receive()
                    self._expire()
        finally:
            self.sock.close()
        return [a or Answer("", error="not asked") for a in self.results]

    def _new_id(self) -> int:
        while self.next_id in self.pending:
            self.next_id = (self.next_id + 1) & 0xFFFF
        qid, self.next_id = self.next_id, (self.next_id + 1) & 0xFFFF
        return qid

    def _fill(self) -> None:
        while len(self.pending) < self.window and self.next_index < len(self.queries):
            q = self.queries[self.next_index]
            msg = dns.message.make_query(q.name, _rdtype(q.rdtype), id=self._new_id())
            p = _Pending(self.next_index, msg, msg.to_wire(), 0.0, 0)
            self.pending[msg.id] = p
            self.next_index += 1
            self._send(p)

    def _send(self, p: _Pending) -> None:
        p.tries += 1
        p.deadline = time.monotonic() + self.timeout
        # A full buffer or an ICMP error: the deadline re-sends it, or gives up.
        try:
            self.sock.send(p.wire)
        except BlockingIOError:
            pass
        except ConnectionRefusedError:
            self.refused = True

    def _receive(self) -> None:
        while True:
            try:
                data = self.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:
                self.refused = True
                continue  # ICMP from an earlier send: the deadlines decide
            try:
                resp = dns.message.from_wire(data)
            except dns.exception.DNSException:
                continue
            p = self.pending.get(resp.id)
            if p is None or not p.message.is_response(resp):
                continue  # a late duplicate or a stranger
            del self.pending[resp.id]
            self._done(p, resp)

    def _done(self, p: _Pending, resp: dns.message.Message) -> None:
        q = self.queries[p.index]
        if resp.flags & dns.flags.TC:
            # Only for a truncated answer: dns.query imports DNS over HTTPS's stack (60 ms).
            from dns.query import tcp

            try:
                resp = tcp(p.message, self.server, port=self.port, timeout=self.timeout)
            except (OSError, dns.exception.DNSException) as exc:
                self.results[p.index] = Answer("", error=f"truncated, and TCP failed: {exc}")
                self.progress(1)
                return
        self.results[p.index] = _to_answer(resp, q.rdtype)
        self.progress(1)

    def _expire(self) -> None:
        now = time.monotonic()
        for qid, p in list(self.pending.items()):
            if p.deadline > now:
                continue
            if p.tries <= self.retries:
                self._send(p)
                continue
            del self.pending[qid]
            tries = "1 try" if p.tries == 1 else f"{p.tries} tries"
            if self.refused:
                self.results[p.index] = Answer("", error="connection refused (ICMP port unreachable)",
                                               refused=True)
            else:
                self.results[p.index] = Answer("", error=f"no answer in {tries} of {self.timeout:g} s")
            self.progress(1)


def query_all(queries: Sequence[Query], server: str, port: int = 53, *, window: int = 64,
              timeout: float = 2.0, retries: int = 1,
              progress: Callable[[int], None] | None = None) -> list[Answer]:
    """Ask `server` every query, at most `window` at a time; answers in query order.

    `server` must be an IP address. A query unanswered after `timeout`
    seconds is sent again, `retries` times, then reported as an error.
    OSError when the socket cannot be used at all (no route to `server`).
    """
    return _Pipeline(queries, server, port, window=window, timeout=timeout, retries=retries,
                     progress=progress).run()
