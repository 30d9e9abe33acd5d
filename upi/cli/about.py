"""`upi version`: what is installed, for people and for scripts."""

from __future__ import annotations

from upi import console
from upi.cli.base import JsonOpt, app


@app.command(epilog="\b\nExamples:\n  upi version\n  upi version --json | jq -r .version")
def version(as_json: JsonOpt = False) -> None:
    """Print upi's version, the Python running it and where it is installed."""
    import platform
    import sys

    from upi import DISTRIBUTION, __version__
    from upi.selfpath import upi_command

    doc = {"version": __version__, "distribution": DISTRIBUTION, "python": platform.python_version(),
           "executable": upi_command(), "platform": sys.platform}
    if as_json:
        console.print_json(doc)
        return
    console.say(f"upi {__version__} (Python {doc['python']}, {doc['executable']})")
