"""`upi status` on hostile input: garbage, binary and huge log lines, terminal escapes, addresses
no node has, a log that is a FIFO (here with no writer: opening it blocks; on the provisioner with
a writer that never writes: a read blocks), a directory, /dev/zero, times without a zone, API
objects of the wrong shape. Each ends in exit 0 or 1 with
notes, never a traceback or a hang; stdout never carries a raw escape.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path
from pushkit import Sshd
from status_support import spawn

from upi.cli import app
from upi.installed import Installed, save_record
from upi.inventory import load_inventory
from upi.status.cluster import cluster_from

INVENTORY = str(inventory_path("dgxpod"))
W0_MAC, W0_IP = "b8:ce:f6:10:33:44", "10.33.3.44"
W1_MAC, W1_IP = "b8:ce:f6:10:33:46", "10.33.3.46"


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _stamp() -> str:
    return datetime.now().astimezone().strftime("%b %e %H:%M:%S")


def _clf() -> str:
    return datetime.now().astimezone().strftime("%d/%b/%Y:%H:%M:%S %z")


def _status(runner, *args: str):
    result = runner.invoke(app, ["status", INVENTORY, *args])
    # An exception other than the exit itself is what a user would see as a traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_garbage_binary_and_huge_lines_are_skipped_and_the_good_ones_still_read(runner, tmp_path) -> None:
    rng = random.Random(19)
    dnsmasq = tmp_path / "dnsmasq.log"
    with dnsmasq.open("wb") as fh:
        fh.write(bytes(rng.randrange(256) for _ in range(200_000)) + b"\n")
        fh.write(b"\x00" * 1000 + b"\n")
        fh.write(b"x" * (8 << 20) + b"\n")  # one 8 MiB line
        fh.write(b"Feb 31 25:61:61 dnsmasq-dhcp[1]: 1 DHCPACK(br0) 10.33.3.46 b8:ce:f6:10:33:46 worker-1\n")
        fh.write(f"{_stamp()} dnsmasq-dhcp[1]: 1 DHCPACK(br0) {W0_IP} {W0_MAC} worker-0 \xff\xfe\n"
                 .encode("latin-1"))
        fh.write(f"{_stamp()} dnsmasq-dhcp[1]: 2 DHCPACK(br0) {W1_IP} {W1_MAC} worker-1\n".encode())
        # Its boot loader missing: worker-1 is stuck before its PXE file, with this note.
        fh.write(f"{_stamp()} dnsmasq-tftp[1]: file /srv/\x1b[2Jpxelinux.0 not found for {W1_IP}\n".encode())
    access = tmp_path / "access.log"
    access.write_text(
        f'\x1b[31m - - [{_clf()}] "GET /x HTTP/1.1" 200 1\n'          # an escape where the host goes
        f'{W0_IP} - - [99/Foo/2026:99:99:99 +0000] "GET /a.ign HTTP/1.1" 200 1\n'
        f'::ffff:{W0_IP} - - [{_clf()}] "GET /ignition/worker.ign HTTP/1.1" 200 9\n'  # IPv4 over IPv6
        + "garbage\n" * 1000)
    result = _status(runner, "--dnsmasq-log", str(dnsmasq), "--access-log", str(access),
                     "--stuck-after", "0")
    assert result.exit_code == 1, result.output  # worker-0 is stuck past its ignition
    assert "worker-0: stuck at ignition" in result.stdout
    assert "worker-1: stuck at DHCP" in result.stdout
    assert "\x1b" not in result.stdout and "TFTP: /srv/\\x1b[2Jpxelinux.0 not found" in result.stdout
    assert "not in the inventory" not in result.stdout  # neither the escape nor worker-1's bad date
    doc = json.loads(_status(runner, "--dnsmasq-log", str(dnsmasq), "--access-log", str(access),
                             "--json").stdout)
    w0 = next(n for n in doc["nodes"] if n["name"] == "worker-0")
    assert w0["stages"]["dhcp"]["reached"] and w0["stages"]["ignition"]["reached"]
    assert doc["unknown"] == [] and doc["unread"] == []


def test_only_addresses_that_could_be_nodes_are_strangers_and_the_list_is_capped(runner, tmp_path) -> None:
    access = tmp_path / "access.log"
    lines = [f'10.33.3.{100 + i} - - [{_clf()}] "GET /ignition/worker.ign HTTP/1.1" 200 9' for i in range(30)]
    lines += [f'192.0.2.{i} - - [{_clf()}] "GET /index.html HTTP/1.1" 200 9' for i in range(5)]  # the site's
    access.write_text("\n".join(lines) + "\n")
    result = _status(runner, "--dnsmasq-log", os.devnull, "--access-log", str(access))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("not in the inventory: IP 10.33.3.") == 20
    assert "... and 10 more not in the inventory (--json lists them all)" in result.stdout
    assert "192.0.2." not in result.stdout
    doc = json.loads(_status(runner, "--dnsmasq-log", os.devnull, "--access-log", str(access),
                             "--json").stdout)
    assert len(doc["unknown"]) == 30


def test_a_fifo_a_directory_and_a_device_are_notes_not_hangs(tmp_path) -> None:
    fifo = tmp_path / "dnsmasq.log"
    os.mkfifo(fifo)  # no writer: opening it to read blocks until one comes
    upi = spawn(["status", INVENTORY, "--dnsmasq-log", str(fifo), "--access-log", str(tmp_path),
                 "--json"], tty=False, env={"KUBECONFIG": ""})
    assert upi.finish(limit=60) == 0, upi.stderr()
    assert json.loads(upi.text())["unread"] == [
        f"{fifo}: a FIFO (named pipe), not a regular file", f"{tmp_path}: Is a directory"]
    upi = spawn(["status", INVENTORY, "--dnsmasq-log", "/dev/zero", "--json"], tty=False,
                env={"KUBECONFIG": ""})
    assert upi.finish(limit=60) == 0, upi.stderr()
    assert json.loads(upi.text())["unread"] == ["/dev/zero: a character device, not a regular file"]


def test_a_fifo_on_the_provisioner_is_a_note_not_a_hang(example_dir: Path, tmp_path: Path,
                                                        sshd: Sshd) -> None:
    fifo = tmp_path / "access.log"
    os.mkfifo(fifo)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    inv = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inv.read_text())
    doc["provisioner"].update(dnsmasq_log=os.devnull, http_access_log=str(fifo), ssh={
        "host": "127.0.0.1", "port": sshd.port, "user": "root", "known_hosts": str(known),
        "identity_file": str(sshd.client_key)})
    inv.write_text(yaml.safe_dump(doc))
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes: a read blocks
    try:
        upi = spawn(["status", str(inv), "--json"], tty=False, env={"KUBECONFIG": ""})
        assert upi.finish(limit=60) == 0, upi.stderr()
    finally:
        os.close(writer)
    assert json.loads(upi.text())["unread"] == [
        f"root@127.0.0.1:{sshd.port}:{fifo}: a FIFO (named pipe), not a regular file"]


def test_a_time_without_a_zone_is_an_unknown_time_not_a_crash(runner, tmp_path) -> None:
    out = tmp_path / "out"
    save_record(out, {"worker-0": Installed(W0_MAC, "2026-11-25T10:00:00", "test")})
    result = _status(runner, "-o", str(out), "--dnsmasq-log", os.devnull, "--stuck-after", "0", "--json")
    assert result.exit_code == 0, result.output
    w0 = next(n for n in json.loads(result.stdout)["nodes"] if n["name"] == "worker-0")
    assert w0["stages"]["installed"] == {"reached": True, "time": None} and w0["current"] == "installed"


def test_api_objects_of_the_wrong_shape_are_skipped() -> None:
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    csrs = [None, "x", {"spec": "x"}, {"spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                                                "request": "!!notbase64"}},
            {"spec": {"signerName": "kubernetes.io/kubelet-serving", "username": "system:node:worker-0"},
             "metadata": {"creationTimestamp": "2026-11-25T10:00:00"}}]
    nodes = [None, 7, {"metadata": "x"}, {"metadata": {"name": ["worker-0"]}},
             {"metadata": {"name": "worker-1"}, "status": {"conditions": "Ready"}},
             {"metadata": {"name": "worker-0"}, "status": {"conditions": [None, {"type": "Ready",
                                                           "status": "True", "lastTransitionTime": 5}]}}]
    cluster = cluster_from(inv, csrs, nodes)
    assert dict(cluster.serving_csr) == {"worker-0": None}  # its time has no zone: unknown
    assert dict(cluster.ready) == {"worker-0": None} and dict(cluster.client_csr) == {}
