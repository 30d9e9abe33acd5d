"""The approver against a live API: one pass (--once) or a watch (--watch).

Decisions come from decide.py; this module only reads the cluster, applies
approvals through the /approval subresource and logs one line per decision.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from upi.csr.api import Api, ApiStatus, BadEvent
from upi.csr.connect import Connection
from upi.csr.decide import (
    CLIENT_SIGNER,
    Approve,
    ClusterState,
    Csr,
    Decision,
    Hold,
    Skip,
    client_node,
    decide,
    kind_of,
)
from upi.errors import ClusterError
from upi.facts.identity import NodeIdentity

CSR_URL = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODE_URL = "/api/v1/nodes"
WATCH_SECONDS = 300  # the server ends each watch after this; we resume from the last version
CONFLICT_RETRIES = 5
# metadata.name of any Kubernetes object: a DNS subdomain (it goes into a URL path).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@dataclass(frozen=True)
class Record:
    """One decision as logged: what, about which CSR, and why."""

    csr: str
    action: str  # approved | would-approve | held | skipped
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


class Malformed(Exception):
    """An object from the API that is not a well-formed CSR; carries why."""


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Malformed(f"{what} is not a list of strings")
    return tuple(value)


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Malformed("metadata.name is missing or not a Kubernetes name")
    return name


def _conditions(obj: dict[str, Any]) -> set[str]:
    status = obj.get("status") or {}
    conds = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conds, list | None) or not all(
            isinstance(c, dict) and isinstance(c.get("type"), str) for c in conds or []):
        raise Malformed("status.conditions is not a list of conditions")
    return {c["type"] for c in conds or [] if c.get("status", "True") == "True"}


def to_csr(obj: Any) -> Csr:
    """The decision's view of a CertificateSigningRequest object as the API sent it (JSON).

    Raises Malformed for anything that is not shaped like one.
    """
    name = _name(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise Malformed("spec is not an object")
    signer, username, request = spec.get("signerName"), spec.get("username"), spec.get("request")
    if not all(isinstance(v, str | None) for v in (signer, username, request)):
        raise Malformed("spec.signerName, spec.username or spec.request is not a string")
    try:
        pem = base64.b64decode(request or "", validate=True)
    except ValueError:
        pem = b""  # decide() skips it: "not one PEM certificate request"
    conds = _conditions(obj)
    return Csr(name, signer or "", username or "", _strings(spec.get("groups"), "spec.groups"),
               _strings(spec.get("usages"), "spec.usages"), pem,
               pending=not conds & {"Approved", "Denied", "Failed"})


def _issued(obj: dict[str, Any]) -> bool:
    """Approved and not failed: the requester holds (or will hold) a certificate."""
    conds = _conditions(obj)
    return "Approved" in conds and not conds & {"Denied", "Failed"}


def _order(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Client CSRs before serving ones (a node needs both, in that order), oldest first."""
    def key(o: dict[str, Any]) -> tuple[bool, str, str]:
        ts = o["metadata"].get("creationTimestamp")
        return (o["spec"].get("signerName") != CLIENT_SIGNER, ts if isinstance(ts, str) else "",
                o["metadata"]["name"])
    return sorted(objs, key=key)


def _malformed(name: str, why: str) -> Record:
    return Record(name, "skipped", None, None, "", "", f"malformed CSR object from the API: {why}")


