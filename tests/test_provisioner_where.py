"""`upi push` and `upi status` find the provisioner by one rule (remote.host_access, docs/push.md).

No `ssh` section is SSH as root to `provisioner.ip`, port 22, its key checked
against ~/.ssh/known_hosts: a real sshd listens there, inside a network
namespace that has the provisioner's address, and both commands, run in that
namespace, must reach it. `ssh: {local: true}` is the machine upi runs on,
for both.
"""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from conftest import require, require_root
from pushkit import Site, keygen, make_site
from pxe_harness import Lab

from upi.cli import app
from upi.inventory import load_inventory

ROOTFS = "/rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"


def _logs(site: Site, tmp_path: Path, **ssh: object) -> tuple[Path, Path]:
    """The site's inventory with its access log and a dnsmasq log that does not exist, and `ssh`
    as the provisioner's section (none when empty). The HTTP root holds a 100-byte worker.ign:
    worker-0 fetched its rootfs and all of it, worker-1 its rootfs and 60 bytes of it."""
    access, missing = tmp_path / "access.log", tmp_path / "no-dnsmasq.log"
    served = site.root / "var/www/html/ignition"
    served.mkdir(parents=True)
    (served / "worker.ign").write_bytes(b" " * 100)
    stamp = datetime.now().astimezone().strftime("%d/%b/%Y:%H:%M:%S %z")
    access.write_text("".join(f'{ip} - - [{stamp}] "GET {path} HTTP/1.1" 200 {size}\n' for ip, path, size in (
        ("10.33.3.44", ROOTFS, 4096), ("10.33.3.44", "/ignition/worker.ign", 100),
        ("10.33.3.46", ROOTFS, 4096), ("10.33.3.46", "/ignition/worker.ign", 60))))
    doc = yaml.safe_load(site.inventory.read_text())
    doc["provisioner"].update(dnsmasq_log=str(missing), http_access_log=str(access))
    doc["provisioner"].pop("ssh", None)
    if ssh:
        doc["provisioner"]["ssh"] = ssh
    site.inventory.write_text(yaml.safe_dump(doc))
    return access, missing


def _both(runner, site: Site) -> tuple[set[str], dict]:
    """The hosts `upi push --dry-run` named for the provisioner, and `upi status --json`."""
    push = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), "--only", "provisioner",
                               "--dry-run", "--json"])
    assert push.exit_code == 0, push.output
    status = runner.invoke(app, ["status", str(site.inventory), "--json"])
    assert status.exception is None or isinstance(status.exception, SystemExit), status.output
    return {f["host"] for f in json.loads(push.stdout)["files"]}, json.loads(status.stdout)


