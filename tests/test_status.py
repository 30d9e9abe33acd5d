"""`upi status` on what real programs wrote: nginx's access log, and the fake API's CSRs and Nodes.

dnsmasq's side (DHCP leases, TFTP files) is read from the log of the real
dnsmasq serving the qemu PXE clients, in test_pxe_boot.py.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import struct
import time
from datetime import datetime
from pathlib import Path

import pytest
import realnginx
import yaml
from bootvms_support import node_uri, require_libvirt, shut_off
from conftest import inventory_path, require, require_root
from csr_cases import client, serving
from fake_apiserver import FakeApiServer
from pushkit import Sshd
from pxe_harness import Lab
from status_support import spawn

from upi.cli import app
from upi.facts import vm_specs
from upi.installed import Installed, save_record
from upi.inventory import load_inventory
from upi.remote import LocalTransport, SshTransport
from upi.render import domain_xml
from upi.status.logs import access_events, dnsmasq_events
from upi.status.stages import CAUSES, IGNITION_404, IGNITION_OLD
from upi.vms import Connections
from upi.vms.installed import installed_vms
from upi.vms.libvirt_ops import boot_from_disk_xml

INVENTORY = str(inventory_path("dgxpod"))
STRANGER_IP = "10.33.3.99"  # inside dgxpod's machine_cidr, no node's
# nginx has no predefined "common" format; this is the CLF httpd writes.
ACCESS_LOGS = """\
    log_format common '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent';
    access_log {tmp}/combined.log combined;
    access_log {tmp}/common.log common;"""


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """KUBECONFIG from the environment would add a real cluster to every status here."""
    monkeypatch.delenv("KUBECONFIG", raising=False)


def _status(runner, *args: str):
    result = runner.invoke(app, ["status", INVENTORY, *args])
    doc = json.loads(result.stdout) if "--json" in args else None
    return result, doc


def _node(doc, name: str):
    return next(n for n in doc["nodes"] if n["name"] == name)


# --- the HTTP server's side: real nginx, clients at the nodes' addresses ------------------------

ROOTFS_SIZE = 16 << 20  # large enough that a client closing early leaves most of it unsent
LEGACY = str(inventory_path("legacy-4.3"))


def _request(prov: str, port: int, source: str, method: str, path: str, *, headers: dict[str, str],
             cut: bool = False) -> int:
    """One request from `source`; `cut`: read the first bytes of the body, then reset the connection
    (a node that gave up, a link that dropped). Retries while nginx is still starting."""
    end = time.monotonic() + 10
    while True:
        sock = socket.socket()
        try:
            if cut:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.bind((source, 0))
            sock.settimeout(5)
            sock.connect((prov, port))
            break
        except OSError:
            sock.close()
            if time.monotonic() > end:
                raise
            time.sleep(0.05)  # nginx still starting
    conn = http.client.HTTPConnection(prov, port, timeout=5)
    conn.sock = sock
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        if cut:
            resp.read(8192)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        else:
            resp.read()
        return resp.status
    finally:
        conn.close()


def _wait_lines(work: Path, count: int) -> None:
    """nginx logs a request after its response is sent: the client can be done first. Leaving the
    lab stops nginx, so wait for the lines (seen lost under load: CI, 2026-11-25)."""
    end = time.monotonic() + 10
    while not all(len((work / f"{fmt}.log").read_text().splitlines()) >= count
                  for fmt in ("combined", "common")) and time.monotonic() < end:
        time.sleep(0.05)


@pytest.fixture(scope="module")
def nginx_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nginx serving an HTTP root on the provisioner's address, asked what real nodes ask.

    dgxpod (4.16, live PXE: the initramfs fetches the rootfs, then coreos-installer the
    ignition): worker-0 fetches both; worker-1 its rootfs, then an ignition never pushed
    (404); master-0 sends a HEAD for the rootfs, then a GET it abandons after 8 KiB;
    master-1 a range of it (206); a stranger an ignition file. Then legacy-4.3 (the
    metal image; the legacy installer sends a HEAD for the image, GETs the ignition, then
    the image), in legacy.log: worker-0 does all three; worker-1's HEAD finds no image
    (404); master-0 gets its ignition and abandons the image.
    """
    require_root("a network namespace with the nodes' addresses")
    inv = load_inventory(inventory_path("dgxpod"))
    legacy = load_inventory(LEGACY, check_files=False)
    work = tmp_path_factory.mktemp("status-nginx")
    root = work / "root"
    (root / "ignition").mkdir(parents=True)
    (root / "rhcos").mkdir()
    (root / "ignition/worker.ign").write_text('{"ignition": {"version": "3.2.0"}}')
    (root / "ignition/master.ign").write_text('{"ignition": {"version": "2.2.0"}}')
    assert inv.rhcos.rootfs is not None and legacy.rhcos.image is not None
    (root / inv.rhcos.rootfs).write_bytes(os.urandom(ROOTFS_SIZE))
    (root / legacy.rhcos.image).write_bytes(os.urandom(ROOTFS_SIZE))
    prov, port = str(inv.provisioner.ip), 8080
    prefix = inv.network.machine_cidr.prefixlen
    conf = realnginx.write_conf(work, root, host=prov, port=port, http=ACCESS_LOGS.format(tmp=work))
    rootfs, image = f"/{inv.rhcos.rootfs}", f"/{legacy.rhcos.image}"
    with Lab(work / "lab", inv.provisioner.interface, f"{prov}/{prefix}") as lab:
        for ip in ("10.33.3.44", "10.33.3.46", "10.33.3.50", "10.33.3.51", STRANGER_IP):
            lab.ip("addr", "add", f"{ip}/{prefix}", "dev", lab.bridge)
        lab.spawn(realnginx.argv(conf), work / "nginx.out")

        def ask(source: str, method: str, path: str, cut: bool = False, **headers: str) -> int:
            return _request(prov, port, source, method, path, headers=headers, cut=cut)

        def live() -> list[int]:
            return [ask("10.33.3.44", "GET", rootfs), ask("10.33.3.44", "GET", "/ignition/worker.ign"),
                    ask("10.33.3.46", "GET", rootfs), ask("10.33.3.46", "GET", "/ignition/missing.ign?x=1"),
                    ask("10.33.3.50", "HEAD", rootfs), ask("10.33.3.50", "GET", rootfs, cut=True),
                    ask("10.33.3.51", "GET", rootfs, Range="bytes=0-99"),
                    ask(STRANGER_IP, "GET", "/ignition/worker.ign")]

        def old() -> list[int]:
            return [ask("10.33.3.44", "HEAD", image), ask("10.33.3.44", "GET", "/ignition/worker.ign"),
                    ask("10.33.3.44", "GET", image),
                    ask("10.33.3.46", "HEAD", "/gone/" + image.rsplit("/", 1)[1]),  # its name, not there
                    ask("10.33.3.50", "GET", "/ignition/master.ign"),
                    ask("10.33.3.50", "GET", image, cut=True)]

        assert lab.inside(live) == [200, 200, 200, 404, 200, 200, 206, 200]
        _wait_lines(work, 8)
        assert lab.inside(old) == [200, 200, 200, 404, 200, 200]
        _wait_lines(work, 14)
    for fmt in ("combined", "common"):  # each run's lines in a log of its own
        lines = (work / f"{fmt}.log").read_text().splitlines(keepends=True)
        (work / f"{fmt}.log").write_text("".join(lines[:8]))
        (work / f"legacy-{fmt}.log").write_text("".join(lines[8:]))
    return work


