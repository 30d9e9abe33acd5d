"""The approver against a live API: one pass (--once) or a watch (--watch).

Decisions come from decide.py; this module only reads the cluster, applies
approvals through the /approval subresource and logs one line per decision.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from upi.csr.connect import Connection
from upi.csr.decide import Approve, ClusterState, Csr, Decision, Skip, decide, kind_of
from upi.errors import ClusterError
from upi.facts.identity import NodeIdentity

CSR_URL = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
WATCH_SECONDS = 300  # the server ends each watch after this; we resume from the last version
CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class Record:
    """One decision as logged: what, about which CSR, and why."""

    csr: str
    action: str  # approved | would-approve | skipped
    kind: str | None
    node: str | None
    signer: str
    requestor: str
    reason: str
    time: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"))

    def line(self, as_json: bool) -> str:
        """The log line: a JSON object, or a sentence for people."""
        if as_json:
            return json.dumps(self.__dict__, separators=(",", ":"))
        return f"{self.action} {self.csr}: {self.reason}"


def to_csr(obj: Any) -> Csr:
    """The decision's view of a lightkube CertificateSigningRequest."""
    spec, st = obj.spec, obj.status
    conds = {c.type for c in (st.conditions or [])} if st is not None else set()
    try:
        request = base64.b64decode(spec.request or "", validate=True)
    except ValueError:
        request = b""
    return Csr(obj.metadata.name, spec.signerName or "", spec.username or "", tuple(spec.groups or ()),
               tuple(spec.usages or ()), request, pending=not conds & {"Approved", "Denied", "Failed"})


def _order(objs: Iterable[Any]) -> list[Any]:
    """Client CSRs before serving ones (a node needs both, in that order), oldest first."""
    def key(o: Any) -> tuple[bool, str, str]:
        ts = o.metadata.creationTimestamp
        return (o.spec.signerName != "kubernetes.io/kube-apiserver-client-kubelet",
                ts.isoformat() if ts else "", o.metadata.name)
    return sorted(objs, key=key)


class Approver:
    """Approves the CSRs of the inventory's nodes; `once()` for a pass, `watch()` to keep at it."""

    def __init__(self, conn: Connection, identities: dict[str, NodeIdentity], *, dry_run: bool = False,
                 log: Callable[[Record], None] | None = None) -> None:
        self.conn = conn
        self.identities = identities
        self.dry_run = dry_run
        self.log = log or (lambda _r: None)
        self.pending: dict[str, Any] = {}

    # --- one pass ---------------------------------------------------------------
    def once(self) -> list[Record]:
        """List the CSRs and decide every pending one, client CSRs first."""
        _, objs = self._list()
        self.pending = {o.metadata.name: o for o in objs if to_csr(o).pending}
        return [self._handle(o) for o in _order(self.pending.values())]

    def _list(self) -> tuple[str, list[Any]]:
        from lightkube.resources.certificates_v1 import CertificateSigningRequest

        it = self.conn.api.list(CertificateSigningRequest)
        objs = list(it)
        return it.resourceVersion, objs

    def _nodes(self) -> frozenset[str]:
        from lightkube.resources.core_v1 import Node

        return frozenset(n.metadata.name for n in self.conn.api.list(Node))

    def _state(self, csr: Csr) -> ClusterState:
        # Nodes only matter to a client CSR: spare the API a list for the rest.
        nodes = self._nodes() if kind_of(csr) == "client" else frozenset()
        return ClusterState(nodes, len(self.pending))

    def _handle(self, obj: Any) -> Record:
        """Decide one pending CSR, approve it if the rules say so, log the outcome."""
        csr = to_csr(obj)
        decision = decide(csr, self.identities, self._state(csr))
        if isinstance(decision, Approve) and not self.dry_run:
            decision = self._approve(obj, decision)
        record = _record(csr, decision, self.dry_run)
        if record.action != "skipped":
            self.pending.pop(csr.name, None)
        self.log(record)
        return record

    def _approve(self, obj: Any, decision: Approve) -> Decision:
        """PUT the approval with the object's resourceVersion; on 409 re-read and re-decide."""
        from lightkube import ApiError
        from lightkube.resources.certificates_v1 import CertificateSigningRequest

        for _ in range(CONFLICT_RETRIES):
            try:
                self.conn.api.replace(_with_approval(obj, decision))
                return decision
            except ApiError as exc:
                if exc.status.code != 409:
                    raise
            obj = self.conn.api.get(CertificateSigningRequest, obj.metadata.name)
            csr = to_csr(obj)
            fresh = decide(csr, self.identities, self._state(csr))
            if not isinstance(fresh, Approve):
                return fresh
        return Skip(f"still conflicting after {CONFLICT_RETRIES} tries; next pass retries",
                    decision.kind, decision.node)

    # --- watch ------------------------------------------------------------------
    def watch(self, stop: threading.Event | None = None, *, poll: float = 1.0,
              max_backoff: float = 30.0) -> None:
        """Approve as CSRs arrive until `stop` is set: list, then follow the watch stream.

        Reconnects with exponential backoff; a stale version (410) starts over
        with a fresh list. A `stop` event is honoured within about `poll`
        seconds; without one the stream idles until the server ends it.
        """
        if stop is None:
            stop, poll = threading.Event(), WATCH_SECONDS + 30.0
        failures = 0
        while not stop.is_set():
            try:
                rv, objs = self._list()
                failures = 0
                self.pending = {o.metadata.name: o for o in objs if to_csr(o).pending}
                for obj in _order(list(self.pending.values())):
                    self._handle(obj)
                self._follow(rv, stop, poll)
            except _Gone:
                continue
            except Exception as exc:  # noqa: BLE001 - sorted by _retryable, re-raised if not
                if not _retryable(exc):
                    raise _cluster_error(self.conn.server, exc) from None
                failures += 1
                stop.wait(min(max_backoff, 0.5 * 2 ** min(failures, 8)))

    def _follow(self, rv: str, stop: threading.Event, poll: float) -> None:
        while not stop.is_set():
            for kind, obj in self._stream(rv, stop, poll):
                rv = obj.metadata.resourceVersion or rv
                name = obj.metadata.name
                if kind == "DELETED" or not to_csr(obj).pending:
                    self.pending.pop(name, None)
                elif kind in ("ADDED", "MODIFIED"):
                    self.pending[name] = obj
                    self._handle(obj)

    def _stream(self, rv: str, stop: threading.Event, poll: float) -> Iterator[tuple[str, Any]]:
        """Events after `rv` until the server ends the watch, `stop` is set, or `poll` idles."""
        import httpx2
        from lightkube.resources.certificates_v1 import CertificateSigningRequest

        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(WATCH_SECONDS),
                  "allowWatchBookmarks": "true"}
        timeout = httpx2.Timeout(10.0, read=poll)
        try:
            with self.conn.http.stream("GET", CSR_URL, params=params, timeout=timeout) as resp:
                if resp.status_code == 410:
                    raise _Gone
                resp.raise_for_status()
                for line in resp.iter_lines():
                    if stop.is_set():
                        return
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        raise _Gone if event["object"].get("code") == 410 else ClusterError(
                            f"watch error: {event['object'].get('message')}")
                    if event.get("type") != "BOOKMARK":
                        yield event["type"], CertificateSigningRequest.from_dict(event["object"])
        except httpx2.ReadTimeout:
            return  # idle: check `stop`, then resume from the same version


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


