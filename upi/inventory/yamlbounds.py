"""Bounds on the shape of an inventory's YAML, checked before anything walks it.

A few hundred bytes of YAML can nest thousands of levels deep (libyaml's
composer recurses in C and crashes the interpreter; Python's walks raise
RecursionError) or, through aliases, stand for billions of values. Real
inventories nest about six levels and hold tens of thousands of values.
"""

from __future__ import annotations

import re

import yaml

from upi.errors import InventoryError, Problem

MAX_DEPTH = 100
MAX_VALUES = 1_000_000
_BRACKETS = re.compile(r"[\[\]{}]")
# Two or more `- `/`? ` in a row; written out, not as {2,}: re scans a 5,000-node file 4x faster.
_BLOCK_RUN = re.compile(r"(?:[-?][ \t]+)(?:[-?][ \t]+)+")
_DEEP_INDENT = re.compile(rf"^[ \t]{{{MAX_DEPTH},}}", re.MULTILINE)


def check_depth(text: str, name: str) -> None:
    """Refuse text that may nest deeper than MAX_DEPTH, before libyaml composes it.

    An upper bound, read without parsing: the running depth of flow brackets
    plus the longest run of `- `/`? ` on one line (each opens a block level).
    """
    depth, deepest_at = 0, -1
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        if depth > MAX_DEPTH:
            deepest_at = m.start()
            break
    if deepest_at < 0:
        runs = [m for m in _BLOCK_RUN.finditer(text) if len(m.group().split()) + depth > MAX_DEPTH]
        deepest_at = runs[0].start() if runs else -1
    if deepest_at >= 0:
        line = text.count("\n", 0, deepest_at) + 1
        raise InventoryError([Problem(name, line, "", f"YAML nested more than {MAX_DEPTH} levels deep")])


def needs_graph_check(text: str) -> bool:
    """Aliases (`*`) or an indentation deeper than MAX_DEPTH: the composed graph must be checked."""
    return "*" in text or _DEEP_INDENT.search(text) is not None


def check_graph(root: yaml.Node, name: str) -> None:
    """Refuse a document nested deeper than MAX_DEPTH or standing for more than MAX_VALUES values.

    Counted over the node graph, each node once (an alias shares its node),
    without expanding anything and without recursion.
    """
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if depth > MAX_DEPTH:
            _refuse(name, node, f"YAML nested more than {MAX_DEPTH} levels deep")
        if id(node) in size:
            continue
        kids = _children(node)
        if children_done or not kids:
            size[id(node)] = 1 + sum(size[id(k)] for k in kids)
            if size[id(node)] > MAX_VALUES:
                _refuse(name, node, f"YAML aliases here expand to more than {MAX_VALUES:,} values "
                                    "(an alias bomb?)")
            continue
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in kids if id(k) not in size)


def _refuse(name: str, node: yaml.Node, message: str) -> None:
    raise InventoryError([Problem(name, node.start_mark.line + 1, "", message)])


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
