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

Conventions every command follows:

- `--log-level debug|info|warn|error` (or `-v` for debug, or `UPI_LOG_LEVEL`),
  before the command name or after it: `upi -v render ...` and
  `upi render ... -v` are the same; given in both places, the command's wins.
  debug adds every program run and file written; warn hides progress lines;
  error hides warnings too. Errors always show.
- Durations: `90s`, `30m`, `2h`, `1h30m`, `500ms`; a bare number counts in the
  unit the option's help names (as it always did).
- `--json`: output for scripts on stdout; an error is a JSON object there too,
  `{"error", "message", "file", "line", "field", "exit_code"}` (for an
  inventory with several problems also `"problems": [...]`), with the same exit
  code as without `--json`. A command that already printed its JSON report (a
  failed check) adds no second document.
- Shell completion: `upi --install-completion`, or `upi --show-completion bash`.
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
