"""The command that runs this upi, for files that call upi again (the approver units, crontab).

An admin installs upi with pipx or pip into a virtualenv, so upi is rarely
/usr/local/bin/upi: the rendered units call the upi that rendered them,
unless the inventory names another (`csr_approver.upi`).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

# What a path may hold to be written unquoted into a systemd ExecStart= line and a
# crontab line: no spaces, no `%` (a specifier to systemd, a newline to cron), no quotes.
SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@-]+")


def upi_command() -> str:
    """The running upi as a command line: its script's absolute path, else `PYTHON -m upi`.

    `sys.argv[0]` is the console script when run as `upi` (pipx's
    ~/.local/bin/upi, a venv's bin/upi); under `python -m upi` or inside
    another program (tests) the interpreter with `-m upi` runs this same copy.
    """
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "upi":
        script = str(argv0.absolute())
        if SAFE_PATH.fullmatch(script):
            return script
    # A `upi` on PATH counts only when it is this copy's own script (beside the interpreter).
    found = shutil.which("upi")
    if found and Path(found).parent == Path(sys.executable).parent and SAFE_PATH.fullmatch(found):
        return found
    if SAFE_PATH.fullmatch(sys.executable):
        return f"{sys.executable} -m upi"
    return "upi"  # an interpreter path no unit can hold unquoted: systemd and cron search PATH