def test_access_log_parser_reads_what_nginx_wrote_in_both_formats(nginx_logs: Path) -> None:
    combined = list(access_events((nginx_logs / "combined.log").read_text().splitlines()))
    common = list(access_events((nginx_logs / "common.log").read_text().splitlines()))
    assert combined == common
    rootfs = "/rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"
    got = [(e.ip, e.method, e.path, e.status, e.size) for e in combined]
    ign = len('{"ignition": {"version": "3.2.0"}}')
    assert got[:5] == [
        ("10.33.3.44", "GET", rootfs, 200, ROOTFS_SIZE),
        ("10.33.3.44", "GET", "/ignition/worker.ign", 200, ign),
        ("10.33.3.46", "GET", rootfs, 200, ROOTFS_SIZE),
        ("10.33.3.46", "GET", "/ignition/missing.ign", 404, got[3][4]),  # no query string in the path
        ("10.33.3.50", "HEAD", rootfs, 200, 0),  # headers only: no body
    ]
    # The abandoned GET: nginx logs 200, and the bytes it sent before the reset.
    assert got[5][:4] == ("10.33.3.50", "GET", rootfs, 200) and 0 < got[5][4] < ROOTFS_SIZE
    assert got[6] == ("10.33.3.51", "GET", rootfs, 206, 100)
    assert got[7] == (STRANGER_IP, "GET", "/ignition/worker.ign", 200, ign)
    assert all(abs((e.time - datetime.now().astimezone()).total_seconds()) < 600 for e in combined)


