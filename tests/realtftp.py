"""Real dnsmasq serving TFTP on 127.0.0.1:69 (dnsmasq has no option for another TFTP port).

Port 69 is one per machine, and other test runs may want it at the same time:
a file lock in the temp dir serialises every user of this helper.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import require, require_root

LOOPBACK = "127.0.0.1"
TFTP_PORT = 69


@contextlib.contextmanager
def serve_tftp(root: Path, log: Path) -> Iterator[int]:
    """dnsmasq (no DNS, no DHCP) serving `root` over TFTP on 127.0.0.1:69; yields the port."""
    require_root("a TFTP server on port 69")
    dnsmasq = require("dnsmasq")
    lock_path = Path(tempfile.gettempdir()) / "upi-test-tftp-69.lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [dnsmasq, "--keep-in-foreground", "--port=0", "--enable-tftp", f"--tftp-root={root}",
             f"--listen-address={LOOPBACK}", "--bind-interfaces", "--user=root", "--pid-file=",
             f"--log-facility={log}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        try:
            end = time.monotonic() + 10
            while not (log.exists() and "TFTP root is" in log.read_text(errors="replace")):
                if proc.poll() is not None:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise AssertionError(f"dnsmasq TFTP exited {proc.returncode}: {err}")
                assert time.monotonic() < end, "dnsmasq TFTP did not start within 10 s"
                time.sleep(0.02)
            yield TFTP_PORT
        finally:
            proc.terminate()
            proc.wait(5)
