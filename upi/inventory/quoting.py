"""Versions written as YAML numbers: `openshift_version: 4.20` is read as the float 4.2.

The digits YAML dropped cannot be recovered from the value, so the check
reads the scalar as written (its style and raw text) before it is resolved.
"""

from __future__ import annotations

from typing import Any

import yaml

Loc = tuple[str | int, ...]
NUMBER_TAGS = ("tag:yaml.org,2002:float", "tag:yaml.org,2002:int")
VERSION_KEYS: tuple[Loc, ...] = (("cluster", "openshift_version"),)


def _node_at(root: yaml.Node, loc: Loc) -> yaml.Node | None:
    node: yaml.Node | None = root
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if k.value == part), None)
    return node


def unquoted_versions(root: yaml.Node, data: Any) -> list[tuple[Loc, str]]:
    """(loc, message) for each version written as a plain number; puts the raw text into `data`.

    With the text as written in `data`, validation goes on to report any other problem
    once; the message already makes this one an error.
    """
    found = []
    for loc in VERSION_KEYS:
        node = _node_at(root, loc)
        if not isinstance(node, yaml.ScalarNode) or node.style or node.tag not in NUMBER_TAGS:
            continue
        raw = str(node.value)
        found.append((loc, f"{raw} must be quoted: written without quotes, YAML reads it as the "
                           f"number {yaml.safe_load(raw)!r} and may drop digits; write "
                           f"{loc[-1]}: \"{raw}\""))
        parent = data
        for part in loc[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent[loc[-1]] = raw
    return found
