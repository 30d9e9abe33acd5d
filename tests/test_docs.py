from __future__ import annotations

from conftest import ROOT

from upi.docgen import cli_reference


def test_cli_reference_matches_the_commands_help() -> None:
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert committed == cli_reference(), "docs/cli.md is stale: run `make docs`"


def test_every_command_has_an_example() -> None:
    for section in cli_reference().split("\n## ")[2:]:
        assert "Example" in section, section.splitlines()[0]
