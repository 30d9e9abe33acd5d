"""Output helpers: tables for people, JSON for scripts, errors on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def print_json(doc: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table on stdout (rich, imported only when a table is printed)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(c) for c in row))
    # Piped output is read by people too: do not squeeze it to 80 columns.
    width = None if sys.stdout.isatty() else 200
    Console(soft_wrap=False, width=width).print(table)


def say(message: str) -> None:
    """A line for the user on stdout."""
    sys.stdout.write(message + "\n")


def warn(message: str) -> None:
    """A warning on stderr."""
    sys.stderr.write(f"upi: warning: {message}\n")


def error(message: str) -> None:
    """An error on stderr."""
    sys.stderr.write(f"upi: error: {message}\n")


def say_err(message: str) -> None:
    """A line on stderr (continuation of an error)."""
    sys.stderr.write(message + "\n")
