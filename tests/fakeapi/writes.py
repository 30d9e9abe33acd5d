"""The FAKE API server's writes: create, replace, merge patch, server-side apply, the /status split.

Merge patch (RFC 7386; a strategic merge patch without lists or $-directives,
as `kubectl cordon` sends for a Node's spec.unschedulable), server-side
apply (PATCH application/apply-patch+yaml with fieldManager: fields owned per
manager, 409 on a conflict with another manager unless force, a no-op apply
leaves resourceVersion alone), the /status subresource (writes to the main
resource leave status untouched, and the other way round). Admission plugins a
fake adds may refuse a create.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any

import yaml
from kube_wire import status

from fakeapi.kinds import Kind, Obj
from fakeapi.store import SchemaRejected, Store


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf of a JSON document by path; lists are atomic (one leaf), as SSA treats them by default."""
    if isinstance(obj, dict) and obj:
        out: dict[tuple[str, ...], Any] = {}
        for key, val in obj.items():
            out.update(_leaves(val, (*prefix, str(key))))
        return out
    return {prefix: obj}


def _merge(base: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for key, val in patch.items():
        if val is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), val)
    return out


def _strategic_only(patch: Any) -> bool:
    """Whether a strategic merge patch holds a list or a $-directive (where it is no JSON merge patch)."""
    if isinstance(patch, list):
        return True
    if isinstance(patch, dict):
        return any(str(key).startswith("$") or _strategic_only(val) for key, val in patch.items())
    return False


def _remove(obj: Obj, path: tuple[str, ...]) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