def _reached(doc: dict, node: str, stage: str) -> bool:
    return next(n for n in doc["nodes"] if n["name"] == node)["stages"][stage]["reached"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: ~/.ssh/known_hosts and ~/.ssh/id_ed25519 are read from it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # no agent: the key under HOME is the login
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return home


def test_without_an_ssh_section_both_reach_the_provisioner_ip_over_ssh(
        runner, tmp_path: Path, example_dir: Path, home: Path) -> None:
    require_root("a network namespace with the provisioner's address")
    sshd = require("sshd")
    site = make_site(tmp_path / "site", example_dir, runner, None)
    _, missing = _logs(site, tmp_path)
    inv = load_inventory(site.inventory)
    prov = str(inv.provisioner.ip)
    keys = tmp_path / "keys"
    keys.mkdir()
    host_pub = keygen(keys / "host_ed25519")
    keygen(home / ".ssh" / "id_ed25519")
    (keys / "authorized_keys").write_text((home / ".ssh" / "id_ed25519.pub").read_text())
    (home / ".ssh" / "known_hosts").write_text(f"{prov} {host_pub}\n")  # port 22: no [host]:port
    (keys / "home").mkdir()
    (keys / "sshd_config").write_text(
        f"Port 22\nListenAddress {prov}\nHostKey {keys}/host_ed25519\nPidFile {keys}/sshd.pid\n"
        f"AuthorizedKeysFile {keys}/authorized_keys\nStrictModes no\nUsePAM no\n"
        f"Subsystem sftp internal-sftp\nSetEnv HOME={keys}/home\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    prefix = inv.network.machine_cidr.prefixlen
    with Lab(tmp_path / "lab", inv.provisioner.interface, f"{prov}/{prefix}") as lab:
        lab.spawn([sshd, "-D", "-e", "-f", str(keys / "sshd_config")], tmp_path / "sshd.log")

        def run() -> tuple[set[str], dict]:
            end = time.monotonic() + 20
            while True:  # readiness, not a timing assertion
                try:
                    socket.create_connection((prov, 22), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.02)
            return _both(runner, site)

        hosts, doc = lab.inside(run)
    where = f"root@{prov}:22"
    assert hosts == {where}
    # status read the inventory's logs there too: the access log's fetch, the missing log by host.
    assert doc["unread"] == [f"{where}:{missing}: No such file"]
    assert _reached(doc, "worker-0", "ignition")
    # The size of the file the server holds comes from the same host: 60 of 100 bytes is no fetch.
    assert _reached(doc, "worker-1", "rootfs") and not _reached(doc, "worker-1", "ignition")


def test_local_true_is_this_machine_for_both(runner, tmp_path: Path, example_dir: Path, home: Path) -> None:
    site = make_site(tmp_path / "site", example_dir, runner, None)
    access, missing = _logs(site, tmp_path, local=True)
    hosts, doc = _both(runner, site)
    assert hosts == {"local"}
    assert doc["unread"] == [f"{missing}: {os.strerror(2)}"]
    assert _reached(doc, "worker-0", "ignition")
    assert _reached(doc, "worker-1", "rootfs") and not _reached(doc, "worker-1", "ignition")
    # A copy of the log named on the command line: the server's files are still this machine's.
    copy = tmp_path / "copy.log"
    copy.write_bytes(access.read_bytes())
    status = runner.invoke(app, ["status", str(site.inventory), "--access-log", str(copy), "--json"])
    doc = json.loads(status.stdout)
    assert _reached(doc, "worker-0", "ignition") and not _reached(doc, "worker-1", "ignition")


def test_a_day2_nodes_own_ignition_is_judged_by_the_copy_the_server_holds(
        runner, tmp_path: Path, example_dir: Path, home: Path) -> None:
    """As worker.ign is: the size the HTTP server holds comes first, then the render dir's copy."""
    from upi.ownignition import with_nodes
    from upi.render import RenderedFile
    from upi.renderdir import transaction

    site = make_site(tmp_path / "site", example_dir, runner, None)
    access, _ = _logs(site, tmp_path, local=True)
    with transaction(site.out) as txn:  # as `upi nodes add` published worker-0's own ignition
        txn.commit(None, own=with_nodes(txn.records.own, ["worker-0"]),
                   published=[RenderedFile("http/ignition/nodes/worker-0.ign", b"x" * 999, 0o600)])
    served = site.root / "var/www/html/ignition/nodes"
    served.mkdir()
    # The server holds another copy than the render dir's (pushed again since, or edited there).
    (served / "worker-0.ign").write_bytes(b"y" * 1000)
    (served / "worker-1.ign").write_bytes(b"z" * 1000)  # copied in by hand: not upi's, judges nothing
    stamp = datetime.now().astimezone().strftime("%d/%b/%Y:%H:%M:%S %z")
    access.write_text("".join(f'{ip} - - [{stamp}] "GET {path} HTTP/1.1" 200 {size}\n' for ip, path, size in (
        ("10.33.3.44", ROOTFS, 4096), ("10.33.3.44", "/ignition/nodes/worker-0.ign", 999),
        ("10.33.3.46", ROOTFS, 4096), ("10.33.3.46", "/ignition/nodes/worker-1.ign", 999))))
    status = runner.invoke(app, ["status", str(site.inventory), "-o", str(site.out), "--stuck-after", "0",
                                 "--json"])
    doc = json.loads(status.stdout)
    w0 = next(n for n in doc["nodes"] if n["name"] == "worker-0")
    assert _reached(doc, "worker-0", "rootfs") and not _reached(doc, "worker-0", "ignition")
    assert w0["causes"][0].startswith("its ignition file was cut after 999 of 1000 bytes (HTTP 200)")
    assert _reached(doc, "worker-1", "ignition")  # its size is not known: not judged
