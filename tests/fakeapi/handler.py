"""The FAKE API server's HTTP side: authentication, routing, the verbs, watches, pod logs.

It speaks what upi's clients, lightkube and kubectl use, as the real server
does: client-certificate authentication (the admin kubeconfig, tests/kube_tls.py)
or a bearer token from `user_tokens` or `tokens` (kube-apiserver's token
authenticators, "Authorization: Bearer <token>", docs: Authenticating), anything
else a 401; legacy discovery of every served kind and Table output for `kubectl get`
(tests/kube_wire.py); the real URL paths for core and group resources,
cluster-scoped and namespaced kinds, get/list (label selectors)/watch
(chunked JSON events)/create/replace/delete, pod logs, list field selectors
(fakeapi/selectors.py); a CSR's /approval takes the protobuf body kubectl sends
(tests/kube_proto.py). Nodes take merge PATCH (spec.unschedulable, as
`kubectl cordon`) and DELETE.

Misbehaviour on demand (hostile tests): `tamper(method, path)` returns raw
bytes to send instead of the real answer.
"""

from __future__ import annotations

import copy
import json
import ssl
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from kube_proto import decode_csr_approval
from kube_wire import TABLE_ACCEPT, discovery, send_tampered, status, table

from fakeapi.kinds import BY_PATH, KINDS, Kind, Obj
from fakeapi.selectors import field_selects, field_terms, selects
from fakeapi.store import fresh

if TYPE_CHECKING:
    from fakeapi.server import FakeApiServer