def test_status_places_nodes_in_the_order_a_live_pxe_node_fetches(runner, nginx_logs: Path) -> None:
    result, doc = _status(runner, "--dnsmasq-log", os.devnull, "--access-log",
                          str(nginx_logs / "combined.log"), "--stuck-after", "0", "--json")
    assert result.exit_code == 1, result.output  # nodes are stuck
    w0, w1 = _node(doc, "worker-0"), _node(doc, "worker-1")
    assert w0["stages"]["ignition"]["reached"] and w0["stages"]["rootfs"]["reached"]
    assert w0["current"] == "ignition"  # the rootfs comes first, then the ignition
    assert w0["causes"] == list(CAUSES["installed"])
    # Its rootfs, then a 404 on its ignition: stuck at rootfs for the ignition's causes.
    assert w1["stages"]["rootfs"]["reached"] and not w1["stages"]["ignition"]["reached"]
    assert w1["current"] == "rootfs"
    assert w1["causes"] == [IGNITION_404, *CAUSES["ignition"]]
    m0, m1 = _node(doc, "master-0"), _node(doc, "master-1")
    # A HEAD, an abandoned GET and a range fetch no rootfs.
    assert not m0["stages"]["rootfs"]["reached"] and not m1["stages"]["rootfs"]["reached"]
    (cut,) = [c for c in m0["causes"] if "was cut after" in c]
    assert cut.startswith("the rootfs rhcos-4.16.3-x86_64-live-rootfs.x86_64.img was cut after ")
    assert cut.split(" of ")[1].startswith(f"{ROOTFS_SIZE} bytes (HTTP 200)")
    assert m1["causes"] == list(CAUSES["dhcp"])  # no dnsmasq log here: nothing else is known
    (unknown,) = doc["unknown"]
    assert (unknown["kind"], unknown["value"], unknown["seen"]) == ("ip", STRANGER_IP,
                                                                   "HTTP /ignition/worker.ign 200")
    assert _node(doc, "bootstrap")["stages"]["rootfs"] == {"reached": False, "time": None}
    assert _node(doc, "master-0")["stages"]["gpu"] is None  # not a GPU node
    assert _node(doc, "master-0")["stages"]["image"] is None  # 4.16 has no metal image


def test_status_places_legacy_nodes_ignition_first_then_the_image(runner, nginx_logs: Path) -> None:
    result = runner.invoke(app, ["status", LEGACY, "--dnsmasq-log", os.devnull, "--access-log",
                                 str(nginx_logs / "legacy-common.log"), "--stuck-after", "0", "--json"])
    doc = json.loads(result.stdout)
    w0, w1, m0 = _node(doc, "worker-0"), _node(doc, "worker-1"), _node(doc, "master-0")
    assert w0["stages"]["rootfs"] is None
    assert w0["stages"]["ignition"]["reached"] and w0["stages"]["image"]["reached"]
    assert w0["current"] == "metal image" and w0["causes"] == list(CAUSES["installed"])
    # The legacy installer's HEAD for its image found nothing: it never got further.
    assert w1["current"] == "waiting"
    assert w1["causes"][0] == ("the metal image rhcos-4.3.8-x86_64-metal.x86_64.raw.gz was not "
                               "found on the HTTP server (HTTP 404): run upi images, then upi push")
    assert m0["current"] == "ignition" and not m0["stages"]["image"]["reached"]
    assert "was cut after" in m0["causes"][0] and m0["causes"][1:] == list(CAUSES["image"])


def test_status_table_shows_times_and_the_stuck_nodes_causes(runner, nginx_logs: Path) -> None:
    result, _ = _status(runner, "--dnsmasq-log", os.devnull, "--access-log",
                        str(nginx_logs / "common.log"), "--stuck-after", "0")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1].split()[:4] == ["NODE", "ROLE", "DHCP", "PXE"]
    assert "metal image" not in lines[1]  # no node of a 4.16 cluster fetches one
    assert "worker-1: stuck at rootfs" in result.stdout
    assert "upi push" in result.stdout
    assert f"not in the inventory: IP {STRANGER_IP}" in result.stdout


