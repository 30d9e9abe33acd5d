"""An operator object's overrides in the inventory, checked against its CRD's field names.

The inventory may override part of an operator's object: `gpu.cluster_policy`
(ClusterPolicy), `network_operator.nic_cluster_policy` (NicClusterPolicy),
`gpu_pool.tuning.performance_profile` (PerformanceProfile). Their CRDs are
structural: the API server prunes a field the schema lacks, and refuses the
object when a value has the wrong shape (Kubernetes docs, "Specifying a
structural schema" and "Field pruning" in custom-resource-definitions). So
validate refuses both first, naming the field, instead of `upi gpu` failing or
an override silently doing nothing.

upi carries each spec's field tree in a facts JSON beside this module (rebuilt
from tests/data/ by tests/carried_facts.py), the storage version's
openAPIV3Schema, names only:
  {name: tree, ...}  an object and its fields
  {}                 a value (string, number, boolean, int-or-string)
  [tree]             a list whose items are `tree`
  "*"                anything (a map, or x-kubernetes-preserve-unknown-fields)
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, NamedTuple

OPEN = "*"
_SHOWN_FIELDS = 5  # an object's fields a message lists before "..."


@functools.cache
def carried(name: str) -> dict[str, Any]:
    """A facts file upi carries (upi/inventory/<name>), read once."""
    loaded: dict[str, Any] = json.loads((Path(__file__).parent / name).read_text())
    return loaded


class Misfit(NamedTuple):
    """The first override the CRD has no place for."""

    parent: str  # where it sits, dotted from spec ("" at the top, "toolkit.env[0]")
    key: str  # its field name, or "" when the field is known but the value's shape is wrong
    want: Any  # the tree at that place (a shape mismatch); None for an unknown field
    given: Any  # the value the inventory gives


def misfit(overrides: dict[str, Any], tree: Any) -> Misfit | None:
    """The first override (in inventory order) the field tree has no place for; None when all fit."""
    return _check(overrides, tree, "")


def _check(value: Any, tree: Any, path: str) -> Misfit | None:
    if tree == OPEN:
        return None
    if isinstance(tree, list):  # a list: each item against the items' tree
        if not isinstance(value, list):
            return Misfit(path, "", tree, value)
        for i, item in enumerate(value):
            found = _check(item, tree[0], f"{path}[{i}]")
            if found:
                return found
        return None
    if not tree:  # a value: an object or a list has no place here
        return Misfit(path, "", tree, value) if isinstance(value, dict | list) else None
    if not isinstance(value, dict):
        return Misfit(path, "", tree, value)
    for key, val in value.items():
        if key not in tree:
            return Misfit(path, str(key), None, val)
        found = _check(val, tree[key], f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def misfit_message(kind: str, facts: dict[str, Any], overrides: dict[str, Any]) -> str | None:
    """The finding for the first override the CRD lacks, None when every override fits.

    `facts` is a carried facts file: its `specFields` tree, `apiVersion` and,
    for an operator installed from a CSV, the `csv` it comes with.
    """
    found = misfit(overrides, facts["specFields"])
    if found is None:
        return None
    crd = f"the {kind} CRD ({facts['apiVersion']}{', ' + facts['csv'] if 'csv' in facts else ''})"
    if found.want is None:
        dotted = f"{found.parent}.{found.key}" if found.parent else found.key
        return f"{dotted}: {crd} has no field {found.key!r} in {_spec(found.parent)}"
    return (f"{found.parent}: {crd} has {_shape(found.want)} at {_spec(found.parent)}{_detail(found.want)}, "
            f"not {_kind(found.given)}")


def _spec(dotted: str) -> str:
    return f"spec.{dotted}" if dotted else "spec"


def _shape(tree: Any) -> str:
    return "a list" if isinstance(tree, list) else "an object" if tree else "a value"


def _detail(tree: Any) -> str:
    """What the CRD's list or object holds, for the admin to see what fits."""
    if isinstance(tree, list):
        item = tree[0]
        if item == OPEN or isinstance(item, list):
            return " (of mappings)" if item == OPEN else " (of lists)"
        return f" (of objects with fields {_names(item)})" if item else " (of values)"
    return f" (fields {_names(tree)})" if tree else ""


def _names(tree: dict[str, Any]) -> str:
    names = sorted(tree)
    return ", ".join(names[:_SHOWN_FIELDS]) + (", ..." if len(names) > _SHOWN_FIELDS else "")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "a value"
