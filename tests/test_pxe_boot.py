"""Boot the rendered PXE files: real dnsmasq, qemu BIOS (SeaBIOS + iPXE) and UEFI (OVMF) clients.

One round per inventory boots a BIOS node and a UEFI node in parallel; a
third round boots an unknown MAC and two deliberately broken configs.
docs/testing.md says how to run these and what they prove.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from conftest import inventory_path, require, require_path, require_root
from pxe_harness import (
    FALLBACK_MARKER,
    OVMF_CODE,
    OVMF_VARS,
    DnsmasqLog,
    Lab,
    Outcome,
    build_initramfs,
    kernel_image,
    leases,
    stage_tftp,
    wait_for_boots,
)
from typer.testing import CliRunner

from upi.cli import app
from upi.facts import BootEntry, boot_entries
from upi.inventory import Inventory, load_inventory
from upi.inventory.model import Firmware
from upi.runner import run
from upi.status.logs import dnsmasq_events
from upi.status.stages import Cluster, Row, Stranger, build_rows

pytestmark = pytest.mark.pxe

# inventory -> (a BIOS node, a UEFI node) to boot
CASES = {"compact": ("cp-0", "cp-2"), "legacy-4.3": ("master-0", "worker-0")}
STRAY_MAC = "52:54:00:de:ad:01"  # in no inventory
BROKEN_WITHIN = 60.0


@dataclass(frozen=True)
class Kit:
    """Programs and boot payload every round needs."""

    qemu: str
    dnsmasq: str
    kernel: Path
    initrd: bytes


@dataclass
class Round:
    """One lab run: what each VM printed and what dnsmasq logged."""

    inv: Inventory
    entries: dict[str, BootEntry]
    tftp: Path
    outcomes: dict[str, Outcome]
    log: DnsmasqLog
    leases: dict[str, tuple[str, str]]
    ns: str
    exit_codes: list[int | None]

    def sent_to(self, ip: str) -> set[str]:
        return {path for path, to in self.log.sent(self.tftp) if to == ip}


@pytest.fixture(scope="session")
def kit() -> Kit:
    require_root("network namespaces and taps")
    require_path("/dev/net/tun", "tap devices")
    require_path(str(OVMF_CODE), "OVMF, package ovmf")
    require_path(str(OVMF_VARS), "OVMF, package ovmf")
    for program in ("ip", "busybox", "apt-get", "dpkg-deb", "grub-mkimage"):
        require(program)
    return Kit(require("qemu-system-x86_64"), require("dnsmasq"), kernel_image(),
               build_initramfs(Path(require("busybox"))))


def _prepare(name: str, work: Path, kit: Kit, *extra: str) -> tuple[Inventory, dict[str, BootEntry], Path]:
    """Render with --bootloaders (as a user would) and add kernel, initramfs and fallbacks."""
    out = work / "out"
    result = CliRunner().invoke(app, ["render", str(inventory_path(name)), "-o", str(out),
                                      "--bootloaders", *extra])
    assert result.exit_code == 0, result.output
    inv = load_inventory(inventory_path(name))
    entries = {e.node.name: e for e in boot_entries(inv)}
    first = next(iter(entries.values()))
    stage_tftp(out / "tftp", first.kernel, first.initrd, kit.kernel, kit.initrd)
    return inv, entries, out / "tftp"


def _run_round(work: Path, kit: Kit, inv: Inventory, entries: dict[str, BootEntry], tftp: Path,
               clients: list[tuple[str, str, str]]) -> Round:
    """Start dnsmasq in a fresh namespace, boot `clients` (name, firmware, MAC) in parallel."""
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(work / "lab", inv.provisioner.interface, address) as lab:
        lab.start_router_ra(kit.dnsmasq)
        tftp = lab.start_rendered(kit.dnsmasq, work / "out", tftp, work / "dnsmasq.log")
        vms = [lab.boot(kit.qemu, name, fw, mac) for name, fw, mac in clients]
        lab.dhcp_discover(STRAY_MAC)
        outcomes = wait_for_boots(vms)
    log = DnsmasqLog((work / "dnsmasq.log").read_text(errors="replace"))
    return Round(inv, entries, tftp, outcomes, log, leases(lab.workdir / "leases"), lab.ns,
                 [p.poll() for p in lab.procs])


@pytest.fixture(scope="module", params=list(CASES))
def booted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, kit: Kit) -> Round:
    name = request.param
    work = tmp_path_factory.mktemp(f"pxe-{name}")
    inv, entries, tftp = _prepare(name, work, kit)
    clients = [(n, entries[n].firmware.value, entries[n].node.mac) for n in CASES[name]]
    return _run_round(work, kit, inv, entries, tftp, clients)


@pytest.fixture(scope="module")
def misbooted(tmp_path_factory: pytest.TempPathFactory, kit: Kit) -> Round:
    """compact: an unknown MAC, and cp-0 (BIOS) and cp-2 (UEFI) with broken per-MAC files."""
    work = tmp_path_factory.mktemp("pxe-broken")
    inv, entries, tftp = _prepare("compact", work, kit)
    (tftp / "pxelinux.cfg/01-52-54-00-7a-00-11").write_text(
        "DEFAULT pxeboot\nLABEL pxeboot\n    KERNEL rhcos/no-such-kernel\n")
    (tftp / "grub.cfg-01-52-54-00-7a-00-13").write_text("menuentry 'broken' {\n")
    clients = [("stray", "bios", STRAY_MAC), ("cp-0", "bios", entries["cp-0"].node.mac),
               ("cp-2", "uefi", entries["cp-2"].node.mac)]
    return _run_round(work, kit, inv, entries, tftp, clients)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, kit: Kit) -> Round:
    """compact with cp-0 (BIOS) and cp-2 (UEFI) recorded installed: their per-MAC files boot disk."""
    work = tmp_path_factory.mktemp("pxe-installed")
    inv, entries, tftp = _prepare("compact", work, kit, "--installed", "cp-0", "--installed", "cp-2")
    clients = [(n, entries[n].firmware.value, entries[n].node.mac) for n in ("cp-0", "cp-2")]
    return _run_round(work, kit, inv, entries, tftp, clients)


def _booted_node(r: Round, firmware: str) -> BootEntry:
    return next(r.entries[n] for n in r.outcomes if r.entries[n].firmware.value == firmware)


def _expected_cmdline(e: BootEntry) -> list[str]:
    """What /proc/cmdline holds: the loader's BOOT_IMAGE, pxelinux's initrd=, then the entry's args."""
    loader = [f"BOOT_IMAGE={e.kernel}"]
    if e.firmware is Firmware.bios:
        loader.append(f"initrd={e.initrd}")
    return [*loader, *e.args]


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_node_gets_its_inventory_ip_and_host_name_from_dhcp(booted: Round, firmware: str) -> None:
    node = _booted_node(booted, firmware).node
    assert booted.log.acks()[node.mac] == (str(node.ip), node.name)
    assert booted.log.hostnames_sent(node.mac) == {node.name}
    assert booted.leases[node.mac] == (str(node.ip), node.name)


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_node_loads_its_own_per_mac_file_not_a_fallback(booted: Round, firmware: str) -> None:
    e = _booted_node(booted, firmware)
    sent = booted.sent_to(str(e.node.ip))
    own = e.config_path.removeprefix("tftp/")
    loader = "pxelinux.0" if e.firmware is Firmware.bios else "grubx64.efi"
    assert {loader, own, e.kernel, e.initrd} <= sent, sent
    assert not sent & {"pxelinux.cfg/default", "grub.cfg"}


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_node_boots_exactly_the_arguments_of_its_boot_entry(booted: Round, firmware: str) -> None:
    e = _booted_node(booted, firmware)
    outcome = booted.outcomes[e.node.name]
    assert outcome.kind == "cmdline", f"{outcome.detail}\n{outcome.serial[-2000:]}"
    assert outcome.firmware == firmware.upper()
    assert outcome.cmdline is not None and outcome.cmdline.split() == _expected_cmdline(e)
    assert FALLBACK_MARKER not in outcome.cmdline


