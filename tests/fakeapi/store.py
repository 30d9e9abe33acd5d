"""The FAKE API server's object store: validation, resourceVersions, watch events, controllers.

Every object written to a kind that has a CRD in tests/data/ is
validated against the real schema first (tests/kube_schema.py): an unknown
field or a wrong type is a 422 Invalid, as the real server answers, and is
recorded in `schema_violations` so a test can also assert none happened.
Core kinds are held to the server's own rules (tests/kube_core.py): every
object's metadata, a Pod's containers, resources and immutable spec, a
Node's taints; a controller's writes are checked the same way.

A kind whose CRD an operator brings is not served until the operator is
installed (`withhold`, then `serve`): until then its URLs answer 404, as a
real server answers for a resource it does not know.

Controllers (tests/fake_gpu.py) act on the store in-process through
`get`/`put`/`set_status`, and are called after every write.

Watches read `events` (fakeapi/handler.py streams them); misbehaviour on demand:
`add_raw_event` sends a line as-is to every watch, `drop_watches` ends every
stream as a server restart does.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from kube_core import core_errors
from kube_schema import has_schema, schema_errors

from fakeapi.kinds import BY_API, KINDS, Kind, Obj, now


class SchemaRejected(Exception):
    """The object breaks its kind's CRD schema (the server's 422)."""


class Store:
    """The objects by (kind, namespace, name), their events, and the controllers that act on them."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1
        self.objects: dict[tuple[Kind, str, str], Obj] = {}
        # fieldManager -> leaf path -> value it applied, per object
        self.owners: dict[tuple[Kind, str, str], dict[str, dict[tuple[str, ...], Any]]] = {}
        self.events: list[tuple[int, Kind | None, str, Obj]] = []  # None: a raw line for every watch
        self.schema_violations: list[str] = []
        self.controller_errors: list[str] = []
        self.controllers: list[Callable[[], None]] = []
        self.unserved: set[Kind] = set()  # CRD kinds not installed yet: their URLs are 404
        self.watch_generation = 0
        self.watches_served = 0
        self.closed = False
        self._in_controllers = False

    def run_controllers(self) -> None:
        with self.lock:
            if self._in_controllers or self.closed:
                return
            self._in_controllers = True
            try:
                for controller in self.controllers:
                    try:
                        controller()
                    except Exception as exc:  # noqa: BLE001 - a test asserts there were none
                        self.controller_errors.append(f"{controller.__name__}: {exc!r}")
            finally:
                self._in_controllers = False

    def withhold(self, api_version: str, kind: str) -> None:
        """Stop serving a kind (its CRD is not installed yet)."""
        self.unserved.add(self.kind(api_version, kind))

    def serve(self, group: str, plural: str) -> bool:
        """Serve the kind of the CRD `<plural>.<group>` once installed; whether the kind is one of ours."""
        found = [k for k in KINDS if (k.group, k.plural) == (group, plural)]
        with self.lock:
            self.unserved.difference_update(found)
        return bool(found)

    # --- the store (controllers and tests) ----------------------------------------
    @staticmethod
    def kind(api_version: str, kind: str) -> Kind:
        return BY_API[(api_version, kind)]

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Obj | None:
        with self.lock:
            obj = self.objects.get((self.kind(api_version, kind), namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        k = self.kind(api_version, kind)
        with self.lock:
            found = [(key[1:], o) for key, o in self.objects.items()
                     if key[0] == k and (namespace is None or key[1] == namespace)]
            return [copy.deepcopy(o) for _, o in sorted(found, key=lambda i: i[0])]

    def put(self, obj: Obj, *, manager: str = "fake-controller") -> Obj:
        """Create or replace an object as a controller does (status included)."""
        k = self.kind(obj["apiVersion"], obj["kind"])
        meta = obj.setdefault("metadata", {})
        key = (k, meta.get("namespace", "") if k.namespaced else "", meta["name"])
        with self.lock:
            old = self.objects.get(key)
            self._validate(k, obj, old)
            self._store(key, obj, old, manager)
            return copy.deepcopy(self.objects[key])

    def set_status(self, api_version: str, kind: str, name: str, namespace: str, st: Obj) -> None:
        """Replace an object's status (what its operator does through /status)."""
        with self.lock:
            key = (self.kind(api_version, kind), namespace, name)
            obj = copy.deepcopy(self.objects[key])
            obj["status"] = st
            self._validate(key[0], obj, self.objects[key])  # an operator's status must fit the schema too
            self._store(key, obj, self.objects[key], "fake-controller")

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        with self.lock:
            key = (self.kind(api_version, kind), namespace, name)
            obj = self.objects.pop(key, None)
            self.owners.pop(key, None)
            if obj is not None:
                self.rv += 1  # a deletion is a change of its own, as watchers resuming from a version see it
                self._event(key[0], "DELETED", obj)

    def _validate(self, k: Kind, obj: Obj, old: Obj | None = None) -> None:
        errors = core_errors(k.kind, obj, old)
        if has_schema(k.api_version, k.kind):
            errors += schema_errors(obj)
        if errors:
            what = f"{k.kind}.{k.group}" if k.group else k.kind
            text = f'{what} "{obj["metadata"].get("name")}" is invalid: ' + "; ".join(errors)
            self.schema_violations.append(text)
            raise SchemaRejected(text)

    def _store(self, key: tuple[Kind, str, str], obj: Obj, old: Obj | None, manager: str) -> bool:
        meta = obj["metadata"]
        if old is not None:
            for field in ("uid", "creationTimestamp"):
                meta[field] = old["metadata"][field]
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            meta.setdefault("generation", old["metadata"].get("generation", 1))
            if json.dumps(obj, sort_keys=True) == json.dumps(old, sort_keys=True):
                return False  # nothing changed: the real server keeps the resourceVersion
            if obj.get("spec") != old.get("spec"):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
        else:
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            if key[0].namespaced:
                meta["namespace"] = key[1]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self._event(key[0], "MODIFIED" if old is not None else "ADDED", obj)
        return True

    def _event(self, k: Kind | None, kind: str, obj: Obj) -> None:
        self.events.append((self.rv, k, kind, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _touch(self, key: tuple[Kind, str, str]) -> None:
        """Another writer changed the object: its resourceVersion moves on (a MODIFIED event)."""
        self.rv += 1
        self.objects[key]["metadata"]["resourceVersion"] = str(self.rv)
        self._event(key[0], "MODIFIED", self.objects[key])

    def _namespace_exists(self, ns: str) -> bool:
        return (self.kind("v1", "Namespace"), "", ns) in self.objects

    # --- watches ------------------------------------------------------------------
    def add_raw_event(self, line: bytes) -> None:
        """Send `line` as-is to every watch, as one event line (a malformed event, for tests)."""
        with self.lock:
            self.rv += 1
            self._event(None, "RAW", {"raw": line})

    def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart does."""
        with self.lock:
            self.watch_generation += 1
            self.changed.notify_all()


def fresh(fake: Store, k: Kind, ns: str, since: int) -> list[tuple[int, str, Obj]]:
    """Events of one kind (and namespace) after resourceVersion `since`, and raw lines for every watch."""
    return [
        (rv, kind, o)
        for rv, kk, kind, o in fake.events
        if rv > since and (kk is None or (kk == k and (not ns or o["metadata"].get("namespace", "") == ns)))
    ]