def _parse_path(path: str) -> tuple[Kind, str, str | None, str | None] | None:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    ns = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    elif len(rest) == 2 and rest[0] == "namespaces":
        rest = ["namespaces", rest[1]]
    if not rest:
        return None
    k = BY_PATH.get((group, version, rest[0]))
    if k is None:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return k, ns, name, sub


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, answered from the store of `self.fake`."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    unknown = False  # the last request named a kind that is not served

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's signature
        pass

    @property
    def fake(self) -> FakeApiServer:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def _send(self, code: int, doc: Obj | str) -> None:
        body = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(doc, str) else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _tampered(self) -> bool:
        """A request without credentials gets 401; a test's tamper answers instead of the server."""
        return not self._authenticated() or send_tampered(self, self.fake.tamper, self.command)

    def _authenticated(self) -> bool:
        if self.connection.getpeercert():  # type: ignore[attr-defined]
            return True
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme == "Bearer" and (token in self.fake.user_tokens or token in self.fake.tokens):
            return True
        self._body()
        self._send(401, status(401, "Unauthorized", "Unauthorized"))
        return False

    def _route(self) -> tuple[tuple[Kind, str, str | None, str | None] | None, dict[str, str]]:
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with self.fake.lock:
            self.fake.requests.append((self.command, url.path, self.headers.get("Content-Type", "")))
            route = _parse_path(url.path)
            self.unknown = route is not None and route[0] in self.fake.unserved
        return (None if self.unknown else route), q

    def _not_served(self) -> bool:
        """A kind whose CRD is not installed: 404 for every verb, as the real server answers."""
        if self.unknown:
            self._body()  # read it, or the next request on this connection starts inside it
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return True
        return False

    def _named(self) -> tuple[tuple[Kind, str, str, str | None] | None, dict[str, str]]:
        """The route of a request that must name an object; None when answered already.

        Answered: without credentials (401), by a test's tamper, for a kind not
        served (404), or when the path names no object (405).
        """
        if self._tampered():
            return None, {}
        route, q = self._route()
        if self._not_served():
            return None, q
        if route is None or route[2] is None:
            self._body()
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return None, q
        k, ns, name, sub = route
        return (k, ns, name, sub), q

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, q = self._route()
        path = urlsplit(self.path).path
        if path == "/version":
            self._send(200, {"major": "1", "minor": "29", "gitVersion": "v1.29.6+fake"})
            return
        with self.fake.lock:
            doc = discovery(path, [k for k in KINDS if k not in self.fake.unserved])
        if doc is not None:
            self._send(200, doc)
            return
        if route is None:
            self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        k, ns, name, sub = route
        if name is None and q.get("watch") in ("true", "1"):
            self._watch(k, ns, q)
        elif name is None:
            self._list(k, ns, q)
        elif sub == "log" and k.kind == "Pod":
            self._log(ns, name, q)
        else:
            with self.fake.lock:
                obj = copy.deepcopy(self.fake.objects.get((k, ns, name)))
                rv = str(self.fake.rv)
            if obj is None:
                self._send(404, k.not_found(name))
            elif TABLE_ACCEPT in self.headers.get("Accept", ""):
                self._send(200, table(k.kind, [obj], rv))
            else:
                self._send(200, obj)

    def _list(self, k: Kind, ns: str, q: dict[str, str]) -> None:
        terms = field_terms(q.get("fieldSelector", ""))
        if isinstance(terms, str):
            self._send(400, status(400, "BadRequest", terms))
            return
        with self.fake.lock:
            items = [
                copy.deepcopy(o)
                for (kk, n, _), o in self.fake.objects.items()
                if kk == k
                and (not ns or n == ns)
                and selects(q.get("labelSelector", ""), o["metadata"].get("labels") or {})
                and field_selects(terms, o)
            ]
            rv = str(self.fake.rv)
        if TABLE_ACCEPT in self.headers.get("Accept", ""):
            self._send(200, table(k.kind, items, rv))
            return
        self._send(200, {"apiVersion": k.api_version, "kind": f"{k.kind}List",
                         "metadata": {"resourceVersion": rv}, "items": items})

    def _log(self, ns: str, name: str, q: dict[str, str]) -> None:
        with self.fake.lock:
            pod = self.fake.objects.get((self.fake.kind("v1", "Pod"), ns, name))
            if pod is None:
                self._send(404, status(404, "NotFound", f'pods "{name}" not found'))
                return
            containers = [c["name"] for c in pod["spec"].get("containers", [])]
            container = q.get("container") or (containers[0] if len(containers) == 1 else "")
            if not container:
                self._send(
                    400,
                    status(
                        400,
                        "BadRequest",
                        f"a container name must be specified for pod {name}, choose one of: {containers}",
                    ),
                )
                return
            text = self.fake.pod_logs.get((ns, name, container))
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            waiting = next((((s.get("state") or {}).get("waiting") or {}).get("reason")
                            for s in statuses if s.get("name") == container), None)
        if text is None:
            # kubelet's words (pkg/kubelet/kubelet_pods.go validateContainerLogStatus).
            why = ("trying and failing to pull image" if waiting in ("ErrImagePull", "ImagePullBackOff")
                   else "ContainerCreating")
            said = f'container "{container}" in pod "{name}" is waiting to start: {why}'
            self._send(400, status(400, "BadRequest", said))
            return
        lines = text.splitlines(keepends=True)
        if q.get("tailLines"):
            lines = lines[-int(q["tailLines"]) :]
        self._send(200, "".join(lines))

    def _watch(self, k: Kind, ns: str, q: dict[str, str]) -> None:
        fake = self.fake
        since = int(q.get("resourceVersion") or 0)
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.lock:
            fake.watches_served += 1
            gen = fake.watch_generation
            if since == 0:  # no version: the current state as ADDED events, then changes
                backlog = [
                    (int(o["metadata"]["resourceVersion"]), "ADDED", copy.deepcopy(o))
                    for (kk, n, _), o in fake.objects.items()
                    if kk == k and (not ns or n == ns)
                ]
                since = fake.rv
            else:
                backlog = []

        def over() -> bool:
            return fake.closed or fake.watch_generation != gen or time.monotonic() >= deadline

        try:
            while True:
                for rv, kind, obj in backlog:
                    line = (obj["raw"] if kind == "RAW"
                            else json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    since = max(since, rv)
                self.wfile.flush()
                with fake.lock:
                    while not (fresh(fake, k, ns, since) or over()):
                        fake.changed.wait(timeout=min(0.5, max(0.0, deadline - time.monotonic())))
                    if over():
                        break
                    backlog = fresh(fake, k, ns, since)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        if self._tampered():
            return
        route, _ = self._route()
        if self._not_served():
            return
        if route is not None and route[0].kind == "ServiceAccount" and route[2] and route[3] == "token":
            self._send(*self.fake.token_request(route[1], route[2], json.loads(self._body() or b"{}")))
            return
        if route is not None and route[0].kind == "Pod" and route[2] is not None and route[3] == "eviction":
            self._eviction(route[1], route[2])
            return
        if route is None or route[2] is not None:
            self._body()
            self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            return
        k, ns, _, _ = route
        code, doc = self.fake.create(k, ns, json.loads(self._body() or b"{}"))
        self._send(code, doc)

    def _eviction(self, ns: str, name: str) -> None:
        body = json.loads(self._body() or b"{}")
        if body.get("kind") != "Eviction" or body.get("apiVersion") not in ("policy/v1", "policy/v1beta1"):
            self._send(400, status(400, "BadRequest", f"not a policy/v1 Eviction: {body.get('kind')}"))
        elif body.get("metadata", {}).get("name") != name:
            self._send(400, status(400, "BadRequest", "name in URL does not match name in Eviction object"))
        else:
            self._send(*self.fake.evict(ns, name))

    def do_PATCH(self) -> None:  # noqa: N802 - http.server's naming
        route, q = self._named()
        if route is None:
            return
        k, ns, name, sub = route
        code, doc = self.fake.patch(k, ns, name, sub, self._body(), self.headers.get("Content-Type", ""), q)
        self._send(code, doc)

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        route, q = self._named()
        if route is None:
            return
        k, ns, name, sub = route
        raw, ctype = self._body(), self.headers.get("Content-Type", "application/json")
        if ctype.startswith("application/vnd.kubernetes.protobuf") and sub == "approval":
            body = decode_csr_approval(raw)  # what kubectl sends for `certificate approve`
        elif ctype.startswith("application/json"):
            body = json.loads(raw or b"{}")
        else:
            self._send(415, status(415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format: {ctype}"))
            return
        if k.kind == "CertificateSigningRequest" and sub == "approval":
            self._send(*self.fake.approve(name, body))
            return
        with self.fake.lock:
            old = self.fake.objects.get((k, ns, name))
            if old is None:
                self._send(404, k.not_found(name))
                return
            if body.get("metadata", {}).get("resourceVersion") not in (
                None,
                old["metadata"]["resourceVersion"],
            ):
                self._send(
                    409,
                    status(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {k.plural} "{name}": '
                        "the object has been modified; please apply your changes to the "
                        "latest version and try again",
                    ),
                )
                return
            code, doc = self.fake._write(k, (k, ns, name), old, body, sub, q.get("fieldManager") or "unknown")
        self.fake.run_controllers()
        self._send(code, doc)

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's naming
        route, _ = self._named()
        if route is None:
            return
        self._body()  # DeleteOptions (kubectl sends them): read, or the next request starts inside them
        k, ns, name, _ = route
        with self.fake.lock:
            obj = self.fake.objects.get((k, ns, name))
            if obj is None:
                self._send(404, k.not_found(name))
                return
            self.fake.delete(k.api_version, k.kind, name, ns)
        self._send(200, obj)