def test_unknown_mac_is_offered_no_node_address_or_name(booted: Round) -> None:
    node_ips = {str(n.ip) for n in booted.inv.nodes}
    assert not booted.log.offered(STRAY_MAC) & node_ips
    assert booted.log.hostnames_sent(STRAY_MAC) == set()
    assert STRAY_MAC not in booted.log.acks()
    if booted.inv.provisioner.dhcp_range is None:  # static leases only: nothing at all
        assert booted.log.refused(STRAY_MAC)
        assert booted.log.offered(STRAY_MAC) == set()


def test_unknown_mac_boots_only_the_fallback(misbooted: Round) -> None:
    outcome = misbooted.outcomes["stray"]
    assert outcome.kind == "cmdline", f"{outcome.detail}\n{outcome.serial[-2000:]}"
    assert outcome.cmdline is not None and FALLBACK_MARKER in outcome.cmdline.split()
    ip = misbooted.log.acks()[STRAY_MAC][0]
    assert ip not in {str(n.ip) for n in misbooted.inv.nodes}
    sent = misbooted.sent_to(ip)
    assert "pxelinux.cfg/default" in sent
    assert not {e.config_path.removeprefix("tftp/") for e in misbooted.entries.values()} & sent


@pytest.mark.parametrize(("name", "signs"), [
    ("cp-0", {"boot:", "Could not find kernel image", "failed:"}),  # pxelinux
    ("cp-2", {"grub>"}),
])
def test_broken_config_fails_the_boot_within_60_s(misbooted: Round, name: str, signs: set[str]) -> None:
    outcome = misbooted.outcomes[name]
    assert outcome.kind == "failed", f"{outcome.kind}: {outcome.detail}\n{outcome.serial[-2000:]}"
    assert outcome.detail in signs
    assert outcome.elapsed < BROKEN_WITHIN


