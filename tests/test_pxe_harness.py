"""The PXE harness's own pure parts: initramfs format and reading a serial log."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

from conftest import require
from pxe_harness import DnsmasqLog, build_initramfs, read_outcome


def test_initramfs_is_a_newc_cpio_with_busybox_and_init(tmp_path: Path) -> None:
    busybox_cpio = [require("busybox"), "cpio"]  # busybox-static is a test dependency already
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF fake")
    listing = subprocess.run([*busybox_cpio, "-t"], input=gzip.decompress(build_initramfs(busybox)),
                             capture_output=True, check=True, timeout=10).stdout.decode().split()
    assert listing == ["bin", "proc", "sys", "dev", "bin/busybox", "init"]


def test_printed_command_line_is_the_outcome() -> None:
    outcome = read_outcome("Linux version 6.1\r\nCMDLINE: a=1 b\r\nFIRMWARE: UEFI\r\n", 3.0, False, 150)
    assert outcome is not None
    assert (outcome.kind, outcome.cmdline, outcome.firmware) == ("cmdline", "a=1 b", "UEFI")


def test_loader_prompts_fail_at_once() -> None:
    for serial, sign in [("PXELINUX 6.04\r\n\rboot: ", "boot:"), ("GNU GRUB\r\ngrub> ", "grub>"),
                         ("Loading rhcos/x... failed: No such file", "failed:")]:
        outcome = read_outcome(serial, 1.0, False, 150)
        assert outcome is not None and (outcome.kind, outcome.detail) == ("failed", sign)


def test_kernel_messages_are_not_mistaken_for_loader_failures() -> None:
    assert read_outcome("Linux version 6.1\r\nfoo: probe failed: -2\r\n", 5.0, False, 150) is None
    panic = read_outcome("Linux version 6.1\r\nKernel panic - not syncing", 5.0, False, 150)
    assert panic is not None and panic.kind == "failed"


def test_silence_ends_in_exit_or_timeout() -> None:
    exited = read_outcome("SeaBIOS", 2.0, True, 150)
    timed_out = read_outcome("SeaBIOS", 151.0, False, 150)
    assert exited is not None and exited.kind == "exited"
    assert timed_out is not None and timed_out.kind == "timeout"


def test_dnsmasq_log_links_the_host_name_to_the_mac_by_transaction() -> None:
    log = DnsmasqLog(
        "dnsmasq-dhcp[1]: 11 DHCPACK(br0) 10.0.0.5 52:54:00:00:00:01 cp-0\n"
        "dnsmasq-dhcp[1]: 11 sent size:  4 option: 12 hostname  cp-0\n"
        "dnsmasq-dhcp[1]: 22 DHCPOFFER(br0) 10.0.0.200 52:54:00:00:00:02 \n"
        "dnsmasq-tftp[1]: sent /srv/tftp/pxelinux.0 to 10.0.0.5\n"
    )
    assert log.acks() == {"52:54:00:00:00:01": ("10.0.0.5", "cp-0")}
    assert log.hostnames_sent("52:54:00:00:00:01") == {"cp-0"}
    assert log.hostnames_sent("52:54:00:00:00:02") == set()
    assert log.offered("52:54:00:00:00:02") == {"10.0.0.200"}
    assert log.sent(Path("/srv/tftp")) == [("pxelinux.0", "10.0.0.5")]


def test_a_loader_handing_back_to_the_firmware_is_local_not_failed() -> None:
    bios = "PXELINUX 6.04\r\nBooting from local di\x1b[25;21H\x1b[25;22Hsk...\r\nBoot failed: could not read"
    uefi = 'Welcome to GRUB!\r\nBdsDxe: starting Boot0000 "UiApp" from Fv(7CB8BDC9)'
    for serial in (bios, uefi):
        outcome = read_outcome(serial, 9.0, False, 150)
        assert outcome is not None and outcome.kind == "local", serial
    floppy = read_outcome("Booting from Floppy...\r\nBoot failed: could not read", 9.0, False, 150)
    assert floppy is not None and floppy.kind == "failed"
