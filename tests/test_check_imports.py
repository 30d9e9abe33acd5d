"""What `upi check` and `upi render` import: only what they need (issue 29, bench/).

Each test runs a new interpreter, as the command is: sys.modules of this
pytest process holds whatever other tests imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every module a `check all` run imports, lazily imported ones included (run.py's areas,
# the stale-file checks of http.py and tftp.py).
CHECK_MODULES = ("upi.check.run", "upi.check.dns", "upi.check.lb", "upi.check.http", "upi.check.tftp",
                 "upi.check.stale", "upi.check.relay", "upi.check.report")


def imported_by(code: str) -> set[str]:
    """The top-level packages in sys.modules after `code` ran in a new interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return set(json.loads(proc.stdout))


def test_checking_imports_no_ssh() -> None:
    # The stale-file checks read upi push's ledger format (upi.push.owned); that must not
    # import SSH (paramiko and invoke: ~0.1 s of every `upi check all`), which no check uses.
    mods = imported_by("import " + ", ".join(CHECK_MODULES))
    assert "upi" in mods
    assert not mods & {"paramiko", "invoke"}, sorted(mods & {"paramiko", "invoke"})



def test_push_package_imports_its_machinery_when_a_push_runs() -> None:
    mods = imported_by("from upi.push import TARGETS, FileStatus, PushError, PushResult, push, push_files")
    assert not mods & {"paramiko", "invoke", "jinja2"}, sorted(mods & {"paramiko", "invoke", "jinja2"})


def test_rendering_imports_no_download_stack() -> None:
    # `upi render` reads the signed-loader records (upi.images.loaders); the package's downloader
    # (http.client, ssl, urllib.request: ~30 ms of every render) is imported by `upi images` only.
    mods = imported_by("import upi.commands.render, upi.renderdir, upi.images.loaders")
    assert "upi" in mods
    assert not mods & {"ssl", "http"}, sorted(mods & {"ssl", "http"})
