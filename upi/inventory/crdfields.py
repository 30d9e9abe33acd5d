"""An operator object's overrides in the inventory, checked against its CRD's field names.

The inventory may override part of an operator's object: `gpu.cluster_policy`
(ClusterPolicy), `network_operator.nic_cluster_policy` (NicClusterPolicy),
`gpu_pool.tuning.performance_profile` (PerformanceProfile). Their CRDs are
structural: the API server prunes a field the schema lacks, and refuses the
object when a value has the wrong shape (Kubernetes docs, "Specifying a
structural schema" and "Field pruning" in custom-resource-definitions). So
validate refuses both first, naming the field, instead of `upi gpu` failing or
an override silently doing nothing. Dotted keys (`driver.rdma.enabled: true`)
are expanded first, along the same tree (`expand`).

upi carries each spec's field tree in a facts JSON beside this module (rebuilt
from tests/data/ by tests/carried_facts.py), the storage version's
openAPIV3Schema, names only:
  {name: tree, ...}  an object and its fields
  {"*": tree}        a map (additionalProperties): any key, each value a `tree`
  {}                 a value (string, number, boolean, int-or-string)
  [tree]             a list whose items are `tree`
  "*"                anything (x-kubernetes-preserve-unknown-fields)
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


def expand(value: dict[str, Any], tree: Any, kind: str) -> dict[str, Any]:
    """Dotted keys (`driver.rdma.enabled: true`) expanded into nested mappings, along the CRD's tree.

    A dotted key is split at each dot down to a map (labels, resources.limits):
    there the rest is one key, as label keys and resource names hold dots
    (`daemonsets.labels.example.com/team`, `nvidia.com/gpu`).
    """
    out: dict[str, Any] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise ValueError(f"{key!r} is not a {kind} spec field (write driver.rdma.enabled)")
        parts, below = _split(key, tree)
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{key!r} sets inside {'.'.join(parts[: i + 1])}, which is not a mapping")
            node = child
        leaf = expand(val, below, kind) if isinstance(val, dict) else val
        if isinstance(node.get(parts[-1]), dict) and isinstance(leaf, dict):
            twice = _shared_leaf(node[parts[-1]], leaf)
            if twice is not None:  # in either order: dotted then nested, or nested then dotted
                raise ValueError(f"'{key}.{twice}' is given twice (once dotted, once nested)")
            node[parts[-1]] = merge(node[parts[-1]], leaf)
        elif parts[-1] in node:
            raise ValueError(f"{key!r} is given twice (once dotted, once nested)")
        else:
            node[parts[-1]] = leaf
    return out


def _split(key: str, tree: Any) -> tuple[list[str], Any]:
    """A dotted key's parts (the rest whole from a map on) and the tree below the last one."""
    parts = key.split(".")
    for i, part in enumerate(parts):
        if isinstance(tree, dict) and OPEN in tree:
            return [*parts[:i], ".".join(parts[i:])], tree[OPEN]
        tree = tree.get(part) if isinstance(tree, dict) else None
    return parts, tree


def _shared_leaf(one: dict[str, Any], other: dict[str, Any]) -> str | None:
    """The first dotted key both mappings set to a value (not both to a mapping), else None."""
    for key, val in other.items():
        if key not in one:
            continue
        if isinstance(val, dict) and isinstance(one[key], dict):
            deeper = _shared_leaf(one[key], val)
            if deeper is not None:
                return f"{key}.{deeper}"
        else:
            return key
    return None


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` merged onto `base`: mappings recursively, anything else replaced."""
    out = dict(base)
    for key, val in overrides.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], val)
        else:
            out[key] = val
    return out


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
        if key not in tree and OPEN not in tree:
            return Misfit(path, str(key), None, val)
        found = _check(val, tree[OPEN] if OPEN in tree else tree[key], f"{path}.{key}" if path else str(key))
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
    if isinstance(tree, list):
        return "a list"
    return ("a map" if OPEN in tree else "an object") if tree else "a value"


def _detail(tree: Any) -> str:
    """What the CRD's list or object holds, for the admin to see what fits."""
    if isinstance(tree, list):
        item = tree[0]
        if item == OPEN or isinstance(item, list) or OPEN in item:
            return " (of lists)" if isinstance(item, list) else " (of maps)"
        return f" (of objects with fields {_names(item)})" if item else " (of values)"
    if OPEN in tree:
        return " (any keys)"
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
