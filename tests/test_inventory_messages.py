"""Every inventory key's error is our own sentence, located: never the validation library's text.

The walk covers every field of the model (what `upi schema` exports), each fed
values of the wrong type and the wrong shape; plus unknown keys at every level
(the nearest known key is suggested) and MACs YAML reads as numbers.
"""

from __future__ import annotations

import re
import shutil
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import INVENTORIES
from pydantic import BaseModel
from typer.testing import CliRunner

from upi.cli import app
from upi.inventory.model import Inventory

# What pydantic says in its own words (pydantic-core's error messages, e.g. `string_type`
# "Input should be a valid string", `int_parsing` "... unable to parse string as an integer",
# `string_pattern_mismatch` "String should match pattern '...'"), and its repr's "type=".
STOCK = ("should be", "should match", "pattern", "valid integer", "valid string", "valid dictionary",
         "Input", "type=", "Value error", "validation error", "unable to parse", "pydantic")
WRONG_TYPE: list[Any] = [12345, True, "not-a-value", 2.5]
WRONG_SHAPE: list[Any] = [[1, 2], {"a": 1}]


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds, and whether it is a list of them."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin is list:
        inner, _ = _model_in(typing.get_args(annotation)[0])
        return inner, inner is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _fields(model: type[BaseModel], prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out: list[tuple[str | int, ...]] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        path = (*prefix, name)
        out.append(path)
        inner, is_list = _model_in(field.annotation)
        if inner is not None:
            out += _fields(inner, (*path, 0) if is_list else path)
    return out


Path_ = tuple[str | int, ...]


def _sections(model: type[BaseModel], prefix: Path_ = ()) -> list[tuple[Path_, list[str]]]:
    keys = [n for n, f in model.model_fields.items() if not f.exclude]
    out = [(prefix, keys)]
    for name, field in model.model_fields.items():
        inner, is_list = _model_in(field.annotation)
        if inner is not None and not field.exclude:
            out += _sections(inner, (*prefix, name, 0) if is_list else (*prefix, name))
    return out


FIELDS = _fields(Inventory)


def _annotation(path: tuple[str | int, ...]) -> Any:
    model: Any = Inventory
    annotation = None
    for part in path:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        model = _model_in(annotation)[0]
    return annotation
SECTIONS = _sections(Inventory)


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _set(data: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        if isinstance(part, int):
            while len(node) <= part:
                node.append({})
            node = node[part]
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = [] if isinstance(path[path.index(part) + 1], int) else {}
            node = node[part]
    node[path[-1]] = value


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    where = tmp_path_factory.mktemp("messages") / "inventories"
    shutil.copytree(INVENTORIES, where)
    return where, yaml.safe_load((where / "dgxpod.yaml").read_text())


def _validate(where: Path, data: dict[str, Any], name: str) -> tuple[int, str, str]:
    path = where / f"{name}.yaml"
    text = yaml.safe_dump(data, sort_keys=False)
    path.write_text(text)
    result = CliRunner().invoke(app, ["validate", str(path)])
    return result.exit_code, result.stderr, text


def _line_of_key(text: str, path: tuple[str | int, ...]) -> set[int]:
    key = str(next(p for p in reversed(path) if isinstance(p, str)))
    return {i for i, line in enumerate(text.splitlines(), 1)
            if re.match(rf"\s*(- )?{re.escape(key)}:", line)}


def _items_lines(text: str, path: tuple[str | int, ...]) -> set[int]:
    """Lines of a list's items right under the key (`- 1`), where an item's problem points."""
    keys = _line_of_key(text, path)
    lines = text.splitlines()
    out = set()
    for k in keys:
        for j in range(k, min(k + 4, len(lines))):
            if lines[j].lstrip().startswith("- "):
                out.add(j + 1)
    return out


@pytest.mark.parametrize("path", FIELDS, ids=_dotted)
def test_every_field_says_its_error_in_our_words(base, path) -> None:
    import copy

    where, good = base
    seen = 0
    section = _model_in(_annotation(path))[0] is not None
    for i, value in enumerate(WRONG_TYPE + WRONG_SHAPE):
        if section and isinstance(value, dict):
            continue  # a mapping is the right shape for a section: its keys are tested one by one
        data = copy.deepcopy(good)
        _set(data, path, value)
        code, err, text = _validate(where, data, f"case-{_dotted(path)}-{i}")
        assert "Traceback" not in err
        assert [s for s in STOCK if s in err] == [], err
        # The problems about this key (or its items) name it, with the line of the key.
        mine = [ln for ln in err.splitlines() if re.search(rf": {re.escape(_dotted(path))}[.\[:]", ln)]
        if not mine:
            continue  # a value this key takes (free text); other keys' problems, if any, are checked too
        seen += 1
        assert code == 2, err
        assert f"{where}/case-" in mine[0], err
        line = int(re.search(r"\.yaml:(\d+): ", mine[0]).group(1))
        assert line in _line_of_key(text, path) | _items_lines(text, path), (mine[0], text)
    assert seen >= 2, "every key refuses at least a list and a mapping or a number"


@pytest.mark.parametrize(("section", "keys"), SECTIONS,
                         ids=lambda v: (_dotted(v) or "top") if isinstance(v, tuple) else "")
def test_an_unknown_key_suggests_the_nearest_known_key(base, section, keys) -> None:
    import copy

    where, good = base
    for key in keys[:4]:
        typo = key + key[-1]  # one letter too many: `adresss`, `ipp`
        data = copy.deepcopy(good)
        parent: Any = data
        for n, part in enumerate(section):
            if isinstance(part, int):
                while len(parent) <= part:
                    parent.append({})
                parent = parent[part]
            else:
                last = n + 1 < len(section) and isinstance(section[n + 1], int)
                parent = parent.setdefault(part, [] if last else {})
        parent[typo] = "x"
        code, err, _ = _validate(where, data, f"typo-{_dotted(section) or 'top'}-{key}")
        assert code == 2
        field = _dotted((*section, typo))
        assert f": {field}: unknown key {typo!r}: did you mean {key!r}?" in err, err


# Unquoted MACs: YAML 1.1 reads these as numbers (sexagesimal when every group after the
# first is 0-59, hex with 0x, underscores allowed, plain digits) or a float.
MAC_AS_NUMBER = ["52:54:00:21:03:53", "10:20:30:40:50:00", "525400210353", "0x525400210353",
                 "52_54_00_21_03_53", "5254.0021", "052400210353"]


@pytest.mark.parametrize("written", MAC_AS_NUMBER)
def test_a_mac_yaml_read_as_a_number_says_to_quote_it(base, written: str) -> None:
    where, _ = base
    text = (where / "dgxpod.yaml").read_text()
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if '"52:54:00:21:03:53"' in ln)
    path = where / "mac.yaml"
    path.write_text(text.replace('"52:54:00:21:03:53"', written))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"upi: error: {path}:{line}: nodes[0].mac: {written} is not quoted, "
                                    "so YAML read it as the number "), result.stderr
    assert result.stderr.rstrip().endswith(f'quote it: mac: "{written}"')


@pytest.mark.parametrize("written", ["b8:ce:f6:10:33:99", "00:11:22:33:44:55", "52:54:00:21:03:73"])
def test_an_unquoted_mac_yaml_keeps_as_text_is_accepted(base, written: str) -> None:
    where, _ = base
    text = (where / "dgxpod.yaml").read_text()
    path = where / "mac-ok.yaml"
    path.write_text(text.replace('"52:54:00:21:03:53"', written))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
