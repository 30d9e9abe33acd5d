"""The one Jinja environment: strict, explicit whitespace, filters registered here."""

from __future__ import annotations

import contextlib
import os
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
import yaml


def templates_dir() -> Path:
    """templates/ inside the installed wheel, else the source tree's top level."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("upi templates not found (broken install?)")


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (a PEM trust bundle) as `|` blocks, as the installer's docs write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def _to_yaml(value: Any) -> str:
    text = yaml.dump(value, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False,
                     width=1_000_000)
    return str(text).rstrip("\n")


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs: compiling them costs more than a small render.

    Keyed by template source checksum, so an edited template is recompiled.
    No cache (not an error) where the cache dir cannot be written.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "upi" / f"jinja-{jinja2.__version__}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _QuietCache(str(folder))


class _QuietCache(jinja2.FileSystemBytecodeCache):
    """A bytecode cache that never fails a render: a cache it cannot write is just skipped."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Store compiled code unless the cache dir refuses it."""
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


@cache
def environment() -> jinja2.Environment:
    """StrictUndefined: a missing value is an error, never an empty string in a config."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        # Templates do not change while upi runs: no stat() per get_template (5,000 per render).
        auto_reload=False,
        bytecode_cache=_bytecode_cache(),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml",), default=False,
                                            default_for_string=False),
    )
    env.filters["to_yaml"] = _to_yaml
    env.filters["shquote"] = shlex.quote
    return env


def render_template(name: str, **context: Any) -> str:
    """Render one template from templates/ with `context`."""
    return environment().get_template(name).render(**context)
