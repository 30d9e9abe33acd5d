"""A DGX in a rack segment boots through a real DHCP relay to the provisioner's rendered dnsmasq.

Three kinds of network namespace, as a rack site is wired:

    provisioner (tests/realtftp.py's Lab: bridge named and addressed as the
    inventory's provisioner, the rendered dnsmasq/ running as written)
        | veth, the provisioner's segment (network.machine_cidr)
    router: the leaf; the segment's gateway on one side, a bridge per rack on the
        other with the rack's gateway and relay addresses; IPv4 forwarding on;
        dnsmasq's own DHCP relay (dnsmasq(8) --dhcp-relay: giaddr = the local
        address, requests unicast to the server, replies sent back to the client)
        | veth per client
    client: busybox udhcpc with the node's MAC (option 93 = 7, a UEFI x86-64
        client, as a DGX's firmware sends), then curl over TFTP across the router.

The client must get its rack's address, the rack's router, the cluster DNS and
GRUB as the boot file, and read its own per-MAC file from the provisioner.
A node's MAC plugged into another rack gets nothing: dnsmasq picks the range
by the relay's address, and the static lease is not in that rack.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from conftest import inventory_path, require, require_root
from pxe_harness import DnsmasqLog
from realtftp import serve_tftp

from upi.cli import app
from upi.inventory import load_inventory
from upi.inventory.model import Inventory
from upi.inventory.segments import Segment, segments
from upi.runner import run

_names = itertools.count()
# The udhcpc script: the lease's fields as udhcpc hands them to the script (busybox
# networking/udhcp/dhcpc.c: ip, router, dns, serverid, siaddr, boot_file, ...).
UDHCPC_SCRIPT = '#!/bin/sh\n[ "$1" = bound ] && env > "$LEASE_FILE"\nexit 0\n'


@contextmanager
def _netns(prefix: str) -> Iterator[str]:
    name = f"upi-{prefix}-{os.getpid()}-{next(_names)}"
    run(["ip", "netns", "add", name], timeout=10)
    try:
        run(["ip", "-n", name, "link", "set", "lo", "up"], timeout=10)
        yield name
    finally:
        run(["ip", "netns", "delete", name], timeout=10, check=False)


def _ip(ns: str, *argv: str) -> None:
    run(["ip", "-n", ns, *argv], timeout=10)


def _router(lab_ns: str, bridge: str, inv: Inventory, router: str, racks: list[Segment]) -> None:
    """The leaf: uplink on the provisioner's segment, one bridge per rack with gateway + relay."""
    _ip(lab_ns, "link", "add", "up0", "type", "veth", "peer", "name", "to-router")
    _ip(lab_ns, "link", "set", "up0", "netns", router)
    _ip(lab_ns, "link", "set", "to-router", "master", bridge, "up")
    net = inv.network
    _ip(router, "addr", "add", f"{net.gateway}/{net.machine_cidr.prefixlen}", "dev", "up0")
    _ip(router, "link", "set", "up0", "up")
    for n, rack in enumerate(racks):
        _ip(router, "link", "add", f"rack{n}", "type", "bridge")
        for address in {rack.gateway, rack.relay}:
            _ip(router, "addr", "add", f"{address}/{rack.cidr.prefixlen}", "dev", f"rack{n}")
        _ip(router, "link", "set", f"rack{n}", "up")
    run(["ip", "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"], timeout=10)
    # The provisioner reaches the racks through its own gateway, as the site routes it.
    _ip(lab_ns, "route", "add", "default", "via", str(net.gateway))


def _plug(router: str, client: str, rack_index: int, mac: str) -> None:
    """A client port in rack `rack_index`, with the node's MAC set before the link first goes up."""
    port = f"c{rack_index}-{client[-4:]}"[:15]
    _ip(router, "link", "add", "eth0", "netns", client, "type", "veth", "peer", "name", port)
    _ip(router, "link", "set", port, "master", f"rack{rack_index}", "up")
    _ip(client, "link", "set", "eth0", "address", mac)
    _ip(client, "link", "set", "eth0", "up")


def _lease(client: str, work: Path) -> dict[str, str]:
    """busybox udhcpc as a UEFI x86-64 client; the bound lease's fields (empty: none)."""
    script = work / "udhcpc.sh"
    script.write_text(UDHCPC_SCRIPT)
    script.chmod(0o755)
    lease = work / f"lease-{client}"
    run(["ip", "netns", "exec", client, "env", f"LEASE_FILE={lease}", "busybox", "udhcpc", "-i", "eth0",
         "-n", "-q", "-f", "-t", "4", "-T", "1", "-x", "0x5d:0007", "-s", str(script)],
        timeout=60, check=False)
    if not lease.exists():
        return {}
    return dict(line.split("=", 1) for line in lease.read_text().splitlines() if "=" in line)


