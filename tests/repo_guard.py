"""The suite reads nothing outside the repository: no test opens the reference data beside it.

The upstream facts the tests need live in tests/data/ (tests/data/extract.py
writes them from the reference data, a `shared/` directory beside the
repository that a clone does not have). Two guards keep it that way:

- `shared_paths(source)`: a static scan of a test module for string constants
  that use `shared` as a path component (`ROOT.parent / "shared"`,
  `"../shared/data/gpu/x.yaml"`); docstrings are prose and are not paths.
- `install()`: an audit hook (PEP 578) that records every open, listdir or
  scandir of a path under the watched directories in `READS`; tests/conftest.py
  fails the test (and the session) in which one happened.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
READS: list[str] = []
_WATCHED: list[str] = []
_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob"})
_COMPONENT = re.compile(r"(^|[/\\])shared([/\\]|$)")


def watched_path(target: Any) -> str | None:
    """The absolute path an audited call names, when it lies under a watched directory."""
    if target is None or isinstance(target, int):
        return None
    try:
        path = os.path.abspath(os.fsdecode(os.fspath(target)))
    except (TypeError, ValueError, OSError):
        return None
    for top in _WATCHED:
        if path == top or path.startswith(top + os.sep):
            return path
    return None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in _EVENTS and _WATCHED and args:
        found = watched_path(args[0])
        if found is not None:
            READS.append(found)


def watch(directory: Path) -> None:
    """Record reads under `directory` (its real path too, when it is reached through a link)."""
    for form in {os.path.abspath(directory), os.path.realpath(directory)}:
        if form not in _WATCHED:
            _WATCHED.append(form)


def unwatch(directory: Path) -> None:
    for form in {os.path.abspath(directory), os.path.realpath(directory)}:
        if form in _WATCHED:
            _WATCHED.remove(form)


_installed = False


def install() -> None:
    """Add the audit hook once per process (hooks cannot be removed) and watch SHARED."""
    global _installed  # noqa: PLW0603 - one hook per interpreter, by the audit API's design
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    watch(SHARED)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def shared_paths(source: str, filename: str = "<test module>") -> list[str]:
    """`file:line: 'constant'` for each string constant that uses `shared` as a path component."""
    tree = ast.parse(source, filename)
    prose = _docstrings(tree)
    return [f"{filename}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
            and _COMPONENT.search(node.value)]
