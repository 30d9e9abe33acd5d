"""Day 2 on the wire: the real dnsmasq, restarted by the site's reload_command, leases the new MAC.

The provisioner is a network namespace whose bridge carries its interface
name and IP (tests/pxe_harness.py `Lab`). `upi push` (local target) writes
the rendered dnsmasq files into the site's dnsmasq_dir and runs the
inventory's reload_command, which (re)starts the real dnsmasq there on
those files as written: the command line adds only the conf-dir (a
provisioner's /etc/dnsmasq.conf names /etc/dnsmasq.d) and the lease file.
The TFTP root and the log are inventory keys, pointed where the dnsmasq
user `nobody` can read and write. A worker written into the inventory is
rendered and pushed as `upi nodes add` does it (upi.day2.add._render_and_push):
a DHCP client with its MAC then gets its reserved address, its name and
GRUB, and GRUB's per-MAC file over TFTP; a node taken out gets nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import require, require_root
from pushkit import Site, make_site
from pxe_harness import DnsmasqLog, Lab, leases

from upi.check.tftpclient import tftp_get
from upi.inventory import load_inventory
from upi.push import push
from upi.renderdir import render
from upi.runner import run

NEW = {"name": "worker-2", "role": "worker", "mac": "b8:ce:f6:10:33:48", "ip": "10.33.3.48",
       "install_disk": "/dev/nvme0n1", "gpu": True}
GONE_MAC, GONE_IP = "b8:ce:f6:10:33:44", "10.33.3.44"  # worker-0
# The site's service manager: stop the running dnsmasq, start it again on the files in place
# (what `systemctl restart dnsmasq` does), and return once it serves. Run by `upi push`.
RELOAD = """
import json, os, signal, subprocess, sys, time
state_file = sys.argv[1]
state = json.load(open(state_file))
pid = state.get("pid")
if pid:
    os.kill(pid, signal.SIGTERM)
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/status") as fh:
                if "State:\\tZ" in fh.read():
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
log = state["log"]
seen = open(log).read().count("TFTP root is") if os.path.exists(log) else 0
proc = subprocess.Popen(state["argv"], stdin=subprocess.DEVNULL, stdout=open(state["out"], "ab"),
                        stderr=subprocess.STDOUT, start_new_session=True)
state["pid"] = proc.pid
json.dump(state, open(state_file, "w"))
for _ in range(200):
    if os.path.exists(log) and open(log).read().count("TFTP root is") > seen:
        sys.exit(0)
    if proc.poll() is not None:
        sys.exit(f"dnsmasq exited {proc.returncode}: " + open(state["out"]).read())
    time.sleep(0.05)
