"""Secure Boot end to end: enforcing OVMF network-boots the rendered files through shim.

OVMF with Secure Boot enforced and Microsoft's keys enrolled (Debian `ovmf`:
OVMF_CODE_4M.secboot.fd + OVMF_VARS_4M.ms.fd, q35 with SMM) boots a node with
`secure_boot: true` from the rendered dnsmasq and tftp/ files. Debian's signed
shim (`shim-signed`), signed network GRUB (`grub-efi-amd64-signed`, prefix /grub)
and signed kernel stand in for Red Hat's, which cannot be fetched here. The
negative round hands the same clients the GRUB `render --bootloaders` builds
(unsigned): shim refuses it, and so does the firmware when it gets it directly.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require, require_path, require_root
from pxe_harness import (
    FALLBACK_MARKER,
    OVMF_SB_CODE,
    OVMF_SB_VARS,
    DnsmasqLog,
    Lab,
    Outcome,
    build_initramfs,
    kernel_image,
    stage_tftp,
    wait_for_boots,
)
from typer.testing import CliRunner

from upi.bootloaders import GRUB_MODULES_DIR, grub_mkimage
from upi.cli import app
from upi.facts import BootEntry, boot_entries
from upi.inventory import load_inventory

pytestmark = pytest.mark.pxe

SIGNED_SHIM = "/usr/lib/shim/shimx64.efi.signed"  # shim-signed (Microsoft UEFI CA)
SIGNED_GRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"  # grub-efi-amd64-signed
WORKER_0 = '{name: worker-0, role: worker, mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44, gpu: true'
SECURE, PLAIN = "worker-0", "worker-1"


@dataclass(frozen=True)
class Kit:
    """Programs and boot payload both rounds need."""

    qemu: str
    dnsmasq: str
    kernel: Path
    initrd: bytes


@dataclass
class Round:
    """What each VM printed and what dnsmasq sent."""

    entries: dict[str, BootEntry]
    outcomes: dict[str, Outcome]
    sent: list[tuple[str, str]]


@pytest.fixture(scope="module")
def kit() -> Kit:
    require_root("network namespaces and taps")
    require_path("/dev/net/tun", "tap devices")
    require_path(str(OVMF_SB_CODE), "OVMF with Secure Boot, package ovmf")
    require_path(str(OVMF_SB_VARS), "OVMF with Microsoft's keys, package ovmf")
    require_path(SIGNED_SHIM, "Debian's signed shim, package shim-signed")
    require_path(SIGNED_GRUB, "Debian's signed network GRUB, package grub-efi-amd64-signed")
    for program in ("ip", "busybox", "apt-get", "dpkg-deb", "grub-mkimage"):
        require(program)
    return Kit(require("qemu-system-x86_64"), require("dnsmasq"), kernel_image(),
               build_initramfs(Path(require("busybox"))))


def _boot_round(work: Path, kit: Kit, example_dir: Path, grub: bytes, *, plain_enforcing: bool) -> Round:
    """Render legacy-4.3 with worker-0 secure_boot: true, serve `grub` as grubx64.efi, boot
    worker-0 (handed shim) with Secure Boot enforced and worker-1 (handed grubx64.efi
    straight from the firmware) with Secure Boot as `plain_enforcing` says."""
    inventory = example_dir / "legacy-4.3.yaml"
    inventory.write_text(inventory.read_text().replace(WORKER_0, WORKER_0 + ", secure_boot: true", 1))
    out = work / "out"
    # As a user would: the signed pair staged by `upi images`, then render.
    for argv in (["images", str(inventory), "-o", str(out), "--shim", SIGNED_SHIM, "--grub", SIGNED_GRUB],
                 ["render", str(inventory), "-o", str(out)]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
    inv = load_inventory(inventory)
    entries = {e.node.name: e for e in boot_entries(inv)}
    tftp = out / "tftp"
    stage_tftp(tftp, entries[SECURE].kernel, entries[SECURE].initrd, kit.kernel, kit.initrd)
    if grub != Path(SIGNED_GRUB).read_bytes():  # the negative round: what upi would never stage
        (tftp / "grubx64.efi").write_bytes(grub)
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(work / "lab", inv.provisioner.interface, address) as lab:
        lab.start_router_ra(kit.dnsmasq)
        root = lab.start_rendered(kit.dnsmasq, out, tftp, work / "dnsmasq.log")
        vms = [lab.boot(kit.qemu, name, "uefi", entries[name].node.mac, secure_boot=enforcing)
               for name, enforcing in ((SECURE, True), (PLAIN, plain_enforcing))]
        outcomes = wait_for_boots(vms)
    log = DnsmasqLog((work / "dnsmasq.log").read_text(errors="replace"))
    return Round(entries, outcomes, log.sent(root))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, kit: Kit) -> Round:
    work = tmp_path_factory.mktemp("sb-signed")
    example = _examples(work)
    return _boot_round(work, kit, example, Path(SIGNED_GRUB).read_bytes(), plain_enforcing=False)


@pytest.fixture(scope="module")
def unsigned(tmp_path_factory: pytest.TempPathFactory, kit: Kit) -> Round:
    work = tmp_path_factory.mktemp("sb-unsigned")
    grub = grub_mkimage(require("grub-mkimage"), Path("/") / GRUB_MODULES_DIR)
    return _boot_round(work, kit, _examples(work), grub, plain_enforcing=True)


def _examples(work: Path) -> Path:
    from conftest import INVENTORIES

    dest = work / "inventories"
    shutil.copytree(INVENTORIES, dest)
    return dest


def _sent_to(r: Round, name: str) -> list[str]:
    """Files TFTP sent to the node, each once, in the order first sent (OVMF reads its boot
    file twice: once for the size)."""
    ip = str(r.entries[name].node.ip)
    return list(dict.fromkeys(path for path, to in r.sent if to == ip))


def test_secure_boot_node_boots_its_entry_through_shim(signed: Round) -> None:
    outcome = signed.outcomes[SECURE]
    assert outcome.kind == "cmdline", (outcome.detail, outcome.serial[-3000:])
    entry = signed.entries[SECURE]
    assert outcome.cmdline is not None
    assert outcome.cmdline.split() == [f"BOOT_IMAGE={entry.kernel}", *entry.args]
    assert "Secure boot enabled" in outcome.serial  # the kernel's own word (arch/x86 secureboot:)
    assert FALLBACK_MARKER not in outcome.cmdline
    assert outcome.firmware == "UEFI"
    sent = _sent_to(signed, SECURE)
    assert sent[:2] == ["shimx64.efi", "grubx64.efi"]
    assert "grub/grub.cfg" in sent and f"grub.cfg-{entry.mac_name}" in sent


def test_signed_grub_also_serves_the_other_uefi_nodes(signed: Round) -> None:
    outcome = signed.outcomes[PLAIN]
    assert outcome.kind == "cmdline", (outcome.detail, outcome.serial[-3000:])
    entry = signed.entries[PLAIN]
    assert outcome.cmdline is not None
    assert outcome.cmdline.split() == [f"BOOT_IMAGE={entry.kernel}", *entry.args]
    sent = _sent_to(signed, PLAIN)
    assert "shimx64.efi" not in sent and sent[0] == "grubx64.efi"


def test_unsigned_grub_is_refused_behind_shim_and_by_the_firmware(unsigned: Round) -> None:
    for name in (SECURE, PLAIN):
        outcome = unsigned.outcomes[name]
        assert outcome.kind == "failed", (name, outcome.kind, outcome.serial[-3000:])
        assert outcome.detail in ("Security Violation", "Access Denied"), (name, outcome.detail)
        assert "CMDLINE:" not in outcome.serial
