"""The one Jinja environment: strict, explicit whitespace, filters registered here."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
import yaml

from upi.errors import RenderError


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


class Block(str):
    """Filter output that may span lines (a whole YAML document): the one kind `_one_line` passes."""

    __slots__ = ()


class LineBreakInValue(ValueError):
    """A value would have started a new line (a new directive) in a rendered file."""


# Anything that ends a line or steers a terminal: C0/C1 controls, NEL, U+2028/9.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


_PASSED = (Block, int, float)


def _one_line(value: Any) -> Any:
    """Every `{{ value }}` stays on its line: no template can emit a new line or directive.

    Validation refuses such values first; this is the second wall. Called for
    every value of every file (115,000 times for 5,000 nodes): a printable
    string, by far the most common, passes on one C-level test.
    """
    if type(value) is str:
        if value.isprintable():  # no control character, no U+2028/9 (neither is printable)
            return value
    elif value is None or isinstance(value, _PASSED):
        return value
    match = _BREAKS.search(str(value))
    if match:
        raise LineBreakInValue(f"{str(value)[:60]!r} holds {match.group()!r}")
    return value


def _to_yaml(value: Any) -> Block:
    text = yaml.dump(value, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False,
                     width=1_000_000)
    return Block(str(text).rstrip("\n"))


def _virt_opt(value: Any) -> str:
    """A virt-install sub-option value: its parser splits on `,` and reads quotes like a shell.

    Quoted only when it holds such characters, so plain paths are written as they are.
    """
    text = str(value)
    if not re.search(r"[,'\"\\\s]", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _xml_comment(value: Any) -> str:
    """Text safe inside an XML comment, where `--` is forbidden (an IDN label `xn--...` has it)."""
    return re.sub("-(?=-)", "- ", str(value))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs: compiling them costs more than a small render.

    Keyed by template source checksum, so an edited template is recompiled;
    the folder is keyed by this module, because the environment's options
    (autoescape, finalize) are compiled into the bytecode too.
    No cache (not an error) where the cache dir cannot be written.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    options = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    folder = Path(base) / "upi" / f"jinja-{jinja2.__version__}-{options}"
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
        # domain.xml.j2 ends in .j2: the extension to match is "xml.j2".
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml", "xml.j2"), default=False,
                                            default_for_string=False),
        finalize=_one_line,
    )
    env.filters["to_yaml"] = _to_yaml
    env.filters["xml_comment"] = _xml_comment
    env.filters["virt_opt"] = _virt_opt
    env.filters["shquote"] = shlex.quote
    return env


# Between two files rendered in one call: a NUL, which no value can carry (_one_line) and
# no template holds.
_SEPARATOR = "\x00"


def render_each(name: str, var: str, items: Sequence[Any]) -> list[str]:
    """`name` rendered once per item (bound to `var`), in ONE template call.

    A render of 5,000 PXE files spent more on Jinja's per-call set-up (a new
    context, the root function, the join) than on the templates themselves.
    The files are the template's output for each item, byte for byte:
    `{% include %}` runs the same compiled template in a loop.
    """
    if not items:
        return []
    try:
        text = _each(name, var).render(items=items)
    except LineBreakInValue as exc:
        raise RenderError(f"{name}: a value would add a line to the rendered file ({exc}); "
                          "this is a upi bug: the inventory check should have refused it") from None
    parts = text.split(_SEPARATOR)
    if len(parts) != len(items) + 1 or parts[-1]:  # pragma: no cover - a NUL got through
        return [render_template(name, **{var: item}) for item in items]
    return parts[:-1]


@cache
def _each(name: str, var: str) -> jinja2.Template:
    if not var.isidentifier() or "'" in name:
        raise ValueError(f"render_each({name!r}, {var!r})")
    return environment().from_string(
        f"{{% for {var} in items %}}{loop_body(name)}{_SEPARATOR}{{% endfor %}}")


def loop_body(name: str) -> str:
    """What render_each's loop runs per item: the template's own text, or an include of it.

    Inlined, the body runs in the loop's own frame: half the time of an
    `{% include %}`, which builds a new context per item. Only a template of
    text and `{{ }}` values is inlined: no block tags or comments (trim_blocks
    and scoping could render those differently inside a loop), not starting
    with a line break (trim_blocks would eat it after the loop tag), not
    autoescaped (a string template is not).
    """
    env = environment()
    source = env.loader.get_source(env, name)[0] if env.loader else ""
    autoescaped = env.autoescape(name) if callable(env.autoescape) else env.autoescape
    if source and "{%" not in source and "{#" not in source and source[0] not in "\r\n" \
            and not autoescaped:
        return source
    return f"{{% include '{name}' %}}"


def render_template(name: str, **context: Any) -> str:
    """Render one template from templates/ with `context`."""
    try:
        return environment().get_template(name).render(**context)
    except LineBreakInValue as exc:
        raise RenderError(f"{name}: a value would add a line to the rendered file ({exc}); "
                          "this is a upi bug: the inventory check should have refused it") from None