class Writes(Store):
    """The write verbs of the API, on the store; controllers run after each that succeeds."""

    def __init__(self) -> None:
        super().__init__()
        # Admission plugins a fake adds (OpenShift's SCC admission: tests/fake_rdma.py): given the kind,
        # namespace and body of a create, an error answer (code, Status) refuses it; None admits it.
        self.admission: list[Callable[[Kind, str, Obj], tuple[int, Obj] | None]] = []

    def create(self, k: Kind, ns: str, body: Obj) -> tuple[int, Obj]:
        name = body.get("metadata", {}).get("name")
        if not name and body.get("metadata", {}).get("generateName"):
            name = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
            body["metadata"]["name"] = name
        if k.namespaced and not self._namespace_exists(ns):
            return 404, status(404, "NotFound", f'namespaces "{ns}" not found')
        key = (k, ns, name)
        with self.lock:
            if key in self.objects:
                return 409, status(409, "AlreadyExists", f'{k.plural} "{name}" already exists')
            for plugin in self.admission:
                refused = plugin(k, ns, body)
                if refused is not None:
                    return refused
            try:
                self._validate(k, body)
            except SchemaRejected as exc:
                return 422, status(422, "Invalid", str(exc))
            self._store(key, body, None, "create")
            out = copy.deepcopy(self.objects[key])
        self.run_controllers()
        return 201, out

    def patch(
        self, k: Kind, ns: str, name: str, sub: str | None, body: bytes, ctype: str, q: dict[str, str]
    ) -> tuple[int, Obj]:
        key = (k, ns, name)
        with self.lock:
            old = self.objects.get(key)
            if ctype.startswith("application/apply-patch"):
                manager = q.get("fieldManager")
                if not manager:
                    return 400, status(400, "BadRequest", "PATCH with apply requires a fieldManager")
                code, out = self._apply(
                    k, key, old, yaml.safe_load(body) or {}, manager, q.get("force") == "true", sub
                )
            elif ctype.startswith(("application/merge-patch+json", "application/strategic-merge-patch+json")):
                if old is None:
                    return 404, k.not_found(name)
                patch = json.loads(body or b"{}")
                if ctype.startswith("application/strategic-merge-patch") and _strategic_only(patch):
                    # Without lists or $-directives a strategic merge patch is a JSON merge patch
                    # (kubernetes.io, "Update API Objects in Place Using kubectl patch"): `kubectl
                    # cordon`'s is. Merge keys are not modelled: refuse rather than merge wrongly.
                    return 415, status(415, "UnsupportedMediaType", "this fake applies a strategic merge "
                                       "patch only without lists or $-directives")
                new = _merge(old, patch)
                code, out = self._write(k, key, old, new, sub, q.get("fieldManager") or "unknown")
            else:
                return 415, status(415, "UnsupportedMediaType", f"the body was in an unknown format: {ctype}")
        if code < 300:
            self.run_controllers()
        return code, out

    def _apply(
        self,
        k: Kind,
        key: tuple[Kind, str, str],
        old: Obj | None,
        cfg: Obj,
        manager: str,
        force: bool,
        sub: str | None,
    ) -> tuple[int, Obj]:
        if cfg.get("apiVersion") != k.api_version or cfg.get("kind") != k.kind:
            return 400, status(
                400,
                "BadRequest",
                f"apply: apiVersion/kind {cfg.get('apiVersion')}/"
                f"{cfg.get('kind')} does not match the URL ({k.api_version}/{k.kind})",
            )
        if k.namespaced and old is None and not self._namespace_exists(key[1]):
            return 404, status(404, "NotFound", f'namespaces "{key[1]}" not found')
        if old is None:
            cfg.setdefault("metadata", {})["name"] = key[2]
        applied = _applied_fields(k, cfg, sub)
        owners = self.owners.setdefault(key, {})
        conflicts = _conflicts(owners, manager, applied, old)
        if conflicts and not force:
            what = "; ".join(f'conflict with "{m}": .{p}' for p, m in conflicts)
            return 409, status(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {what}")
        new = (
            copy.deepcopy(old)
            if old is not None
            else {"apiVersion": k.api_version, "kind": k.kind, "metadata": {"name": key[2]}}
        )
        if k.namespaced:
            new["metadata"]["namespace"] = key[1]
        for path in owners.get(manager, {}):
            if path not in applied:
                _remove(new, path)  # a field this manager applied before and no longer does
        code, out = self._write(k, key, old, _merge(new, cfg), sub, manager, check_status=False)
        if code < 300:
            # Forced (or equal-valued) fields move to this manager.
            for m in owners:
                owners[m] = {p: v for p, v in owners[m].items() if p not in applied}
            owners[manager] = applied
            out.setdefault("metadata", {})["managedFields"] = [
                {
                    "manager": m,
                    "operation": "Apply" if m == manager else "Update",
                    "apiVersion": k.api_version,
                }
                for m in owners
            ]
        return code, out

    def _write(
        self,
        k: Kind,
        key: tuple[Kind, str, str],
        old: Obj | None,
        new: Obj,
        sub: str | None,
        manager: str,
        check_status: bool = True,
    ) -> tuple[int, Obj]:
        if k.status_subresource and old is not None:
            if sub == "status":
                new = {**copy.deepcopy(old), "status": new.get("status", {})}
            else:
                new["status"] = copy.deepcopy(old.get("status", {}))
                if not new["status"]:
                    new.pop("status")
        elif k.status_subresource and old is None and sub != "status":
            new.pop("status", None)
        try:
            self._validate(k, new, old)
        except SchemaRejected as exc:
            return 422, status(422, "Invalid", str(exc))
        self._store(key, new, old, manager)
        if manager and old is not None:
            # A non-apply write takes ownership of the leaves it changed.
            owners = self.owners.setdefault(key, {})
            before, after = _leaves(old), _leaves(new)
            changed = {p: v for p, v in after.items() if before.get(p) != v}
            if changed and manager not in owners:
                owners[manager] = {}
            for p, v in changed.items():
                for m in owners:
                    owners[m].pop(p, None)
                owners.setdefault(manager, {})[p] = v
        return (201 if old is None else 200), copy.deepcopy(self.objects[key])


def _applied_fields(k: Kind, cfg: Obj, sub: str | None) -> dict[tuple[str, ...], Any]:
    """The leaves an apply configuration sets (identity fields and, off /status, status excluded)."""
    return {
        p: v
        for p, v in _leaves(cfg).items()
        if p[0] not in ("apiVersion", "kind")
        and p[:2] not in (("metadata", "name"), ("metadata", "namespace"))
        and not (k.status_subresource and sub != "status" and p[0] == "status")
    }


def _conflicts(
    owners: dict[str, dict[tuple[str, ...], Any]],
    manager: str,
    applied: dict[tuple[str, ...], Any],
    old: Obj | None,
) -> list[tuple[str, str]]:
    """(field, other manager) where an apply would change a value another manager owns."""
    current = _leaves(old) if old is not None else {}
    return [
        (".".join(p), m)
        for m, fields in owners.items()
        if m != manager
        for p in fields
        if p in applied and current.get(p) != applied[p]
    ]
