"""A UEFI DGX network-boots its rendered GRUB file through a real DHCP relay (qemu + OVMF).

tests/test_relay.py proves the lease and the TFTP fetch with busybox and curl;
this boots the firmware itself, as docs/testing.md's PXE tests do, in a rack
segment: the provisioner's namespace runs the rendered dnsmasq (files as
written), a second namespace is the leaf (the rack's bridge with its gateway
and relay addresses, dnsmasq's own DHCP relay, IPv4 forwarding, IPv6 router
advertisements), and OVMF's PXE, then GRUB, then the kernel load everything
from the provisioner across the router. The test kernel's init prints
/proc/cmdline: it must be the node's boot entry, network arguments included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import inventory_path, require, require_path, require_root
from pxe_harness import (
    FALLBACK_MARKER,
    OVMF_CODE,
    OVMF_VARS,
    DnsmasqLog,
    Lab,
    build_initramfs,
    kernel_image,
    stage_tftp,
    wait_for_boots,
)

from upi.cli import app
from upi.facts import boot_entries
from upi.inventory import load_inventory
from upi.inventory.segments import segments
from upi.runner import run

pytestmark = pytest.mark.pxe

NODE = "dgx-r1-0"  # rack1: relays from the leaf's own address, not the gateway


def test_uefi_dgx_boots_its_entry_through_the_relay(runner, tmp_path: Path) -> None:
    require_root("network namespaces and taps")
    require_path("/dev/net/tun", "tap devices")
    require_path(str(OVMF_CODE), "OVMF, package ovmf")
    require_path(str(OVMF_VARS), "OVMF, package ovmf")
    qemu, dnsmasq = require("qemu-system-x86_64"), require("dnsmasq")
    for program in ("ip", "apt-get", "dpkg-deb", "grub-mkimage"):
        require(program)
    inv = load_inventory(inventory_path("racks"))
    entry = next(e for e in boot_entries(inv) if e.node.name == NODE)
    rack = next(s for s in segments(inv) if entry.node.ip in s.cidr)
    assert rack.relay is not None and rack.relay != rack.gateway
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path("racks")), "-o", str(out), "--bootloaders"])
    assert result.exit_code == 0, result.output
    initrd = build_initramfs(Path(require("busybox")))
    stage_tftp(out / "tftp", entry.kernel, entry.initrd, kernel_image(), initrd)

    net = inv.network
    provisioner = f"{inv.provisioner.ip}/{net.machine_cidr.prefixlen}"
    with Lab(tmp_path / "provisioner", inv.provisioner.interface, provisioner) as prov, \
            Lab(tmp_path / "leaf", "rack1", f"{rack.gateway}/{rack.cidr.prefixlen}") as leaf:
        prov.start_rendered(dnsmasq, out, out / "tftp", tmp_path / "dnsmasq.log")
        prov.ip("link", "add", "up0", "type", "veth", "peer", "name", "to-leaf")
        prov.ip("link", "set", "up0", "netns", leaf.ns)
        prov.ip("link", "set", "to-leaf", "master", inv.provisioner.interface, "up")
        prov.ip("route", "add", "default", "via", str(net.gateway))
        leaf.ip("addr", "add", f"{net.gateway}/{net.machine_cidr.prefixlen}", "dev", "up0")
        leaf.ip("link", "set", "up0", "up")
        leaf.ip("addr", "add", f"{rack.relay}/{rack.cidr.prefixlen}", "dev", "rack1")
        run(["ip", "netns", "exec", leaf.ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"], timeout=10)
        leaf.start_dnsmasq(dnsmasq, ["--conf-file=/dev/null", "--port=0", "--bind-interfaces",
                                     "--interface=up0", "--interface=rack1",
                                     f"--dhcp-relay={rack.relay},{inv.provisioner.ip}",
                                     f"--dhcp-leasefile={tmp_path / 'relay.leases'}"],
                           tmp_path / "relay.log", ready="DHCP relay from", out="relay.out")
        leaf.start_router_ra(dnsmasq)
        vm = leaf.boot(qemu, NODE, "uefi", entry.node.mac)
        outcome = wait_for_boots([vm])[NODE]

    log = DnsmasqLog((tmp_path / "dnsmasq.log").read_text(errors="replace"))
    assert outcome.kind == "cmdline", f"{outcome.detail}\n{outcome.serial[-2000:]}\n{log.text[-3000:]}"
    assert outcome.cmdline is not None
    assert outcome.cmdline.split() == [f"BOOT_IMAGE={entry.kernel}", *entry.args]
    assert FALLBACK_MARKER not in outcome.cmdline
    assert any(a.startswith("bond=") for a in entry.args) and any(a.startswith("ip=") for a in entry.args)
    assert log.acks()[entry.node.mac][0] == str(entry.node.ip)
    sent = {path for path, to in log.sent(prov.public / "tftp") if to == str(entry.node.ip)}
    assert f"grub.cfg-01-{entry.node.mac.replace(':', '-')}" in sent
