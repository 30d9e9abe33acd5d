"""Which objects a request selects: list label and field selectors, a PDB's LabelSelector."""

from __future__ import annotations

from fakeapi.kinds import Obj


def selects(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, val = term.split("!=", 1)
            if labels.get(key) == val:
                return False
        elif "=" in term:
            key, val = term.split("=", 1)
            if labels.get(key.rstrip("=")) != val:
                return False
        elif labels.get(term) is None:
            return False
    return True


# Fields a list may select on (pkg/registry/core/pod/strategy.go PodToSelectableFields, and
# metadata.name/namespace for every kind: staging/src/k8s.io/apiserver/pkg/registry/generic).
_SELECTABLE = {"metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace"),
               "spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase")}


def field_terms(selector: str) -> list[tuple[str, bool, str]] | str:
    """(field, equal?, value) per fieldSelector term, or the server's error for a field it cannot select."""
    terms = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        neg = "!=" in term
        field, _, value = term.partition("!=" if neg else "=")
        field, value = field.rstrip("="), value.lstrip("=")
        if field not in _SELECTABLE:
            return f'field label not supported: {field}'
        terms.append((field, not neg, value))
    return terms


def field_selects(terms: list[tuple[str, bool, str]], obj: Obj) -> bool:
    for field, equal, value in terms:
        section, key = _SELECTABLE[field]
        if ((obj.get(section) or {}).get(key, "") == value) != equal:
            return False
    return True


def matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels; an empty one selects all."""
    if not (selector.get("matchLabels") or {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True
