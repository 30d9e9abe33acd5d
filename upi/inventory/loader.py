"""Load an inventory file: safe YAML with line numbers, one error per problem."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.constructor import ConstructorError

from upi.errors import InventoryError, Problem
from upi.inventory import fastyaml
from upi.inventory.messages import Written, sentence, union_sentence, unknown_key
from upi.inventory.model import Inventory
from upi.inventory.quoting import VERSION_KEYS, unquoted_versions
from upi.inventory.rules import check_rules
from upi.inventory.yamlbounds import check_depth, check_graph, needs_graph_check
from upi.safefs import UnreadableFile, read_named_text

log = logging.getLogger(__name__)

try:  # libyaml parses a 5,000-node inventory ~10x faster than pure Python, same marks
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


_STR_TAG = "tag:yaml.org,2002:str"


class _SafeLoader(_BaseLoader):
    """Safe YAML that notices duplicate keys while it builds each mapping.

    Every key of an inventory is a name: a list, a mapping, a number or
    `yes` as a key is refused where it is, with its line, before any of
    it reaches the model (a list key would not even hash).
    """

    duplicate_keys = False

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag != _STR_TAG:
                what = repr(key.value) if isinstance(key, yaml.ScalarNode) else f"a {key.id}"
                raise ConstructorError(None, None, f"a key must be a plain name, not {what}",
                                       key.start_mark)
        keys = [key.value for key, _ in node.value]
        if len(keys) != len(set(keys)):
            self.duplicate_keys = True
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An int, or a located error for one too long to convert (Python's 4,300-digit limit)."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise ConstructorError(None, None, f"the number {node.value[:20]}... is too long",
                                   node.start_mark) from None


_SafeLoader.add_constructor("tag:yaml.org,2002:int", _SafeLoader.construct_yaml_int)

Loc = tuple[str | int, ...]


def field_path(loc: Iterable[str | int]) -> str:
    """('nodes', 4, 'mac') -> 'nodes[4].mac'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Lines:
    """Line of every mapping key / sequence item, and duplicate keys found.

    The walk over the node tree is made only when a line is asked for: a
    valid 5,000-node inventory never pays for it.
    """

    def __init__(self, root: yaml.Node | Callable[[], yaml.Node] | None = None) -> None:
        self.lines: dict[Loc, int] = {}
        self.duplicates: list[tuple[Loc, int]] = []
        self._root = root  # or how to compose it: the fast path keeps no node tree
        self.unquoted: list[tuple[Loc, str]] = []  # versions YAML read as numbers
        self.scalars: dict[Loc, yaml.ScalarNode] = {}  # each value as written, for messages

    def _ensure(self) -> None:
        if self._root is not None:
            root, self._root = self._root, None
            self.walk(root() if callable(root) else root)

    def walk(self, node: yaml.Node, loc: Loc = (), seen_nodes: set[int] | None = None) -> None:
        """Lines under `node`; an alias (a node met before) is not walked again.

        Aliases share their node, so a 600-byte file of nested aliases is a
        tree of billions of paths: walking each node once keeps the walk as
        long as the file, and a problem under an alias points at the alias.
        """
        seen_nodes = set() if seen_nodes is None else seen_nodes
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if id(node) in seen_nodes:
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                child = (*loc, name)
                if name in seen:
                    self.duplicates.append((child, key.start_mark.line + 1))
                seen.add(name)
                self.lines[child] = key.start_mark.line + 1
                self.walk(value, child, seen_nodes)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.walk(item, (*loc, i), seen_nodes)
        elif isinstance(node, yaml.ScalarNode):
            self.scalars[loc] = node

    def written(self, loc: Loc) -> Written | None:
        """The scalar at `loc` as the file spells it (None: not a scalar, or not in the file)."""
        self._ensure()
        node = self.scalars.get(loc)
        if node is None:
            return None
        return Written(str(node.value), str(node.tag), not node.style)

    def line_of(self, loc: Loc) -> int | None:
        """Line of the deepest part of `loc` that exists in the file."""
        self._ensure()
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return None


def _compose(text: str) -> yaml.Node:
    loader = _SafeLoader(text)
    try:
        root = loader.get_single_node()
    finally:
        loader.dispose()
    assert root is not None  # noqa: S101 - the fast path loaded a document from this text
    return root


def _fast(text: str) -> tuple[Any, _Lines] | None:
    """A plain inventory from libyaml's events (fastyaml.py); None: take the full path."""
    if needs_graph_check(text):
        return None
    loader = _SafeLoader(text)
    try:
        data = fastyaml.load(loader)
    except fastyaml.Unusual:
        return None
    finally:
        loader.dispose()
    for loc in VERSION_KEYS:  # a version written as a number: the full path reads its raw text
        value: Any = data
        for part in loc:
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, str):
            return None
    return data, _Lines(lambda: _compose(text))


