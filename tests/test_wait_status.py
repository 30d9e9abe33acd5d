"""`upi wait` shows `upi status`'s table while it waits.

The FAKE installer is held in bootstrap-complete ("slow") while the test moves
a node through its stages the way the sources would: dnsmasq's log file (the
inventory's `provisioner.dnsmasq_log`) gets the lines dnsmasq writes for a
lease and a TFTP fetch (the formats the real dnsmasq wrote in
test_pxe_boot.py), and the FAKE API server gets the node's CSR and its Node.
Each change must show up while upi waits, as a line into a pipe, in the live
table on a terminal; with --json stdout stays one JSON document.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from csr_cases import client
from fake_apiserver import FakeApiServer
from status_support import Upi, spawn
from wait_support import make_assets, script, wait_args

from upi.facts.boot import boot_entries
from upi.inventory import load_inventory

pytestmark = pytest.mark.usefixtures("fake_openshift_install")
NODE, MAC, IP = "master-0", "52:54:00:21:03:50", "10.33.3.50"


@pytest.fixture
def site(runner, tmp_path: Path, example_dir: Path) -> tuple[Path, Path, Path]:
    """dgxpod whose dnsmasq log is a file here (`ssh: {local: true}`: read here); its assets."""
    log = tmp_path / "dnsmasq-upi.log"
    log.write_text("")
    inv = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inv.read_text())
    doc["provisioner"].update(dnsmasq_log=str(log), ssh={"local": True})
    inv.write_text(yaml.safe_dump(doc))
    return inv, make_assets(runner, inv, tmp_path), log


def _stamp() -> str:
    return datetime.now().astimezone().strftime("%b %e %H:%M:%S")


def dnsmasq_says(log: Path, line: str) -> None:
    with log.open("a") as fh:
        fh.write(f"{_stamp()} {line}\n")


def start(inv: Path, assets: Path, kube: FakeApiServer, *extra: str, tty: bool) -> Upi:
    # --no-approve: the CSR stays pending, so only the test moves the node on.
    return spawn(wait_args(inv, assets, kube, "--keep-bootstrap", "--no-vms", "--no-metal", "--no-approve",
                           "--status-every", "0.2", *extra), tty=tty, env={"KUBECONFIG": ""})


def move_node_along(upi: Upi, inv: Path, log: Path, kube: FakeApiServer, seen: str = "") -> None:
    """DHCP, PXE file, client CSR, Ready: each one shown before the next happens.

    `seen` is where to look: "" the lines into a pipe, else the live table's text for the node.
    """
    entry = next(e for e in boot_entries(load_inventory(inv, check_files=False)) if e.node.name == NODE)

    def shows(stage: str, before: str) -> None:
        if seen:
            upi.until(lambda: _row(upi.text(), NODE).endswith(stage), f"{NODE} at {stage} in the table")
        else:
            line = f"  status: {NODE}: {before} -> {stage} at "
            upi.until(lambda: line in upi.text(), f"{NODE} -> {stage}")

    dnsmasq_says(log, f"dnsmasq-dhcp[4242]: 3918279 DHCPACK(br0) {IP} {MAC} {NODE}")
    shows("DHCP", "waiting")
    dnsmasq_says(log, f"dnsmasq-tftp[4242]: sent /var/lib/tftpboot/pxelinux.cfg/{entry.mac_name} to {IP}")
    shows("PXE file", "DHCP")
    csr = client(NODE)
    kube.add_csr(csr.name, csr.pem, **csr.kwargs())
    shows("client CSR", "PXE file")
    kube.add_node(NODE, ready=True)
    shows("Ready", "client CSR")


def _row(text: str, node: str) -> str:
    """The node's row of the last table drawn on the terminal, cells joined by one space, NOW last."""
    rows = [line for line in text.splitlines() if f"│ {node} " in line]
    if not rows:
        return ""
    cells = [c.strip() for c in rows[-1].split("│") if c.strip()]
    return " ".join(cells[:-1])  # FOR (time there) dropped


def test_wait_tells_each_nodes_stage_changes_into_a_pipe(tmp_path, site, kube, monkeypatch) -> None:
    inv, assets, log = site
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"])
    upi = start(inv, assets, kube, tty=False)
    upi.until(lambda: "  status: worker-1: waiting\n" in upi.text(), "the first look (its last node)")
    assert f"  status: {NODE}: waiting\n" in upi.text()
    move_node_along(upi, inv, log, kube)
    (tmp_path / "release").touch()  # the fake installer's bootstrap completes
    assert upi.finish() == 0, upi.text() + upi.stderr()
    out = upi.text()
    assert "== install-complete: done" in out
    # One line per change: nothing repeated while a node stays where it is.
    assert out.count(f"  status: {NODE}: DHCP -> PXE file at ") == 1
    assert "status: cannot read" not in out and "Traceback" not in upi.stderr()


def test_wait_shows_the_nodes_table_live_on_a_terminal(tmp_path, site, kube, monkeypatch) -> None:
    inv, assets, log = site
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"])
    upi = start(inv, assets, kube, tty=True)
    upi.until(lambda: _row(upi.text(), NODE).endswith("waiting"), "the table in the live panel")
    move_node_along(upi, inv, log, kube, seen="table")
    row = _row(upi.text(), NODE).split()
    assert row[:2] == [NODE, "master"] and all(len(c) == 8 and c[2] == ":" for c in (row[2], row[3]))
    (tmp_path / "release").touch()
    assert upi.finish() == 0, upi.text()
    assert "  status: " not in upi.text()  # the panel holds the table; no lines besides


def test_wait_json_keeps_stdout_one_document(tmp_path, site, kube, monkeypatch) -> None:
    inv, assets, log = site
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"])
    upi = start(inv, assets, kube, "--json", tty=False)
    upi.until(lambda: f"  status: {NODE}: waiting\n" in upi.stderr(), "the first look, on stderr")
    dnsmasq_says(log, f"dnsmasq-dhcp[4242]: 3918279 DHCPACK(br0) {IP} {MAC} {NODE}")
    upi.until(lambda: f"  status: {NODE}: waiting -> DHCP at " in upi.stderr(), "the lease, on stderr")
    (tmp_path / "release").touch()
    assert upi.finish() == 0, upi.stderr()
    assert json.loads(upi.text())["ok"] is True


def test_status_every_0_shows_no_table(runner, tmp_path, site, kube, monkeypatch) -> None:
    from upi.cli import app

    inv, assets, _ = site
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(inv, assets, kube, "--keep-bootstrap", "--no-vms",
                                          "--status-every", "0"))
    assert result.exit_code == 0, result.output
    assert "status:" not in result.stdout