class Approver:
    """Approves the CSRs of the inventory's nodes; `once()` for a pass, `watch()` to keep at it.

    At most one client CSR per inventory node is approved until its Node
    registers: the approved client CSRs the API already holds (from earlier
    passes, runs or other approvers) count, and any further one is held
    (neither approved nor denied) unless its name is in `release`.
    """

    def __init__(self, conn: Connection, identities: dict[str, NodeIdentity], *, dry_run: bool = False,
                 log: Callable[[Record], None] | None = None,
                 release: frozenset[str] = frozenset()) -> None:
        self.conn = conn
        self.api = Api(conn.http)
        self.identities = identities
        self.dry_run = dry_run
        self.log = log or (lambda _r: None)
        self.release = release
        self.pending: dict[str, dict[str, Any]] = {}
        self.clients: dict[str, str] = {}  # inventory node -> its approved client CSR
        self._client_csrs: dict[str, str] = {}  # approved client CSR -> inventory node

    # --- one pass ---------------------------------------------------------------
    def once(self) -> list[Record]:
        """List the CSRs and decide every pending one, client CSRs first.

        With `release`, decide only the CSRs it names (each must be pending).
        """
        _, objs = self._list()
        records = self._load(objs)
        todo = _order(self.pending.values())
        if self.release:
            todo = [o for o in todo if o["metadata"]["name"] in self.release]
            for name in sorted(self.release - {o["metadata"]["name"] for o in todo}):
                records.append(Record(name, "skipped", None, None, "", "", "no pending CSR of this name"))
                self.log(records[-1])
        return records + [self._handle(o) for o in todo]

    def _list(self) -> tuple[str, list[Any]]:
        return self.api.list(CSR_URL)

    def _load(self, objs: list[Any]) -> list[Record]:
        """Take a fresh list: pending CSRs, approved client CSRs per node; log malformed items."""
        self.pending, self.clients, self._client_csrs = {}, {}, {}
        bad = []
        for obj in objs:
            try:
                self._note(obj)
            except Malformed as exc:
                bad.append(_malformed(_name_or_unknown(obj), str(exc)))
                self.log(bad[-1])
        return bad

    def _note(self, obj: Any) -> None:
        """Remember one CSR as the API shows it now (added or modified)."""
        csr = to_csr(obj)
        if csr.pending:
            self.pending[csr.name] = obj
            return
        self.pending.pop(csr.name, None)
        node = client_node(csr, self.identities) if _issued(obj) else None
        if node is not None:
            self._client_csrs[csr.name] = node
            self.clients.setdefault(node, csr.name)

    def _forget(self, name: str) -> None:
        self.pending.pop(name, None)
        node = self._client_csrs.pop(name, None)
        if node is not None and self.clients.get(node) == name:
            del self.clients[node]
            other = next((c for c, n in self._client_csrs.items() if n == node), None)
            if other is not None:
                self.clients[node] = other

    def _nodes(self) -> frozenset[str]:
        _, items = self.api.list(NODE_URL)
        names = set()
        for item in items:
            try:
                names.add(_name(item))
            except Malformed:
                continue  # a Node without a usable name cannot match an inventory node
        return frozenset(names)

    def _state(self, csr: Csr) -> ClusterState:
        # Nodes only matter to a client CSR: spare the API a list for the rest.
        nodes = self._nodes() if kind_of(csr) == "client" else frozenset()
        return ClusterState(nodes, len(self.pending), dict(self.clients), self.release)

    def _handle(self, obj: dict[str, Any]) -> Record:
        """Decide one pending CSR, approve it if the rules say so, log the outcome."""
        csr = to_csr(obj)
        decision = decide(csr, self.identities, self._state(csr))
        if isinstance(decision, Approve):
            if not self.dry_run:
                decision = self._approve(obj, decision)
            if isinstance(decision, Approve) and decision.kind == "client":
                # counts at once, also in a dry run: a second one in this pass is held
                ident = self.identities[decision.node]
                self._client_csrs[csr.name] = ident.name
                self.clients.setdefault(ident.name, csr.name)
        record = _record(csr, decision, self.dry_run)
        if record.action not in ("skipped", "held"):
            self.pending.pop(csr.name, None)
        self.log(record)
        return record

    def _approve(self, obj: dict[str, Any], decision: Approve) -> Decision:
        """PUT the approval with the object's resourceVersion; on 409 re-read and re-decide."""
        name = obj["metadata"]["name"]
        for _ in range(CONFLICT_RETRIES):
            try:
                self.api.request("PUT", f"{CSR_URL}/{name}/approval", body=_with_approval(obj, decision))
                return decision
            except ApiStatus as exc:
                if exc.code != 409:
                    raise
            obj = self.api.request("GET", f"{CSR_URL}/{name}")
            try:
                csr = to_csr(obj)
            except Malformed as exc:
                return Skip(f"malformed CSR object from the API: {exc}", decision.kind, decision.node)
            if csr.name != name:
                return Skip(f"the API answered for {name} with {csr.name}", decision.kind, decision.node)
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
                self._load(objs)
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
            params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(WATCH_SECONDS),
                      "allowWatchBookmarks": "true"}
            try:
                for event in self.api.watch(CSR_URL, params, read_timeout=poll, stop=stop):
                    rv = self._event(event, rv)
            except ApiStatus as exc:
                if exc.code == 410:
                    raise _Gone from None
                raise

    def _event(self, event: dict[str, Any] | BadEvent, rv: str) -> str:
        """Act on one watch event; returns the resourceVersion to resume from."""
        if isinstance(event, BadEvent):
            self.log(_malformed("?", f"watch event: {event.reason}"))
            return rv
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            msg = obj.get("message")
            raise ClusterError(f"watch error: {msg if isinstance(msg, str) else 'no message'}")
        meta = obj.get("metadata")
        new_rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        rv = new_rv if isinstance(new_rv, str) and new_rv else rv
        if kind == "BOOKMARK":
            return rv
        try:
            if kind == "DELETED":
                self._forget(_name(obj))
            elif kind in ("ADDED", "MODIFIED"):
                self._note(obj)
                if to_csr(obj).pending:
                    self._handle(obj)
            else:
                raise Malformed(f"unknown event type {kind[:40]!r}")
        except Malformed as exc:
            self.log(_malformed(_name_or_unknown(obj), f"watch event: {exc}"))
        return rv


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


