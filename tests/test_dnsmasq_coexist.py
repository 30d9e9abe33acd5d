"""The rendered dnsmasq files start beside libvirt's dnsmasq and a stub resolver.

The provisioning server is usually also the KVM host: libvirt's own dnsmasq
serves `virbr0` (DNS on 192.168.122.1:53, DHCP on virbr0), and
systemd-resolved may hold 127.0.0.53:53. Inside a network namespace this test
builds exactly that, then starts one real dnsmasq on the rendered
`dnsmasq/` directory as the provisioner's conf-dir would hold it, the files
unmodified: only the TFTP root and the lease file are moved on the command
line (the site's do not exist here; see `Lab.start_rendered`). It proves DNS
answers and a DHCP lease on the provisioner's interface while libvirt's
dnsmasq keeps serving `virbr0` and the stub keeps its port.
"""

from __future__ import annotations

import json
import sys
import time
from ipaddress import ip_network
from pathlib import Path

import pytest
from conftest import EXAMPLES, inventory_path, require, require_root
from pxe_harness import DnsmasqLog, Lab, leases
from typer.testing import CliRunner

from upi.cli import app
from upi.facts import dns_records
from upi.inventory import Inventory, load_inventory
from upi.runner import run

VIRBR = "virbr0"
# libvirt's default network, or another when the inventory's machine network is that one
# (compact is): two interfaces on one subnet would make the routing, not dnsmasq, decide.
VIRBR_NETS = ("192.168.122", "198.51.100")
STUB = "127.0.0.53"
VIRT_MAC = "52:54:00:7e:57:01"  # a guest on libvirt's NAT network
# What libvirt writes for its default NAT network (the options that bind and serve).
LIBVIRT_CONF = f"""strict-order
except-interface=lo
bind-dynamic
interface={VIRBR}
dhcp-range={{net}}.2,{{net}}.254,255.255.255.0
dhcp-no-override
dhcp-authoritative
dhcp-lease-max=253
host-record=libvirt-guest.test,{{net}}.9
"""
# A stub resolver holding 127.0.0.53:53 (UDP and TCP) as systemd-resolved does; echoes datagrams.
STUB_SCRIPT = f"""
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("{STUB}", 53))
t = socket.socket(); t.bind(("{STUB}", 53)); t.listen()
print("ready", flush=True)
while True:
    data, peer = u.recvfrom(512)
    u.sendto(b"stub:" + data, peer)
"""
# Run inside the namespace: the answers of every server there, as JSON.
PROBE_SCRIPT = """
import json, socket, sys
import dns.message, dns.query
out = {}
for server, name in json.loads(sys.argv[1]):
    reply = dns.query.udp(dns.message.make_query(name, "A"), server, port=53, timeout=2)
    out[server + " " + name] = sorted(r.address for rrset in reply.answer for r in rrset)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(b"ping", (sys.argv[2], 53))
out["stub"] = s.recvfrom(64)[0].decode()
print(json.dumps(out))
"""


def _wait_for(path: Path, text: str, what: str) -> None:
    end = time.monotonic() + 10
    while not (path.exists() and text in path.read_text(errors="replace")):
        assert time.monotonic() < end, f"{what} did not start: {path.read_text(errors='replace')}"
        time.sleep(0.05)


def _virbr_net(inv: Inventory) -> str:
    return next(n for n in VIRBR_NETS if not inv.network.machine_cidr.overlaps(ip_network(f"{n}.0/24")))


def _neighbours(lab: Lab, dnsmasq: str, net: str) -> Path:
    """libvirt's dnsmasq on virbr0 (`net`.0/24) and the stub on 127.0.0.53:53; returns libvirt's log."""
    lab.ip("link", "add", VIRBR, "type", "bridge")
    lab.ip("addr", "add", f"{net}.1/24", "dev", VIRBR)
    # libvirt keeps a port on the bridge (virbr0-nic) so it has carrier before any guest starts.
    # (No dummy driver here: one end of a veth pair plays that port.)
    lab.ip("link", "add", f"{VIRBR}-nic", "type", "veth", "peer", "name", f"{VIRBR}-peer")
    lab.ip("link", "set", f"{VIRBR}-nic", "master", VIRBR, "up")
    lab.ip("link", "set", f"{VIRBR}-peer", "up")
    lab.ip("link", "set", VIRBR, "up")
    conf = lab.workdir / "libvirt-default.conf"
    conf.write_text(LIBVIRT_CONF.format(net=net))
    log = lab.workdir / "libvirt-dnsmasq.log"
    lab.spawn([dnsmasq, "--keep-in-foreground", f"--conf-file={conf}", "--pid-file=", "--no-hosts",
               f"--dhcp-leasefile={lab.workdir / 'libvirt.leases'}", "--user=root",
               f"--log-facility={log}"], lab.workdir / "libvirt-dnsmasq.out")
    _wait_for(log, "DHCP, IP range", "libvirt's dnsmasq")
    lab.spawn([sys.executable, "-c", STUB_SCRIPT], lab.workdir / "stub.out")
    _wait_for(lab.workdir / "stub.out", "ready", "the 127.0.0.53 stub")
    return log


