"""Output helpers: tables for people, JSON for scripts, errors on stderr."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

# Control characters a terminal acts on (ESC sequences, CR overwriting a line,
# C1 CSI), and the bidi overrides that reorder what is shown: never printed raw.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    r"""`text` with terminal control characters shown as escapes (ESC as `\x1b`); tabs, newlines kept."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def plain(value: object) -> Any:
    """A rich Text of `value`: shown as written, never read as markup (`[bold]`), no raw escapes."""
    from rich.text import Text

    return Text(printable(str(value)))


def print_json(doc: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table on stdout: drawn by rich on a terminal, aligned plain text into a pipe or file.

    Piped output goes to grep, awk or a file: columns without box drawing,
    and no rich import or layout pass (seconds for 5,000 rows).
    """
    if not sys.stdout.isatty():
        _plain_table(title, columns, rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=plain(title) if title else None, title_justify="left", show_lines=False)
    for col in columns:
        table.add_column(plain(col))
    for row in rows:
        table.add_row(*(plain(c) for c in row))
    Console(soft_wrap=False).print(table)


def _plain_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Header and rows, columns two spaces apart, padded to the widest cell (as `column -t`)."""
    cells = [[printable(c) for c in columns]]
    for row in rows:
        texts = [str(c) for c in row]
        joined = "".join(texts)  # one scan per row: escaping cell by cell is rarely needed
        if "\n" in joined or _UNPRINTABLE.search(joined):
            texts = [printable(t).replace("\n", " ") for t in texts]
        cells.append(texts)
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(columns))]
    lines = [printable(title)] if title else []
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    sys.stdout.write("\n".join(lines) + "\n")


def say(message: str) -> None:
    """A line for the user on stdout."""
    sys.stdout.write(printable(message) + "\n")


def warn(message: str) -> None:
    """A warning on stderr."""
    sys.stderr.write(f"upi: warning: {printable(message)}\n")


def error(message: str) -> None:
    """An error on stderr."""
    sys.stderr.write(f"upi: error: {printable(message)}\n")


def say_err(message: str) -> None:
    """A line on stderr (continuation of an error)."""
    sys.stderr.write(printable(message) + "\n")
