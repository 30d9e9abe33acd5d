"""Registry credentials from a pull secret (containers-auth.json(5) keys).

A key is a registry (`host[:port]`) or a repository under it
(`host[:port]/namespace/repo`); the most specific key matching an image
wins, as containers-auth.json(5) says. Legacy keys written as URLs
(`https://host/v1/`) name their host. Values never leave this module but as
the (user, password) the registry client sends.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any


def _key_name(key: str) -> str:
    if "://" in key:
        key = key.split("://", 1)[1].split("/", 1)[0]
    return key.rstrip("/")


def credentials_for(secret_text: str, registry: str, repository: str) -> tuple[str, str] | None:
    """(user, password) for registry/repository from a pull secret's JSON, or None."""
    try:
        auths: Any = json.loads(secret_text).get("auths")
    except (ValueError, AttributeError):
        return None
    if not isinstance(auths, dict):
        return None
    name = f"{registry}/{repository}".rstrip("/")
    best: tuple[int, tuple[str, str]] | None = None
    for key, entry in auths.items():
        scope = _key_name(str(key))
        if not (name == scope or name.startswith(f"{scope}/")):
            continue
        pair = _decode(entry)
        if pair is not None and (best is None or len(scope) > best[0]):
            best = (len(scope), pair)
    return best[1] if best else None


def _decode(entry: Any) -> tuple[str, str] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("auth"), str):
        return None
    try:
        text = base64.b64decode(entry["auth"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None
