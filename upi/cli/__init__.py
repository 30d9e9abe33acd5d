"""The `upi` command line: thin Typer adapters over the library, one module per area.

Heavy modules (pydantic, jinja2, libvirt, lightkube) are imported inside the
commands so that `upi --help` stays fast. Importing the area modules registers
their commands, in the order `upi --help` lists them.
"""

from __future__ import annotations

import copy
import gc
import logging
import os
import sys

import typer

from upi import console
from upi.cli import about, check, files, gpu, machines, metal, nodes, status  # noqa: F401  (they register their commands)
from upi.cli.base import UpiGroup, adopt, app

adopt(app)  # every command registered above gets the shared help and error conventions

__all__ = ["UpiGroup", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    # A short-lived process allocating millions of objects (a 5,000-node
    # render) spent a sixth of its time in the default collector (700
    # allocations a pass, 580 passes): what was imported is never garbage,
    # and passes are made 70x rarer. Long-running commands still collect.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    # pydantic reads every installed distribution's entry points for plugins when the first
    # model is built (~8 ms in a virtualenv of 100 packages, a tenth of `upi check`'s own
    # work); upi's models use none, and none should see an inventory's secrets. An explicit
    # setting is kept; the programs upi starts (ssh, openshift-install, ...) use no pydantic.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        only(sys.argv[1:])(prog_name="upi")
    except SystemExit as exc:
        if console.is_finished() and isinstance(exc.code, int | None):
            _exit_now(exc.code or 0)
        raise


def only(argv: list[str]) -> typer.Typer:
    """The app with just the command or group `argv` starts with: the others are never built.

    Typer builds every command's options before it reads the command line
    (each signature read, each option's type checked: ~15 ms for upi's 16);
    a run needs one. Anything else (no argument, an option first, a word
    that names no command, shell completion) gets the whole app, so usage,
    `--help` and "No such command" read as they always do.
    """
    if not argv or "_UPI_COMPLETE" in os.environ:
        return app
    commands = [c for c in app.registered_commands
                if (c.name or getattr(c.callback, "__name__", "").replace("_", "-")) == argv[0]]
    groups = [g for g in app.registered_groups if g.name == argv[0]]
    if not commands and not groups:
        return app
    slim = copy.copy(app)
    slim.registered_commands, slim.registered_groups = commands, groups
    return slim


def _exit_now(code: int) -> None:
    """End the process without freeing every object one by one (console.finished())."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # e.g. a closed pipe: let the interpreter report it as it always does
        return
    logging.shutdown()
    os._exit(code)