# --- the logs on the provisioner, over upi push's SSH (a real sshd on loopback) -----------------


def _ssh_inventory(example_dir: Path, tmp_path: Path, server: Sshd, **prov: object) -> Path:
    """dgxpod whose provisioner is reached over SSH (127.0.0.1: the sshd), with `prov` set."""
    known = tmp_path / "known_hosts"
    known.write_text(server.known_hosts_line())
    path = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["provisioner"].update(prov, ssh={"host": "127.0.0.1", "port": server.port, "user": "root",
                                         "known_hosts": str(known),
                                         "identity_file": str(server.client_key)})
    path.write_text(yaml.safe_dump(doc))
    return path


def test_status_reads_the_provisioners_logs_over_ssh(runner, nginx_logs: Path, sshd: Sshd,
                                                     example_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-dnsmasq.log"
    inv = _ssh_inventory(example_dir, tmp_path, sshd, dnsmasq_log=str(missing),
                         http_access_log=str(nginx_logs / "combined.log"))
    result = runner.invoke(app, ["status", str(inv), "--stuck-after", "0", "--json"])
    doc = json.loads(result.stdout)
    w0 = _node(doc, "worker-0")
    assert w0["stages"]["ignition"]["reached"] and w0["current"] == "ignition"
    assert IGNITION_404 in _node(doc, "worker-1")["causes"]
    # The missing log is a note naming the host and the file, not a traceback.
    assert doc["unread"] == [f"root@127.0.0.1:{sshd.port}:{missing}: No such file"]
    # --access-log names a file here: the provisioner is not asked.
    result = runner.invoke(app, ["status", str(inv), "--dnsmasq-log", os.devnull,
                                 "--access-log", str(nginx_logs / "common.log"), "--json"])
    assert _node(json.loads(result.stdout), "worker-0")["current"] == "ignition"


def test_an_unknown_provisioner_host_key_is_a_note_and_nothing_is_read(
        runner, nginx_logs: Path, sshd: Sshd, example_dir: Path, tmp_path: Path) -> None:
    inv = _ssh_inventory(example_dir, tmp_path, sshd, http_access_log=str(nginx_logs / "combined.log"))
    (tmp_path / "known_hosts").write_text("")
    result = runner.invoke(app, ["status", str(inv), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["unread"]) == 2 and all(f"127.0.0.1:{sshd.port}" in u for u in doc["unread"])
    assert "known_hosts" in doc["unread"][0]
    assert not _node(doc, "worker-0")["stages"]["ignition"]["reached"]


@pytest.mark.parametrize("remote", [True, False], ids=["ssh", "local"])
def test_only_the_tail_of_a_log_is_read(nginx_logs: Path, sshd: Sshd, tmp_path: Path, remote: bool) -> None:
    log = nginx_logs / "combined.log"
    lines = log.read_bytes().splitlines(keepends=True)
    if remote:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        t = SshTransport("127.0.0.1", port=sshd.port, known_hosts=known, identity_file=sshd.client_key)
    else:
        t = LocalTransport()
    try:
        limit = len(lines[-1]) + len(lines[-2]) // 2  # the last line and half of the one before
        assert t.read_tail(str(log), limit) == lines[-1]  # the cut line is dropped
        assert t.read_tail(str(log), 1 << 20) == log.read_bytes()
        with pytest.raises(FileNotFoundError):
            t.read_tail(str(tmp_path / "none.log"), 100)
    finally:
        t.close()


# --- the API's side: the fake API server's CSRs and Nodes --------------------------------------

@pytest.fixture
def fake(tmp_path):
    server = FakeApiServer(tmp_path / "assets").start()
    yield server
    server.stop()


def test_status_reads_csrs_and_nodes_from_the_api(runner, fake) -> None:
    for spec in (client("master-0"), serving("master-0"), client("master-1")):
        fake.add_csr(spec.name, spec.pem, **spec.kwargs())
    fake.add_node("master-0", ready=True)
    fake.add_node("master-1", ready=False)
    result, doc = _status(runner, "--kubeconfig", str(fake.kubeconfig), "--dnsmasq-log", os.devnull,
                          "--stuck-after", "0", "--json")
    m0, m1 = _node(doc, "master-0"), _node(doc, "master-1")
    assert m0["current"] == "Ready" and m0["done"] and not m0["stuck"]
    assert all(m0["stages"][k]["reached"] for k in ("client_csr", "serving_csr", "ready"))
    assert m1["current"] == "client CSR" and m1["stuck"]
    assert m1["causes"] == list(CAUSES["serving_csr"])
    assert not _node(doc, "worker-0")["stages"]["gpu"]["reached"]
    assert result.exit_code == 1


def test_old_ignition_files_are_named_for_an_installed_node_with_no_csr(runner, fake, tmp_path) -> None:
    assets = fake.kubeconfig.parent.parent
    ign = assets / "worker.ign"
    ign.write_text("{}")
    fake.add_csr("c", client("master-0").pem, **client("master-0").kwargs())
    out = tmp_path / "out"
    out.mkdir()
    save_record(out, {"worker-0": Installed("b8:ce:f6:10:33:44", "2026-11-25T10:00:00+00:00", "test")})
    args = ["--dir", str(assets), "-o", str(out), "--dnsmasq-log", os.devnull, "--stuck-after", "0", "--json"]
    _, fresh = _status(runner, *args)
    assert _node(fresh, "worker-0")["causes"] == list(CAUSES["client_csr"])
    day_ago = time.time() - 25 * 3600
    os.utime(ign, (day_ago, day_ago))
    _, doc = _status(runner, *args)
    assert _node(doc, "worker-0")["current"] == "installed"
    assert _node(doc, "worker-0")["causes"] == [IGNITION_OLD, *CAUSES["client_csr"]]
    assert IGNITION_OLD not in _node(doc, "master-0")["causes"]  # it has its client CSR


@pytest.mark.parametrize("installed_by", ["upi wait", "openshift-install"])
def test_old_ignition_on_an_installed_cluster_never_leads_to_upi_ignition(
        runner, fake, tmp_path, installed_by: str) -> None:
    assets = fake.kubeconfig.parent.parent
    ign = assets / "worker.ign"
    ign.write_text("{}")
    day_ago = time.time() - 25 * 3600
    os.utime(ign, (day_ago, day_ago))
    if installed_by == "upi wait":
        (assets / ".upi-wait.json").write_text('{"done": {"install_complete": 1200.0}}')
    else:
        (assets / ".openshift_install.log").write_text(
            'time="2026-11-25T10:00:00Z" level=info msg="Install complete!"\n')
    out = tmp_path / "out"
    out.mkdir()
    save_record(out, {"worker-0": Installed("b8:ce:f6:10:33:44", "2026-11-25T10:00:00+00:00", "test")})
    args = ["--dir", str(assets), "-o", str(out), "--dnsmasq-log", os.devnull, "--stuck-after", "0", "--json"]
    _, doc = _status(runner, *args)
    causes = _node(doc, "worker-0")["causes"]
    assert IGNITION_OLD not in causes and not any("upi ignition" in c for c in causes)


def test_unreachable_api_is_reported_and_the_logs_still_shown(runner, tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube = tmp_path / "kubeconfig"
    fake = FakeApiServer(tmp_path / "other")  # never started: a kubeconfig pointing at nothing
    kube.write_text(fake.kubeconfig.read_text().replace(fake.url, f"https://127.0.0.1:{port}"))
    result, doc = _status(runner, "--kubeconfig", str(kube), "--dnsmasq-log", os.devnull, "--json")
    assert result.exit_code == 0, result.output
    assert doc["unread"] and doc["unread"][0].startswith("the API")


def test_missing_log_is_reported_not_fatal(runner, tmp_path) -> None:
    result, doc = _status(runner, "--dnsmasq-log", str(tmp_path / "none.log"), "--json")
    assert result.exit_code == 0
    assert doc["unread"] == [f"{tmp_path / 'none.log'}: No such file or directory"]


def test_dnsmasq_stamps_take_the_year_before_now() -> None:
    now = datetime(2027, 1, 2, 0, 0, 5).astimezone()
    line = "Dec 31 23:59:01 dnsmasq-dhcp[7]: 123 DHCPACK(br0) 10.33.3.44 b8:ce:f6:10:33:44 worker-0"
    (ev,) = dnsmasq_events([line], now)
    assert (ev.time.year, ev.kind, ev.mac, ev.ip) == (2026, "dhcp", "b8:ce:f6:10:33:44", "10.33.3.44")


# --- VM power state: libvirt's test driver, the domains upi renders ----------------------------

def _vm_domains(*, switched: str, never_started: str, other_mac: str) -> list[str]:
    """dgxpod's VM domains as upi renders them: `switched` boots from disk (boot-vms moved it after
    its install), `never_started` is defined and shut off, `other_mac` is another machine of that
    name; the rest run in their install phase."""
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    out = []
    for spec in vm_specs(inv):
        xml = domain_xml(spec)
        if spec.name == switched:
            xml = boot_from_disk_xml(xml[xml.index("<domain"):])
        if spec.name == other_mac:
            xml = xml.replace(spec.mac, "52:54:00:99:99:99")
        out.append(shut_off(xml) if spec.name == never_started else xml[xml.index("<domain"):])
    return out


def test_a_vm_powered_off_by_its_install_is_installed(tmp_path: Path) -> None:
    libvirt = require_libvirt()
    uri = node_uri(tmp_path, *_vm_domains(switched="master-2", never_started="bootstrap",
                                          other_mac="master-1"))
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    with Connections() as conns:
        assert installed_vms(inv, connect=uri, connections=conns) == ({"master-2"}, [])
        # RHCOS reboots at the end of its install; on_reboot=destroy powers the VM off.
        for name in ("master-0", "master-1"):
            conns.get(uri).lookupByName(name).reboot()
        assert conns.get(uri).lookupByName("master-0").state() == [
            libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN]
        # master-1's domain has another MAC: not the inventory's machine.
        assert installed_vms(inv, connect=uri, connections=conns) == ({"master-0", "master-2"}, [])
        conns.get(uri).lookupByName("master-2").destroy()  # off after its switch: still installed
        assert installed_vms(inv, connect=uri, connections=conns)[0] == {"master-0", "master-2"}


def test_status_reads_vm_state_with_connect(runner, tmp_path: Path) -> None:
    require_libvirt()
    uri = node_uri(tmp_path, *_vm_domains(switched="master-0", never_started="bootstrap",
                                          other_mac="master-1"))
    result, doc = _status(runner, "--connect", uri, "--dnsmasq-log", os.devnull, "--json")
    assert result.exit_code == 0, result.output
    assert _node(doc, "master-0")["stages"]["installed"] == {"reached": True, "time": None}
    assert _node(doc, "master-0")["current"] == "installed"
    for name in ("bootstrap", "master-1", "master-2"):
        assert not _node(doc, name)["stages"]["installed"]["reached"], name
    assert doc["unread"] == []
    bad = f"test://{tmp_path / 'none.xml'}"
    result, doc = _status(runner, "--connect", bad, "--dnsmasq-log", os.devnull, "--json")
    assert result.exit_code == 0, result.output
    (note,) = doc["unread"]
    assert note.startswith(f"libvirt: {bad}: cannot connect")


# --- nothing prompts: an ssh hypervisor whose host key is unknown -------------------------------

def test_status_never_prompts_for_an_ssh_hypervisor(example_dir: Path, sshd: Sshd) -> None:
    """libvirt's qemu+ssh runs the ssh client, which asks on the terminal about an unknown host key
    (and for a password): on a terminal of its own, status must still end, without asking."""
    require_libvirt()
    require("ssh")
    inv = example_dir / "dgxpod.yaml"
    uri = f"qemu+ssh://nobody@127.0.0.1:{sshd.port}/system"
    inv.write_text(inv.read_text().replace("uri: qemu:///system", f"uri: {uri}"))
    quiet = spawn(["status", str(inv), "--dnsmasq-log", os.devnull], tty=True,
                  env={"KUBECONFIG": ""})
    assert quiet.finish() == 0, quiet.text()
    assert "continue connecting" not in quiet.text() and "assword" not in quiet.text()
    assert "libvirt" not in quiet.text()  # without --connect an unreachable hypervisor is silent
    told = spawn(["status", str(inv), "--dnsmasq-log", os.devnull, "--connect", uri, "--json"],
                 tty=True, env={"KUBECONFIG": ""})
    assert told.finish() == 0, told.text()
    doc = json.loads(told.text()[told.text().index("{"):])
    (note,) = doc["unread"]
    assert note.startswith(f"libvirt: {uri}: cannot connect") and "Host key verification failed" in note


# --- which requests are fetches, and whose causes a stuck node shows ------------------------------

def _clf() -> str:
    return datetime.now().astimezone().strftime("%d/%b/%Y:%H:%M:%S %z")


def test_a_body_shorter_than_the_pushed_file_is_no_fetch(runner, tmp_path: Path) -> None:
    """The render dir's copy gives the size: a GET of worker.ign that sent fewer bytes was cut."""
    out = tmp_path / "out"
    (out / "http/ignition").mkdir(parents=True)
    (out / "http/ignition/worker.ign").write_text("x" * 1000)
    rootfs = "/rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"
    access = tmp_path / "access.log"
    access.write_text(
        f'10.33.3.44 - - [{_clf()}] "GET {rootfs} HTTP/1.1" 200 4096\n'
        f'10.33.3.44 - - [{_clf()}] "GET /ignition/worker.ign HTTP/1.1" 200 999\n'
        f'10.33.3.46 - - [{_clf()}] "GET {rootfs} HTTP/1.1" 403 153\n'
        f'10.33.3.50 - - [{_clf()}] "GET {rootfs} HTTP/1.1" 200 4096\n'
        f'10.33.3.50 - - [{_clf()}] "GET /ignition/master.ign HTTP/1.1" 200 1000\n')
    args = ["--dnsmasq-log", os.devnull, "--access-log", str(access), "--stuck-after", "0", "--json"]
    _, doc = _status(runner, "-o", str(out), *args)
    w0 = _node(doc, "worker-0")
    assert w0["current"] == "rootfs" and not w0["stages"]["ignition"]["reached"]
    assert w0["causes"] == ["its ignition file was cut after 999 of 1000 bytes (HTTP 200): the node "
                            "gave up or the link dropped mid-way (watch the node's console), or the "
                            "server holds another copy than upi's (upi push)",
                            *CAUSES["ignition"]]
    assert _node(doc, "worker-1")["causes"][0].startswith(
        "the HTTP server refused the rootfs rhcos-4.16.3-x86_64-live-rootfs.x86_64.img (HTTP 403)")
    assert _node(doc, "master-0")["current"] == "ignition"  # no copy of master.ign: size unknown
    _, doc = _status(runner, *args)  # no render dir: worker.ign's size is not known either
    assert _node(doc, "worker-0")["current"] == "ignition"


def test_causes_are_those_of_the_stage_the_node_lacks(runner, tmp_path: Path) -> None:
    """A missing kernel is a cause for a node stuck before its kernel, not for one past it."""
    stamp = datetime.now().astimezone().strftime("%b %e %H:%M:%S")
    dnsmasq = tmp_path / "dnsmasq.log"
    lines, kernel = [], "/var/lib/tftpboot/rhcos/rhcos-4.16.3-x86_64-live-kernel-x86_64"
    for ip, mac in (("10.33.3.44", "b8:ce:f6:10:33:44"), ("10.33.3.46", "b8:ce:f6:10:33:46")):
        grub = f"/var/lib/tftpboot/grub.cfg-01-{mac.replace(':', '-')}"
        lines += [f"{stamp} dnsmasq-dhcp[1]: 1 DHCPACK(br0) {ip} {mac} x",
                  f"{stamp} dnsmasq-tftp[1]: sent {grub} to {ip}",
                  f"{stamp} dnsmasq-tftp[1]: file {kernel} not found for {ip}"]
    dnsmasq.write_text("\n".join(lines) + "\n")
    access = tmp_path / "access.log"
    access.write_text(f'10.33.3.44 - - [{_clf()}] "GET /rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img '
                      'HTTP/1.1" 200 4096\n')  # worker-0 got further (its kernel came from elsewhere)
    _, doc = _status(runner, "--dnsmasq-log", str(dnsmasq), "--access-log", str(access),
                     "--stuck-after", "0", "--json")
    missing = f"TFTP: {kernel} not found"
    w0, w1 = _node(doc, "worker-0"), _node(doc, "worker-1")
    assert w1["current"] == "PXE file" and w1["causes"] == [missing, *CAUSES["kernel"]]
    assert w0["current"] == "rootfs" and w0["causes"] == list(CAUSES["ignition"])