def _retryable(exc: Exception) -> bool:
    """Transport trouble and server hiccups retry; refused credentials and bugs do not."""
    import httpx2

    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code not in (401, 403)
    return isinstance(exc, httpx2.TransportError | ClusterError | OSError)


def _cluster_error(server: str, exc: Exception) -> ClusterError:
    import httpx2

    if isinstance(exc, httpx2.HTTPStatusError):
        code = exc.response.status_code
        hint = " (may upi's credentials read and approve CSRs?)" if code in (401, 403) else ""
        return ClusterError(f"{server} answered {code}{hint}")
    if isinstance(exc, httpx2.TransportError | OSError):
        return ClusterError(f"cannot reach the API at {server}: {exc}")
    if isinstance(exc, ClusterError):
        return exc
    raise exc


def _with_approval(obj: Any, decision: Approve) -> Any:
    """The whole object (its resourceVersion included) plus an Approved condition."""
    from lightkube.models.certificates_v1 import (
        CertificateSigningRequestCondition,
        CertificateSigningRequestStatus,
    )
    from lightkube.resources.certificates_v1 import CertificateSigningRequest

    now = dt.datetime.now(dt.UTC)
    cond = CertificateSigningRequestCondition(
        type="Approved", status="True", reason="UpiInventoryMatch", lastUpdateTime=now,
        message=f"{decision.kind} CSR of {decision.node}, a node of the inventory (upi approve-csr)")
    old = obj.status or CertificateSigningRequestStatus()
    status = CertificateSigningRequestStatus(conditions=[*(old.conditions or []), cond],
                                             certificate=old.certificate)
    return CertificateSigningRequest.Approval(apiVersion="certificates.k8s.io/v1",
                                              kind="CertificateSigningRequest",
                                              metadata=obj.metadata, spec=obj.spec, status=status)


def _record(csr: Csr, decision: Decision, dry_run: bool) -> Record:
    if isinstance(decision, Approve):
        action = "would-approve" if dry_run else "approved"
        reason = f"{decision.kind} CSR of inventory node {decision.node}"
        return Record(csr.name, action, decision.kind, decision.node, csr.signer, csr.username, reason)
    return Record(csr.name, "skipped", decision.kind, decision.node, csr.signer, csr.username,
                  decision.reason)


def run_once(conn: Connection, identities: dict[str, NodeIdentity], *, dry_run: bool = False,
             log: Callable[[Record], None] | None = None) -> list[Record]:
    """One pass; API failures become ClusterError."""
    try:
        return Approver(conn, identities, dry_run=dry_run, log=log).once()
    except Exception as exc:  # noqa: BLE001 - mapped to a user-facing error, or re-raised
        raise _cluster_error(conn.server, exc) from None
