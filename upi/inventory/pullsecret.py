"""The pull secret, read as the installer's Go code reads it, and never quoted back.

Python's json takes NaN and Infinity, which Go's encoding/json refuses; the
installer wants an object `auths` whose every entry has `auth` or
`credsStore`. Problems name the file, a line and the registry, never a byte
of a credential.
"""

from __future__ import annotations

import json
import re
from typing import Any

from upi.inventory.installer_rules import installer_reason
from upi.inventory.types import shown

# A pull secret is a few KB; anything near this is not one (and is read whole).
MAX_PULL_SECRET = 1 << 20


class _NotJson(ValueError):
    """A NaN or Infinity, which Python's json takes and Go's refuses."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(name)


def pull_secret_problems(name: str, text: str) -> list[str]:
    """What the installer (or JSON) refuses in a pull secret; never a byte of its content."""
    again = "download it again from console.redhat.com"
    if len(text) > MAX_PULL_SECRET:
        return [f"{name} is {len(text)} characters long; a pull secret is a few KB: {again}"]
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except _NotJson as exc:
        word = str(exc)
        go = "invalid character 'I' in numeric literal" if word.startswith("-") else \
            f"invalid character '{word[0]}' looking for beginning of value"
        return [f"{name}{_token_line(text, word)} holds {word}, which is not JSON: {again} "
                + installer_reason(go)]
    except json.JSONDecodeError as exc:
        return [f"{name} is not JSON (line {exc.lineno}); {again}"]
    except (ValueError, RecursionError):  # a number past 4,300 digits, nesting past the stack
        return [f"{name} is not a pull secret (a number too long or nesting too deep); {again}"]
    auths = data.get("auths") if isinstance(data, dict) else None
    if not isinstance(auths, dict) or not auths:
        return [f"{name} has no \"auths\" registry credentials; {again} "
                + installer_reason("auths required")]
    problems = []
    for registry, entry in auths.items():
        where = f"{name}{_line_of(text, json.dumps(registry))}"
        if not isinstance(entry, dict | None):
            kind = _go_type(entry)
            problems.append(
                f"{where}: the entry for {shown(registry)} is a JSON {kind}, not an object with "
                "\"auth\" " + installer_reason(f"json: cannot unmarshal {kind} into Go struct field "
                                         "imagePullSecret.auths of type map[string]interface {}"))
        elif entry is None or ("auth" not in entry and "credsStore" not in entry):
            problems.append(
                f"{where}: the entry for {shown(registry)} has neither \"auth\" nor \"credsStore\" "
                + installer_reason(f"pullSecret: {json.dumps(registry)} requires either auth or credsStore"))
    return problems


def _go_type(value: object) -> str:
    """What Go's encoding/json calls a JSON value's type in its errors."""
    return {str: "string", list: "array", bool: "bool"}.get(type(value), "number")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _token_line(text: str, word: str) -> str:
    """` line N` of `word` outside JSON strings (a NaN inside a password is no NaN)."""
    blanked = _JSON_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    return _line_of(blanked, word)


def _line_of(text: str, needle: str) -> str:
    at = text.find(needle)
    return "" if at < 0 else f" line {text.count(chr(10), 0, at) + 1}"