sys.exit("dnsmasq did not start within 10 s")
"""


def _stop(state_file: Path) -> None:
    """Kill the dnsmasq the last reload started (it is no child of the Lab: started by push)."""
    pid = json.loads(state_file.read_text()).get("pid")
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def lab_site(runner, tmp_path: Path, example_dir: Path) -> Iterator[tuple[Lab, Site, Path]]:
    """The pushed day-1 site, its dnsmasq running in the lab, restarted by every push that changes it."""
    require_root("a network namespace for the provisioner's dnsmasq")
    dnsmasq = require("dnsmasq")
    require("busybox")
    inv = load_inventory(example_dir / "dgxpod.yaml")
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(tmp_path / "lab", inv.provisioner.interface, address) as lab:
        public = lab.public / "srv"
        public.mkdir()
        public.chmod(0o1777)  # dnsmasq serves TFTP and writes its log as `nobody`
        site = make_site(tmp_path, example_dir, runner, {"local": True})
        state = tmp_path / "dnsmasq.state"
        script = tmp_path / "restart-dnsmasq.py"
        script.write_text(RELOAD)
        log = public / "dnsmasq-upi.log"
        state.write_text(json.dumps({
            "argv": ["ip", "netns", "exec", lab.ns, dnsmasq, "--keep-in-foreground", "--pid-file=",
                     f"--conf-dir={site.root / 'etc/dnsmasq.d'}",
                     f"--dhcp-leasefile={lab.workdir / 'leases'}"],
            "log": str(log), "out": str(tmp_path / "dnsmasq.out")}))
        doc = yaml.safe_load(site.inventory.read_text())
        doc["provisioner"].update(tftp_root=str(public / "tftp"), dnsmasq_log=str(log))
        doc["provisioner"]["ssh"]["reload_command"] = [sys.executable, str(script), str(state)]
        site.inventory.write_text(yaml.safe_dump(doc))
        try:
            render_and_push(site)
            yield lab, site, log
        finally:
            _stop(state)


def render_and_push(site: Site) -> None:
    """What `upi nodes add` does between the ignition and the boot (upi.day2.add._render_and_push)."""
    render(site.inventory, site.out, retire_bootstrap=None)
    push(load_inventory(site.inventory), site.out)


def edit(site: Site, *, add: dict[str, object] | None = None, drop: str | None = None) -> None:
    doc = yaml.safe_load(site.inventory.read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != drop] + ([add] if add else [])
    site.inventory.write_text(yaml.safe_dump(doc))


def discover_uefi(lab: Lab, mac: str) -> None:
    """DHCP from `mac` as UEFI x86-64 firmware asks (client-arch 7), on a veth port of the bridge."""
    port = f"uefi{lab.taps}"
    lab.taps += 1
    lab.ip("link", "add", port, "type", "veth", "peer", "name", port + "b")
    lab.ip("link", "set", port, "address", mac)
    lab.ip("link", "set", port + "b", "master", lab.bridge, "up")
    lab.ip("link", "set", port, "up")
    run(["ip", "netns", "exec", lab.ns, "busybox", "udhcpc", "-i", port, "-n", "-q", "-f", "-t", "6",
         "-T", "1", "-x", "0x5d:0007", "-s", "/bin/true"], timeout=30, check=False)


def bootfiles(text: str, mac: str) -> set[str]:
    """The boot file names dnsmasq logged for its replies to `mac` (log-dhcp)."""
    xids = {line.split()[0] for line in _lines(text) if f" {mac}" in line and "DHCPOFFER" in line}
    return {line.split("bootfile name: ", 1)[1].strip() for line in _lines(text)
            if "bootfile name: " in line and line.split()[0] in xids}


def _lines(text: str) -> list[str]:
    # "Nov 27 11:00:00 dnsmasq-dhcp[42]: 1234 DHCPOFFER(br) ..." -> "1234 DHCPOFFER(br) ..."
    return [line.split("]: ", 1)[1] for line in text.splitlines() if "dnsmasq-dhcp[" in line]


def test_the_new_mac_gets_its_lease_and_grub_and_a_removed_mac_gets_nothing(lab_site) -> None:
    lab, site, log = lab_site
    edit(site, add=NEW)
    render_and_push(site)
    discover_uefi(lab, str(NEW["mac"]))
    grub = bytearray()
    cfg = "grub.cfg-01-" + str(NEW["mac"]).replace(":", "-")
    lab.inside(lambda: tftp_get(str(load_inventory(site.inventory).provisioner.ip), 69, cfg, grub.extend))
    after_add = DnsmasqLog(log.read_text())

    edit(site, drop="worker-0")
    render_and_push(site)
    start = len(log.read_text())
    discover_uefi(lab, GONE_MAC)
    after_remove = DnsmasqLog(log.read_text()[start:])

    assert after_add.acks()[str(NEW["mac"])] == (NEW["ip"], NEW["name"]), after_add.text
    assert leases(lab.workdir / "leases")[str(NEW["mac"])] == (NEW["ip"], NEW["name"])
    assert bootfiles(after_add.text, str(NEW["mac"])) == {"grubx64.efi"}, after_add.text
    assert bytes(grub) == (site.out / "tftp" / cfg).read_bytes()
    assert GONE_IP not in after_remove.offered(GONE_MAC), after_remove.text
    assert after_remove.refused(GONE_MAC), after_remove.text


def test_restarts_come_from_the_reload_command_only_when_dnsmasq_files_change(lab_site) -> None:
    lab, site, log = lab_site
    started = log.read_text().count("TFTP root is")
    render_and_push(site)  # nothing changed: no restart
    assert log.read_text().count("TFTP root is") == started
    edit(site, add=NEW)
    render_and_push(site)
    assert log.read_text().count("TFTP root is") == started + 1
