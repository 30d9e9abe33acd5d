"""The `upi` command line: thin Typer adapters over the library, one module per area.

Heavy modules (pydantic, jinja2, libvirt, lightkube) are imported inside the
commands so that `upi --help` stays fast. Importing the area modules registers
their commands, in the order `upi --help` lists them.
"""

from __future__ import annotations

from upi.cli import about, check, files, gpu, machines, metal  # noqa: F401  (they register their commands)
from upi.cli.base import UpiGroup, adopt, app

adopt(app)  # every command registered above gets the shared help and error conventions

__all__ = ["UpiGroup", "app", "main"]


def main() -> None:
    """Console-script entry point."""
    app(prog_name="upi")
