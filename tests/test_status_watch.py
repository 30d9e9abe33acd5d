"""`upi status --watch` as a real process: it ends by itself once every node is done, and Ctrl-C
(a real SIGINT) ends it cleanly, on a terminal (a pty) and into a pipe; the FAKE API server
moves the nodes on while it watches.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest
from conftest import inventory_path
from csr_cases import client
from fake_apiserver import FakeApiServer
from status_support import Upi, spawn

from upi.installed import Installed, save_record

INVENTORY = str(inventory_path("compact"))  # bootstrap and three masters, no GPU node
BOOTSTRAP_MAC = "52:54:00:7a:00:09"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """A render dir whose installed-nodes record has the bootstrap: its last stage."""
    out = tmp_path / "out"
    save_record(out, {"bootstrap": Installed(BOOTSTRAP_MAC, "2026-11-25T10:00:00+00:00", "test")})
    return out


def watch(kube: FakeApiServer, out: Path, *extra: str, tty: bool) -> Upi:
    return spawn(["status", INVENTORY, "--kubeconfig", str(kube.kubeconfig), "-o", str(out),
                  "--dnsmasq-log", os.devnull, "--watch", "--interval", "0.2", *extra],
                 tty=tty, env={"KUBECONFIG": ""})


def test_watch_ends_by_itself_when_every_node_is_done(kube: FakeApiServer, out: Path) -> None:
    for name in ("cp-0", "cp-1"):
        kube.add_node(name, ready=True)
    kube.add_node("cp-2", ready=False)
    upi = watch(kube, out, tty=False)
    upi.until(lambda: "cp-2" in upi.text() and upi.text().endswith("\n"), "the first table, whole")
    first = upi.text()
    assert first.splitlines()[1].split()[:3] == ["NODE", "ROLE", "DHCP"]
    assert "bootstrap" in first and "installed" in first
    kube.add_node("cp-2", ready=True)  # its kubelet reports Ready: the last node is done
    assert upi.finish() == 0, upi.text() + upi.stderr()
    later = upi.text()[len(first):].splitlines()
    # Into a pipe only the change is told, once, with the look's time.
    assert len(later) == 1 and later[0].split(" ", 1)[1].startswith("cp-2: waiting -> Ready at "), later
    assert upi.stderr() == ""


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_ctrl_c_ends_a_watch_cleanly_with_the_last_looks_status(kube: FakeApiServer, out: Path,
                                                                 tty: bool) -> None:
    kube.add_node("cp-0", ready=True)
    csr = client("cp-1")
    kube.add_csr(csr.name, csr.pem, **csr.kwargs())
    # On the terminal cp-1 is stuck at its client CSR (--stuck-after 0): exit 1; into the pipe it is not.
    upi = watch(kube, out, "--stuck-after", "0" if tty else "1h", tty=tty)
    upi.until(lambda: "cp-2" in upi.text(), "the first look")
    if tty:
        upi.until(lambda: "cp-1: stuck at client CSR" in upi.text(), "the live table's notes")
    upi.proc.send_signal(signal.SIGINT)
    code = upi.finish()
    everything = upi.text() + upi.stderr()
    assert code == (1 if tty else 0), everything
    assert "upi status: stopped (Ctrl-C)" in everything
    assert "Traceback" not in everything and "KeyboardInterrupt" not in everything
    assert "Aborted" not in everything  # click's own Ctrl-C ending is not reached


def test_watch_json_is_one_clean_document_per_line_even_after_ctrl_c(kube: FakeApiServer, out: Path) -> None:
    upi = watch(kube, out, "--json", tty=False)
    upi.until(lambda: upi.text().count("\n") >= 2, "two looks")
    upi.proc.send_signal(signal.SIGINT)
    assert upi.finish() == 0
    docs = [json.loads(line) for line in upi.text().splitlines()]
    assert len(docs) >= 2 and all({n["name"] for n in d["nodes"]} == {"bootstrap", "cp-0", "cp-1", "cp-2"}
                                  for d in docs)
    assert next(n for n in docs[0]["nodes"] if n["name"] == "bootstrap")["done"]
    assert upi.stderr() == "upi status: stopped (Ctrl-C)\n"


def test_ctrl_c_during_the_first_look_exits_130(tmp_path: Path, out: Path) -> None:
    """An API that takes the connection and never answers holds the first look (its 10 s timeout)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    silent.settimeout(60)
    kube = FakeApiServer(tmp_path / "never")  # never started: only its kubeconfig's shape is used
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube.kubeconfig.read_text().replace(
        kube.url, f"https://127.0.0.1:{silent.getsockname()[1]}"))
    upi = spawn(["status", INVENTORY, "--kubeconfig", str(kubeconfig), "-o", str(out),
                 "--dnsmasq-log", os.devnull, "--watch"], tty=False, env={"KUBECONFIG": ""})
    try:
        conn, _ = silent.accept()  # upi is inside its first look now
        upi.proc.send_signal(signal.SIGINT)
        assert upi.finish() == 130, upi.text() + upi.stderr()
        conn.close()
    finally:
        silent.close()
    assert upi.text() == "" and upi.stderr() == "upi status: stopped (Ctrl-C)\n"


def _sigint_in(pid: int, field: str) -> bool:
    """SIGINT is in the process's `field` set (SigIgn: ignored): proc(5), a hex mask, bit signo-1."""
    with open(f"/proc/{pid}/status") as fh:
        mask = next(int(line.split()[1], 16) for line in fh if line.startswith(f"{field}:"))
    return bool(mask & (1 << (signal.SIGINT - 1)))


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_a_child_sent_sigint_hears_it_even_when_the_tests_run_with_sigint_ignored(
        tmp_path: Path, out: Path, tty: bool) -> None:
    """As under `make test &`: the tests above would wait out their limit, the SIGINT dropped."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        upi = spawn(["status", INVENTORY, "-o", str(out), "--dnsmasq-log", os.devnull, "--watch"],
                    tty=tty, env={"KUBECONFIG": ""})
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert not _sigint_in(upi.proc.pid, "SigIgn")  # Popen returns once the child has exec'd
        upi.proc.send_signal(signal.SIGINT)
        # It ends: by SIGINT itself (-2) or a KeyboardInterrupt, whether it came during the
        # imports or once upi's watch loop catches it (the tests above check that ending).
        assert upi.finish(limit=60) in (-signal.SIGINT, 1, 130)
    finally:
        if upi.proc.poll() is None:
            upi.proc.kill()
