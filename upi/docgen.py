"""Generate docs/cli.md from the commands' own --help (a test fails when they drift).

Run `make docs` (python -m upi.docgen > docs/cli.md) after changing a command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer.main

from upi.cli import app

WIDTH = 100
HEADER = """# upi command reference

Generated from `upi --help` by `make docs`; do not edit by hand
(tests/test_docs.py fails when this file and the commands drift apart).

Exit codes, for every command: **0** success; **1** a check or an operation
failed; **2** bad usage or bad input (inventory, flags), always with a
message naming the file, the field and, for YAML, the line.
"""


def _walk(cmd: Any, path: list[str], parent: Any = None) -> Iterator[tuple[list[str], str]]:
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent,
                            terminal_width=WIDTH, max_content_width=WIDTH,
                            help_option_names=["-h", "--help"])
    yield path, cmd.get_help(ctx)
    for name in getattr(cmd, "list_commands", lambda _ctx: [])(ctx):
        yield from _walk(cmd.get_command(ctx, name), [*path, name], ctx)


def cli_reference() -> str:
    """The whole CLI reference as Markdown."""
    parts = [HEADER]
    for path, text in _walk(typer.main.get_command(app), ["upi"]):
        parts.append(f"\n## `{' '.join(path)}`\n\n```text\n{text.rstrip()}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    sys.stdout.write(cli_reference())