def test_the_lab_leaves_no_namespace_or_process_behind(booted: Round) -> None:
    namespaces = run(["ip", "netns", "list"], timeout=10).stdout.split()
    assert booted.ns not in namespaces
    assert all(code is not None for code in booted.exit_codes)


@pytest.mark.parametrize("name", ["cp-0", "cp-2"])  # BIOS (pxelinux LOCALBOOT 0), UEFI (GRUB exit)
def test_installed_node_fetches_its_file_but_never_the_rhcos_kernel(installed: Round, name: str) -> None:
    e = installed.entries[name]
    sent = installed.sent_to(str(e.node.ip))
    assert e.config_path.removeprefix("tftp/") in sent, sent  # it did network-boot, with its own file
    assert not sent & {e.kernel, e.initrd}, sent
    outcome = installed.outcomes[name]
    assert outcome.kind == "local", f"{outcome.kind}: {outcome.detail}\n{outcome.serial[-2000:]}"
    assert outcome.cmdline is None


def _status(r: Round) -> tuple[dict[str, Row], list[Stranger]]:
    """`upi status`'s rows from what this round's real dnsmasq logged (its own log-dhcp file)."""
    now = datetime.now().astimezone()
    events = list(dnsmasq_events(r.log.text.splitlines(), now))
    rows, strangers = build_rows(r.inv, events, installed={}, cluster=Cluster(), now=now, threshold=3600)
    return {row.name: row for row in rows}, strangers


def test_status_reads_each_booted_node_from_dnsmasqs_log(booted: Round) -> None:
    rows, strangers = _status(booted)
    for name in booted.outcomes:
        assert {"dhcp", "pxe", "kernel"} <= set(rows[name].stages), name
        assert rows[name].stages["dhcp"] <= rows[name].stages["pxe"] <= rows[name].stages["kernel"]
        assert rows[name].current == "kernel+initrd"
        assert rows[name].notes == []  # the loaders' probes for other names are not problems
    for name in set(rows) - set(booted.outcomes):
        assert rows[name].stages == {}, name
    assert ("mac", STRAY_MAC) in {(s.what, s.value) for s in strangers}


def test_status_names_the_missing_kernel_of_a_broken_boot(misbooted: Round) -> None:
    rows, strangers = _status(misbooted)
    cp0 = rows["cp-0"]
    assert {"dhcp", "pxe"} <= set(cp0.stages) and "kernel" not in cp0.stages
    assert any("rhcos/no-such-kernel not found" in note for note in cp0.notes)
    assert ("mac", STRAY_MAC) in {(s.what, s.value) for s in strangers}
