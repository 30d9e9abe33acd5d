"""Our own sentence for every validation error: never the validation library's wording.

pydantic's messages ("Input should be a valid string", "String should match
pattern '...'", "unable to parse string as an integer") name its types, not
the admin's file. Each error type it can raise for this model is turned into
a sentence that says what the key wants, shows the value as written in the
YAML file, and for a value YAML read as a number or a boolean (an unquoted
MAC `52:54:00:21:03:53` is a sexagesimal integer in YAML 1.1) says to quote it.
An unknown key gets the nearest known key of its own section (difflib).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from upi.inventory.model import Inventory

Loc = tuple[str | int, ...]

_NUMBER_TAGS = {"tag:yaml.org,2002:int": "a number", "tag:yaml.org,2002:float": "a number",
                "tag:yaml.org,2002:bool": "a boolean (true/false)",
                "tag:yaml.org,2002:null": "empty (null)",
                "tag:yaml.org,2002:timestamp": "a date"}


@dataclass(frozen=True)
class Written:
    """A scalar as the YAML file spells it: its text, the tag YAML resolved, and whether plain."""

    text: str
    tag: str
    plain: bool


def _kind(value: object) -> str:
    """What a value YAML produced is, in words."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "text"


def _shown(value: object, written: Written | None) -> str:
    if isinstance(value, bool):
        return written.text if written is not None else str(value).lower()
    if isinstance(value, int | float):
        text = written.text if written is not None else str(value)
        return text if len(text) <= 60 else text[:57] + "..."
    if written is not None:
        text = written.text
    elif isinstance(value, list | dict):
        return _kind(value)
    else:
        text = str(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _quote_it(key: str, written: Written, value: object) -> str | None:
    """The sentence for text that YAML read as another type because it was not quoted."""
    what = _NUMBER_TAGS.get(written.tag)
    if not written.plain or what is None or value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        what = f"the number {value!r}"
    return f"{written.text} is not quoted, so YAML read it as {what}; quote it: {key}: \"{written.text}\""


def _number(text: str) -> bool:
    """Whether `text` is a plain ASCII number (what a quoted 22 or 2.5 looks like)."""
    digits = text.strip().replace(".", "", 1)
    return digits.isascii() and digits.isdigit()


def _bound(ctx: dict[str, Any]) -> str:
    for name, words in (("ge", "at least"), ("gt", "more than"), ("le", "at most"),
                        ("lt", "less than")):
        if name in ctx:
            limit = ctx[name]
            if isinstance(limit, float) and limit.is_integer():
                limit = int(limit)
            return f"{words} {limit}"
    return "within its range"


def _expected(kind: str) -> str | None:
    """What a key of this error type wants, in words (None: the type carries no wish)."""
    return {
        "string_type": "text",
        "int_type": "a whole number (written without quotes)",
        "int_parsing": "a whole number (written without quotes)",
        "int_from_float": "a whole number (no fraction)",
        "float_type": "a number (written without quotes)",
        "float_parsing": "a number (written without quotes)",
        "bool_type": "true or false",
        "bool_parsing": "true or false",
        "list_type": "a list (one `- item` per line, or [a, b])",
        "dict_type": "a mapping (key: value lines)",
        "model_type": "a mapping (key: value lines)",
        "model_attributes_type": "a mapping (key: value lines)",
    }.get(kind)


def sentence(err: dict[str, Any], key: str, written: Written | None) -> str:
    """Our message for one pydantic error at a key (the key's own name, for a quoting hint)."""
    kind, value = err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":  # our own validators' words
        return str(err["msg"]).removeprefix("Value error, ")
    shown = _shown(value, written)
    if kind == "string_type" and written is not None:
        quoted = _quote_it(key, written, value)
        if quoted:
            return quoted
    if kind in ("int_type", "float_type") and isinstance(value, str) and _number(value):
        return f"{value!r} is quoted, so it is text; write the number without quotes: {key}: {value}"
    wants = _expected(kind)
    if wants is not None:
        if value is None:
            return f"is empty: write {wants}"
        return f"must be {wants}, not {shown}" + (
            f" ({_kind(value)})" if not isinstance(value, list | dict) else "")
    return _limits(kind, shown, ctx) or f"{shown} is not a valid value here (see docs/inventory.md)"


def _limits(kind: str, shown: str, ctx: dict[str, Any]) -> str | None:
    """Ranges, choices and lengths."""
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{shown} is out of range: it must be {_bound(ctx)}"
    if kind in ("literal_error", "enum"):
        return f"{shown} is not one of {ctx.get('expected', 'the allowed values')}"
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return f"must list at least {n} item{'' if n == 1 else 's'}"
    if kind == "too_long":
        return f"must list at most {ctx.get('max_length')} items"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"{shown} is too long: at most {ctx.get('max_length')} characters"
    return None


def union_sentence(errs: Sequence[dict[str, Any]], key: str, written: Written | None) -> str:
    """One sentence for a key that may take several types (`verify_tls: true | "ca.pem"`)."""
    wants = [w for e in errs if (w := _expected(e["type"])) is not None]
    own = [e for e in errs if e["type"] == "value_error"]
    if own:
        return sentence(own[0], key, written)
    value = errs[0].get("input")
    if not wants:
        return sentence(errs[0], key, written)
    items = [w.replace("true or false", "true, false") for w in dict.fromkeys(wants)]
    either = items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
    return f"must be {either}, not {_shown(value, written)}"


# --- unknown keys: the nearest known key of the same section ----------------------------------

def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (through `X | None`, `list[X]`, `Annotated[X, ...]`)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def known_keys(section: Loc) -> list[str]:
    """The keys the inventory allows at `section` (() for the top level), in model order."""
    model: type[BaseModel] | None = Inventory
    for part in section:
        if model is None:
            return []
        if isinstance(part, int):
            continue  # an item of a list: the same model
        field = model.model_fields.get(part)
        model = _model_of(field.annotation) if field is not None else None
    if model is None:
        return []
    return [name for name, f in model.model_fields.items() if not f.exclude]


def unknown_key(loc: Loc) -> str:
    """`unknown key 'adress': did you mean 'address'?`, or the keys allowed there."""
    key = str(loc[-1]) if loc else ""
    keys = known_keys(loc[:-1])
    near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6) or \
        difflib.get_close_matches(key.lower().replace("-", "_"), keys, n=1, cutoff=0.6)
    if near:
        return f"unknown key {key!r}: did you mean {near[0]!r}? (docs/inventory.md lists the keys)"
    if keys:
        return f"unknown key {key!r}; the keys here are: {', '.join(keys)}"
    return f"unknown key {key!r} (docs/inventory.md lists the keys)"
