"""What `upi check` and `upi render` import: only what they need (issue 29, bench/).

Each test runs a new interpreter, as the command is: sys.modules of this
pytest process holds whatever other tests imported.
"""

from __future__ import annotations

import json
import os
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


def test_a_command_never_looks_for_pydantic_plugins() -> None:
    """main() turns pydantic's plugin scan off (every installed package's entry points, read
    when the first model is built) unless the environment already says otherwise."""
    probe = """
import importlib.metadata as md, json, os, sys
groups = []
_entry_points = md.entry_points
def entry_points(**kw):
    groups.append(kw.get("group"))
    return _entry_points(**kw)
md.entry_points = entry_points
import pydantic.plugin._loader as loader
loader.entry_points = entry_points
os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None) if sys.argv[1] == "unset" else None
sys.argv = ["upi", "validate", sys.argv[2], "--json"]
from upi.cli import main
import upi.cli
upi.cli._exit_now = lambda code: None
try:
    main()
except SystemExit:
    pass
sys.stderr.write(json.dumps(groups))
"""
    from conftest import inventory_path

    def groups(setting: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
        if setting != "unset":
            env["PYDANTIC_DISABLE_PLUGINS"] = setting
        proc = subprocess.run([sys.executable, "-c", probe, "unset" if setting == "unset" else "set",
                               str(inventory_path("dgxpod"))], cwd=ROOT, capture_output=True,
                              text=True, check=True, env=env)
        return json.loads(proc.stderr.splitlines()[-1])

    assert "pydantic" not in groups("unset")
    assert "pydantic" in groups("some-plugin")  # an explicit setting is the user's: kept