def _tftp(client: str, lease: dict[str, str], prefix: int, name: str) -> bytes:
    """Take the lease's address and route, then fetch `name` from the lease's TFTP server with curl."""
    _ip(client, "addr", "add", f"{lease['ip']}/{prefix}", "dev", "eth0")
    _ip(client, "route", "add", "default", "via", lease["router"])
    server = lease.get("siaddr") or lease["serverid"]
    done = run(["ip", "netns", "exec", client, "curl", "--silent", "--show-error", "--max-time", "5",
                f"tftp://{server}/{name}"], timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.encode()


def test_rack_clients_boot_through_a_dhcp_relay(runner, tmp_path: Path) -> None:
    require_root("network namespaces for the provisioner, the leaf router and the clients")
    dnsmasq = require("dnsmasq")
    require("busybox")
    require("curl")
    inv = load_inventory(inventory_path("racks"))
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("racks")), "-o", str(out)]).exit_code == 0
    racks = [s for s in segments(inv) if s.relayed]
    by_rack = {s.cidr: [n for n in inv.nodes if n.ip in s.cidr] for s in racks}
    # rack1 relays from its own address (not the gateway); rack4 from the gateway (the default).
    chosen = [racks[0], racks[3]]
    assert chosen[0].relay != chosen[0].gateway and chosen[1].relay == chosen[1].gateway

    with ExitStack() as stack:
        lab = stack.enter_context(serve_tftp(out / "tftp", tmp_path, inventory="racks"))
        router = stack.enter_context(_netns("leaf"))
        _router(lab.ns, inv.provisioner.interface, inv, router, chosen)
        relays = [f"--dhcp-relay={rack.relay},{inv.provisioner.ip}" for rack in chosen]
        lab.spawn(["ip", "netns", "exec", router, dnsmasq, "--keep-in-foreground", "--port=0",
                   "--conf-file=/dev/null", "--pid-file=", "--bind-interfaces", "--interface=up0",
                   *(f"--interface=rack{n}" for n in range(len(chosen))), *relays,
                   f"--dhcp-leasefile={tmp_path / 'relay.leases'}", "--log-dhcp",
                   f"--log-facility={tmp_path / 'relay.log'}"], tmp_path / "relay.out")
        run(["sleep", "0.3"], timeout=5)  # the relay binds its sockets

        for n, rack in enumerate(chosen):
            node = by_rack[rack.cidr][0]
            client = stack.enter_context(_netns(f"dgx{n}"))
            _plug(router, client, n, node.mac)
            lease = _lease(client, tmp_path)
            log = DnsmasqLog((tmp_path / "tftp-racks.log").read_text(errors="replace"))
            assert lease, f"{node.name}: no lease through the relay; provisioner log:\n{log.text[-3000:]}"
            assert lease["ip"] == str(node.ip)
            assert lease["router"] == str(rack.gateway)
            assert lease["dns"].split() == [str(inv.provisioner.ip)]
            assert lease["boot_file"] == "grubx64.efi"
            relay_log = (tmp_path / "relay.log").read_text()
            assert f"DHCP relay at {rack.relay} -> {inv.provisioner.ip}" in relay_log, relay_log
            # dnsmasq chose the rack's range (its tag) for the relayed request it acknowledged.
            xid = re.search(rf" (\d+) DHCPACK\(\S+\) {node.ip} {node.mac}", log.text)
            assert xid, log.text[-3000:]
            assert f" {xid.group(1)} tags: {rack.tag}," in log.text
            per_mac = f"grub.cfg-01-{node.mac.replace(':', '-')}"
            got = _tftp(client, lease, rack.cidr.prefixlen, per_mac)
            assert got == (out / "tftp" / per_mac).read_bytes()

        # rack1's DGX plugged into rack4: the relay's address picks rack4's range, which
        # holds no lease for that MAC, so it gets nothing (and no other rack's address).
        stray = by_rack[chosen[0].cidr][0]
        client = stack.enter_context(_netns("stray"))
        _plug(router, client, 1, stray.mac)
        assert _lease(client, tmp_path) == {}