def _parse(text: str, name: str) -> tuple[Any, _Lines]:
    check_depth(text, name)
    fast = _fast(text)
    if fast is not None:
        return fast
    try:
        loader = _SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                raise InventoryError([Problem(name, None, "", "the file is empty; see docs/inventory.md")])
            if needs_graph_check(text):  # aliases, or indented past any real inventory
                check_graph(root, name)
            data = loader.construct_document(root)
            lines = _Lines(root)
            lines.unquoted = unquoted_versions(root, data)
            if loader.duplicate_keys:
                lines.line_of(())  # walks the tree, which lists the duplicates
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        kind = "YAML error" if isinstance(exc, ConstructorError) else "YAML syntax error"
        msg = f"{kind}: {exc.problem or exc}"
        raise InventoryError([Problem(name, line, "", msg)]) from None
    except yaml.YAMLError as exc:
        raise InventoryError([Problem(name, None, "", f"YAML error: {exc}")]) from None
    return data, lines


def _problems(exc: ValidationError, name: str, lines: _Lines) -> list[Problem]:
    """One problem per key, in our own words (a key of several types gets one sentence)."""
    by_loc: dict[Loc, list[dict[str, Any]]] = {}
    for err in exc.errors():
        by_loc.setdefault(_pydantic_loc(dict(err)), []).append(dict(err))
    out = []
    for loc, errs in by_loc.items():
        key = str(next((p for p in reversed(loc) if isinstance(p, str)), ""))
        written = lines.written(loc)
        if errs[0]["type"] == "extra_forbidden":
            msg = unknown_key(loc)
        elif len(errs) > 1:
            msg = union_sentence(errs, key, written)
        else:
            msg = sentence(errs[0], key, written)
        out.append(Problem(name, lines.line_of(loc), field_path(loc), msg))
    return out


def _pydantic_loc(err: dict[str, Any]) -> Loc:
    # Tagged unions and `X | None` add type names to loc; keep only real keys.
    return tuple(p for p in err["loc"] if isinstance(p, int) or not _is_type_tag(str(p)))


def _is_type_tag(part: str) -> bool:
    return part[:1].isupper() or "[" in part or part in ("str", "int", "bool", "float")


Rule = Callable[[Inventory], Iterable[tuple[Loc, str]]]


def parse_inventory(text: str, path: Path, *, check_files: bool = True,
                    extra_rules: Sequence[Rule] = ()) -> Inventory:
    """Validate inventory text; `path` names it in errors and anchors relative paths."""
    name = str(path)
    data, lines = _parse(text, name)
    problems = [
        Problem(name, line, field_path(loc), "duplicate key (YAML keeps only the last one)")
        for loc, line in lines.duplicates
    ]
    problems += [Problem(name, lines.line_of(loc), field_path(loc), msg) for loc, msg in lines.unquoted]
    if not isinstance(data, dict):
        top = "the top level must be a mapping (cluster:, network:, ...)"
        raise InventoryError([Problem(name, 1, "", top)])
    if "source" in data:
        problems.append(Problem(name, lines.line_of(("source",)), "source", unknown_key(("source",))))
    try:
        inv = Inventory.model_validate({k: v for k, v in data.items() if k != "source"})
    except ValidationError as exc:
        problems += _problems(exc, name, lines)
        raise InventoryError(problems) from None
    inv = inv.model_copy(update={"source": path})
    findings = list(check_rules(inv, check_files=check_files))
    for rule in extra_rules:
        findings.extend(rule(inv))
    for loc, message in findings:
        problems.append(Problem(name, lines.line_of(loc), field_path(loc), message))
    if problems:
        raise InventoryError(problems)
    return inv


INVENTORY_LIMIT = 16 << 20


def load_inventory(path: str | Path, *, check_files: bool = True,
                   extra_rules: Sequence[Rule] = ()) -> Inventory:
    """Read and validate an inventory file; raises InventoryError listing every problem.

    `check_files=False` skips reading the pull secret and SSH key, for commands
    (approve-csr, check) that run where those files are not deployed;
    `extra_rules` add located checks of their own (power: the BMC credentials).
    """
    path = Path(path)
    if not path.exists():
        raise InventoryError([Problem(str(path), None, "", "no such inventory file")])
    try:  # a FIFO or /dev/zero named as the inventory must not hang upi
        text = read_named_text(path, INVENTORY_LIMIT)
    except UnreadableFile as exc:
        raise InventoryError([Problem(str(path), None, "", f"cannot read the inventory: {exc}")]) from None
    inv = parse_inventory(text, path, check_files=check_files, extra_rules=extra_rules)
    log.debug("read the inventory %s: cluster %s, %d nodes", path, inv.cluster.domain, len(inv.nodes))
    return inv
