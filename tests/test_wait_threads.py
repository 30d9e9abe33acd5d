"""`upi wait`'s helper threads import nothing of their own: the main thread did it before they started.

Two threads importing the same package for the first time can meet one of its
modules half initialized (seen under `upi wait`: asyncio, through paramiko and
httpx, "partially initialized module"): a traceback that kills a helper at
random. Here a real `upi wait` process runs with an import auditor (a
sys.meta_path finder that only records) while its CSR approver, metal booter
and status reader work against the FAKE installer, held in bootstrap-complete,
and the FAKE API server. Every first import of a library module in a thread
other than the main one is a finding.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from wait_support import make_assets, script, wait_args

pytestmark = pytest.mark.usefixtures("fake_openshift_install")
ROOT = Path(__file__).resolve().parent.parent

# The auditor, then upi's own entry point with the test's arguments.
AUDITED = """
import sys, threading

class Auditor:
    def __init__(self, log):
        self.log = log

    def find_spec(self, name, path=None, target=None):
        if name not in sys.modules and threading.current_thread() is not threading.main_thread():
            with open(self.log, "a") as fh:
                fh.write(f"{threading.current_thread().name} {name}\\n")
        return None

sys.meta_path.insert(0, Auditor(sys.argv.pop(1)))
sys.argv[0] = "upi"
from upi.cli import main
main()
"""
# Packages whose modules import each other (the ones the race was seen in, and their kin):
# stdlib leaves a thread may load on first use (encodings.idna, ...) are not findings.
LIBRARIES = ("upi", "asyncio", "lightkube", "httpx", "httpx2", "httpcore", "anyio", "h11", "h2",
             "paramiko", "sushy", "requests", "urllib3", "cryptography", "libvirt", "yaml", "jinja2",
             "pydantic", "pydantic_core", "ssl", "concurrent", "email", "http")


@pytest.mark.parametrize("status_every", ["0.2", "0"])  # with the status reader and without it
def test_helper_threads_find_every_library_imported(runner, tmp_path: Path, example_dir: Path,
                                                    kube: FakeApiServer, monkeypatch,
                                                    status_every: str) -> None:
    inv = example_dir / "dgxpod.yaml"
    assets = make_assets(runner, inv, tmp_path)
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"], install_complete=["ok"])
    log = tmp_path / "imports.log"
    # --no-vms: no libvirt here; the approver, the metal booter (waiting for the machine-config
    # server, asking the API which nodes joined) and the status reader all run.
    args = wait_args(inv, assets, kube, "--no-vms", "--keep-bootstrap", "--status-every", status_every)
    proc = subprocess.Popen([sys.executable, "-c", AUDITED, str(log), *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(4)  # the helpers' first rounds (the fake stays in bootstrap-complete until released)
    (tmp_path / "release").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out + err).decode(errors="replace")
    found = log.read_text().splitlines() if log.exists() else []
    late = [line for line in found if line.rsplit(" ", 1)[1].split(".")[0] in LIBRARIES]
    assert late == [], "first imported in a helper thread:\n" + "\n".join(late)
