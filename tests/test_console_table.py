"""Tables: drawn on a terminal, aligned plain text into a pipe (grep, awk, a file)."""

from __future__ import annotations

import io
import sys

import pytest

from upi import console


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_aligned_columns_without_box_drawing(capsys: pytest.CaptureFixture[str]) -> None:
    console.print_table("nodes", ["name", "ip"], [("master-0", "10.0.0.10"), ("w\x1b[2J", "10.0.0.100")])
    out = capsys.readouterr().out
    assert out == ("nodes\n"
                   "name      ip\n"
                   "master-0  10.0.0.10\n"
                   "w\\x1b[2J  10.0.0.100\n")


def test_a_terminal_gets_the_drawn_table(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    console.print_table(None, ["name", "ip"], [("master-0", "10.0.0.10")])
    assert "│ master-0 │ 10.0.0.10 │" in tty.getvalue()