# What admins wrote before upi bound its files to an interface: the same services on the
# wildcard address. Not a rendered file: the negative control's stand-in for one.
WILDCARD_CONF = """port=0
dhcp-range={net},static,12h
enable-tftp
"""


def _render(name: str, out: Path) -> None:
    result = CliRunner().invoke(app, ["render", str(inventory_path(name)), "-o", str(out)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", EXAMPLES)
def test_rendered_dnsmasq_serves_beside_libvirt_and_a_stub_resolver(tmp_path: Path, name: str) -> None:
    require_root("network namespaces")
    dnsmasq = require("dnsmasq")
    require("busybox")
    inv = load_inventory(inventory_path(name))
    _render(name, tmp_path / "out")
    a_record = next(r for r in dns_records(inv) if r.kind == "A")
    node = inv.nodes[0]
    net = _virbr_net(inv)
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(tmp_path / "lab", inv.provisioner.interface, address) as lab:
        libvirt_log = _neighbours(lab, dnsmasq, net)
        log = lab.workdir / "dnsmasq.log"
        lab.start_rendered(dnsmasq, tmp_path / "out", tmp_path / "out/tftp", log)
        queries = [[str(inv.provisioner.ip), a_record.name], ["127.0.0.1", a_record.name],
                   [f"{net}.1", "libvirt-guest.test"]]
        probe = run(["ip", "netns", "exec", lab.ns, sys.executable, "-c", PROBE_SCRIPT,
                     json.dumps(queries), STUB], timeout=30)
        answers = json.loads(probe.stdout)
        # A fresh port's first discovers can be lost before the bridge forwards them.
        lab.dhcp_discover(VIRT_MAC, bridge=VIRBR, tries=6)
        lab.dhcp_discover(node.mac, tries=6)
        ours = DnsmasqLog(log.read_text())
        libvirt = DnsmasqLog(libvirt_log.read_text())
        our_leases = leases(lab.workdir / "leases")
    assert answers[f"{inv.provisioner.ip} {a_record.name}"] == sorted(a_record.values)
    assert answers[f"127.0.0.1 {a_record.name}"] == sorted(a_record.values)
    assert answers[f"{net}.1 libvirt-guest.test"] == [f"{net}.9"], "libvirt's DNS stopped"
    assert answers["stub"] == "stub:ping", "the stub resolver lost 127.0.0.53:53"
    assert ours.offered(node.mac) == {str(node.ip)}, ours.text
    assert ours.acks()[node.mac] == (str(node.ip), node.name), ours.text
    assert our_leases[node.mac] == (str(node.ip), node.name)
    assert not ours.offered(VIRT_MAC), "our dnsmasq answered on virbr0"
    offered = libvirt.offered(VIRT_MAC)
    assert len(offered) == 1 and next(iter(offered)).startswith(f"{net}."), libvirt.text
    assert libvirt.acks()[VIRT_MAC][0] in offered, "libvirt's guest got no lease"
    assert not libvirt.offered(node.mac), "libvirt's dnsmasq answered on the provisioner interface"


def test_a_wildcard_dnsmasq_cannot_start_beside_libvirt(tmp_path: Path) -> None:
    """Negative control: the neighbours above do reproduce the site's failure."""
    require_root("network namespaces")
    dnsmasq = require("dnsmasq")
    inv = load_inventory(inventory_path("compact"))
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(tmp_path / "lab", inv.provisioner.interface, address) as lab:
        _neighbours(lab, dnsmasq, _virbr_net(inv))
        conf = lab.workdir / "wildcard.conf"
        conf.write_text(WILDCARD_CONF.format(net=inv.network.machine_cidr.network_address))
        with pytest.raises(RuntimeError, match="Address already in use"):
            lab.start_dnsmasq(dnsmasq, [f"--conf-file={conf}", f"--tftp-root={lab.public}"],
                              lab.workdir / "dnsmasq.log")
