"""`upi NAME ...` builds only NAME (upi.cli.only): what it prints must be what the whole app prints."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from upi.cli import app, only

NAMES = sorted({c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands
                if c.callback is not None} | {str(g.name) for g in app.registered_groups})


def _same(argv: list[str]) -> None:
    runner = CliRunner()
    whole, slim = runner.invoke(app, argv, prog_name="upi"), runner.invoke(only(argv), argv, prog_name="upi")
    assert (slim.exit_code, slim.output) == (whole.exit_code, whole.output), argv


def test_every_command_and_group_is_found() -> None:
    assert {"render", "check", "nodes", "boot-metal", "approve-csr", "status", "gpu"} <= set(NAMES)
    for name in NAMES:
        slim = only([name])
        assert slim is not app
        built = [c.name or c.callback.__name__.replace("_", "-") for c in slim.registered_commands
                 if c.callback is not None] + [str(g.name) for g in slim.registered_groups]
        assert built == [name]


@pytest.mark.parametrize("name", NAMES)
def test_help_and_usage_errors_read_as_the_whole_apps(name: str) -> None:
    _same([name, "--help"])
    _same([name])  # no arguments: the usage error, or the group's help
    _same([name, "--no-such-option"])


@pytest.mark.parametrize("argv", [["check", "all", "--help"], ["check", "bogus"], ["nodes", "add", "--help"],
                                  ["check", "dns"], ["render", "--log-level", "loud", "x.yaml"]])
def test_subcommands_and_their_errors_read_as_the_whole_apps(argv: list[str]) -> None:
    _same(argv)


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["--log-level", "debug", "render"],
                                  ["bogus"], ["rend"]])
def test_anything_else_gets_the_whole_app(argv: list[str]) -> None:
    assert only(argv) is app


def test_shell_completion_gets_the_whole_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "_UPI_COMPLETE", "complete_bash")
    assert only(["check", "all"]) is app
