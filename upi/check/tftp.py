"""`upi check tftp`: fetch over TFTP what pxelinux and GRUB will fetch, as they fetch it.

Every per-MAC boot file must come back byte for byte as `upi render`
writes it; the boot loaders the nodes' firmware asks DHCP for, and the
kernel and initramfs each boot file names, must come back with content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from upi.check.report import CheckResult
from upi.check.tftpclient import TftpError, tftp_get
from upi.facts.boot import GRUB_IMAGE, PXELINUX_IMAGE
from upi.inventory import Inventory
from upi.inventory.model import Firmware

AREA = "tftp"
TFTP_PORT = 69
LDLINUX = "ldlinux.c32"  # pxelinux.0 loads it next, from the same directory


@dataclass(frozen=True)
class Wanted:
    """One file to fetch: its TFTP path, what it is, and the bytes it must equal (if known)."""

    path: str
    what: str
    content: bytes | None = None
    installed: bytes | None = None  # the same per-MAC file once its node is installed (boots disk)


def wanted(inv: Inventory) -> list[Wanted]:
    """Boot loaders, then every per-MAC file (with its rendered bytes), then kernels and initramfs."""
    from upi.facts import boot_entries
    from upi.render import boot_file, boot_files

    entries = boot_entries(inv)
    firmwares = {e.firmware for e in entries}
    out = []
    if Firmware.bios in firmwares:
        out += [Wanted(PXELINUX_IMAGE, "BIOS boot loader"), Wanted(LDLINUX, "pxelinux module")]
    if Firmware.uefi in firmwares:
        out.append(Wanted(GRUB_IMAGE, "UEFI boot loader"))
    rendered = {f.path: f.content for f in boot_files(inv)}
    out += [Wanted(e.config_path.removeprefix("tftp/"), "per-MAC boot file", rendered[e.config_path],
                   boot_file(e, installed=True).content)
            for e in entries]
    seen: set[str] = set()
    for e in entries:
        for path, what in ((e.kernel, "kernel"), (e.initrd, "initramfs")):
            if path not in seen:
                seen.add(path)
                out.append(Wanted(path, what))
    return out


def _probe(w: Wanted, server: str, port: int, timeout: float, retries: int) -> CheckResult:
    digest = hashlib.sha256()
    kept = bytearray()
    keep = w.content is not None

    def sink(block: bytes) -> None:
        digest.update(block)
        if keep and w.content is not None and len(kept) <= len(w.content):
            kept.extend(block)  # one byte past the render's size is enough to tell "differs"

    label = f"TFTP {w.path}"
    expected = f"as rendered ({len(w.content):,} bytes)" if w.content is not None else "with content"
    try:
        size = tftp_get(server, port, w.path, sink, timeout=timeout, retries=retries)
    except TftpError as exc:
        return CheckResult(AREA, label, expected, str(exc), "fail",
                           f"tftp://{server}:{port}/{w.path} ({w.what}): {exc}; run `upi push` "
                           "(or copy the render's tftp/ to tftp_root) and check dnsmasq's "
                           "enable-tftp, tftp-root and that the files are world-readable")
    disk = w.installed is not None and bytes(kept) == w.installed
    if w.content is not None and bytes(kept) != w.content and not disk:
        return CheckResult(AREA, label, expected, f"differs ({size:,} bytes)", "fail",
                           f"{w.path}: the server has another version than the render; "
                           "run `upi push` after `upi render`")
    if size == 0:
        return CheckResult(AREA, label, expected, "empty", "fail",
                           f"{w.path} ({w.what}) is empty on the server")
    got = "same" if w.content is not None else f"{size:,} bytes, sha256 {digest.hexdigest()[:12]}"
    if disk:
        got = "installed: boots its disk"
    return CheckResult(AREA, label, expected, got, "pass")


def check_tftp(inv: Inventory, *, server: str | None = None, port: int = TFTP_PORT,
               timeout: float = 2.0, retries: int = 3, workers: int = 8,
               progress: Callable[[int], None] = lambda _n: None) -> list[CheckResult]:
    """Fetch every file of `wanted(inv)` from `server` (default: the provisioner)."""
    host = server or str(inv.provisioner.ip)

    def one(w: Wanted) -> CheckResult:
        row = _probe(w, host, port, timeout, retries)
        progress(1)
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, wanted(inv)))