def _name_or_unknown(obj: Any) -> str:
    try:
        return _name(obj)
    except Malformed:
        return "?"


def _retryable(exc: Exception) -> bool:
    """Transport trouble, garbage and server hiccups retry; refused credentials and bugs do not."""
    import httpx2

    if isinstance(exc, ApiStatus):
        return exc.code not in (401, 403)
    return isinstance(exc, httpx2.HTTPError | ClusterError | OSError)


def _cluster_error(server: str, exc: Exception) -> ClusterError:
    import httpx2

    if isinstance(exc, ApiStatus):
        hint = " (may upi's credentials read and approve CSRs?)" if exc.code in (401, 403) else ""
        return ClusterError(f"{server} answered {exc}{hint}")
    if isinstance(exc, ClusterError):
        return ClusterError(f"{server}: {exc}")
    if isinstance(exc, httpx2.HTTPError | OSError):
        why = str(exc) or type(exc).__name__
        return ClusterError(f"cannot reach the API at {server}: {why}")
    raise exc


def _with_approval(obj: dict[str, Any], decision: Approve) -> dict[str, Any]:
    """The whole object (its resourceVersion included) plus an Approved condition."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cond = {"type": "Approved", "status": "True", "reason": "UpiInventoryMatch", "lastUpdateTime": now,
            "message": f"{decision.kind} CSR of {decision.node}, a node of the inventory (upi approve-csr)"}
    status = dict(obj.get("status") or {})
    status["conditions"] = [*(status.get("conditions") or []), cond]
    return {**obj, "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "status": status}


def _record(csr: Csr, decision: Decision, dry_run: bool) -> Record:
    if isinstance(decision, Approve):
        action = "would-approve" if dry_run else "approved"
        reason = f"{decision.kind} CSR of inventory node {decision.node}"
        return Record(csr.name, action, decision.kind, decision.node, csr.signer, csr.username, reason)
    if isinstance(decision, Hold):
        return Record(csr.name, "held", decision.kind, decision.node, csr.signer, csr.username,
                      decision.reason)
    return Record(csr.name, "skipped", decision.kind, decision.node, csr.signer, csr.username,
                  decision.reason)


def run_once(conn: Connection, identities: dict[str, NodeIdentity], *, dry_run: bool = False,
             log: Callable[[Record], None] | None = None,
             release: frozenset[str] = frozenset()) -> list[Record]:
    """One pass (or, with `release`, the named held CSRs); API failures become ClusterError."""
    try:
        return Approver(conn, identities, dry_run=dry_run, log=log, release=release).once()
    except Exception as exc:  # noqa: BLE001 - mapped to a user-facing error, or re-raised
        raise _cluster_error(conn.server, exc) from None
