"""`upi check tftp`: fetch over TFTP what pxelinux and GRUB will fetch, as they fetch it.

Every per-MAC boot file must come back byte for byte as `upi render`
writes it; the boot loaders the nodes' firmware asks DHCP for, and the
kernel and initramfs each boot file names, must come back with content,
and with `-o DIR` equal to the copies `upi images` staged in DIR/tftp/
(sha256: the whole file is read over TFTP anyway).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from upi.check.reach import Miss, endpoint, hint
from upi.check.report import CheckResult
from upi.check.tftpclient import TftpError, tftp_get
from upi.errors import UpiError
from upi.facts.boot import GRUB_IMAGE, PXELINUX_IMAGE, SHIM_IMAGE, SIGNED_GRUB_DISPATCH
from upi.inventory import Inventory
from upi.inventory.model import Firmware
from upi.safefs import Tree, relpath, sha256_fd, shown

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
    sha256: str | None = None  # kernel/initramfs with -o DIR: the copy `upi images` staged there
    unstaged: str = ""  # why that copy cannot be compared


def staged_sha256(render_dir: Path, rel: str) -> tuple[str | None, str]:
    """sha256 of `render_dir/tftp/rel`, reached without following a link; (None, why) otherwise."""
    where = f"{shown(render_dir)}/tftp/{rel}"
    if relpath(rel) is None:
        return None, f"{where} is not a plain path below tftp/"
    try:
        with Tree.open(render_dir) as tree:
            fd = tree.open_read(f"tftp/{rel}")
            if fd is None:
                return None, f"{where} is missing or not a regular file: run `upi images`"
            try:
                return sha256_fd(fd)[0], ""
            finally:
                os.close(fd)
    except (OSError, UpiError) as exc:
        return None, f"{where}: {getattr(exc, 'strerror', None) or exc}"


def wanted(inv: Inventory, render_dir: Path | None = None) -> list[Wanted]:
    """Boot loaders, then every per-MAC file (with its rendered bytes), then kernels and initramfs.

    With `render_dir`, each kernel and initramfs must also equal its copy in render_dir/tftp/.
    """
    from upi.facts import boot_entries
    from upi.render import boot_file, boot_files

    entries = boot_entries(inv)
    firmwares = {e.firmware for e in entries}
    out = []
    if Firmware.bios in firmwares:
        out += [Wanted(PXELINUX_IMAGE, "BIOS boot loader"), Wanted(LDLINUX, "pxelinux module")]
    secure = any(e.secure_boot for e in entries)
    if secure:  # shim, then the signed GRUB it loads: with -o DIR, the pair `upi images` staged
        for name, what in ((SHIM_IMAGE, "Secure Boot loader (shim)"),
                           (GRUB_IMAGE, "signed UEFI boot loader")):
            sha, why = staged_sha256(render_dir, name) if render_dir else (None, "")
            out.append(Wanted(name, what, sha256=sha, unstaged=why))
    elif Firmware.uefi in firmwares:
        out.append(Wanted(GRUB_IMAGE, "UEFI boot loader"))
    rendered = {f.path: f.content for f in boot_files(inv)}
    if SIGNED_GRUB_DISPATCH in rendered:
        out.append(Wanted(SIGNED_GRUB_DISPATCH.removeprefix("tftp/"), "signed GRUB's config",
                          rendered[SIGNED_GRUB_DISPATCH]))
    out += [Wanted(e.config_path.removeprefix("tftp/"), "per-MAC boot file", rendered[e.config_path],
                   boot_file(e, installed=True).content)
            for e in entries]
    seen: set[str] = set()
    for e in entries:
        for path, what in ((e.kernel, "kernel"), (e.initrd, "initramfs")):
            if path not in seen:
                seen.add(path)
                sha, why = staged_sha256(render_dir, path) if render_dir else (None, "")
                out.append(Wanted(path, what, sha256=sha, unstaged=why))
    return out


def _fix(exc: TftpError, w: Wanted, inv: Inventory, server: str, port: int) -> str:
    """The fix for a failed fetch: by network cause, by TFTP error, else the general one."""
    url = f"tftp://{endpoint(server, port)}/{w.path} ({w.what})"
    if exc.cause:
        return f"{url}: " + hint(
            Miss(exc.cause, str(exc)), inv, server, endpoint(server, port, "udp"),  # type: ignore[arg-type]
            listens="start dnsmasq with the rendered dnsmasq/ files there (`upi push`)",
            firewall="firewall/provisioner.sh", redirect="--server/--port")
    if str(exc).startswith("TFTP error 1:"):  # dnsmasq: file not found
        if w.what in ("kernel", "initramfs"):
            return (f"{url}: {exc}: stage it with `upi images INVENTORY -o DIR --from SRC`, then "
                    "publish it with `upi push INVENTORY -o DIR`")
        if w.what in ("Secure Boot loader (shim)", "signed UEFI boot loader"):
            return (f"{url}: {exc}: stage the signed pair with `upi images INVENTORY -o DIR --iso "
                    "RHCOS-LIVE.iso` (or --shim and --grub), then `upi push INVENTORY -o DIR`")
        if w.content is None:
            return (f"{url}: {exc}: stage the boot loaders with `upi render INVENTORY -o DIR "
                    "--bootloaders`, then `upi push INVENTORY -o DIR`")
        return f"{url}: {exc}: publish the render with `upi push INVENTORY -o DIR`"
    return (f"{url}: {exc}; run `upi push` (or copy the render's tftp/ to tftp_root) and check "
            "dnsmasq's enable-tftp, tftp-root and that the files are world-readable")


def _probe(w: Wanted, inv: Inventory, server: str, port: int, timeout: float,
           retries: int) -> CheckResult:
    digest = hashlib.sha256()
    kept = bytearray()
    keep = w.content is not None

    def sink(block: bytes) -> None:
        digest.update(block)
        if keep and w.content is not None and len(kept) <= len(w.content):
            kept.extend(block)  # one byte past the render's size is enough to tell "differs"

    label = f"TFTP {w.path}"
    expected = f"as rendered ({len(w.content):,} bytes)" if w.content is not None else "with content"
    if w.sha256:
        expected = f"as staged (sha256 {w.sha256[:12]})"
    if w.unstaged:
        return CheckResult(AREA, label, "as staged", "nothing to compare with", "fail", w.unstaged)
    try:
        size = tftp_get(server, port, w.path, sink, timeout=timeout, retries=retries)
    except TftpError as exc:
        return CheckResult(AREA, label, expected, str(exc), "fail", _fix(exc, w, inv, server, port))
    disk = w.installed is not None and bytes(kept) == w.installed
    if w.content is not None and bytes(kept) != w.content and not disk:
        return CheckResult(AREA, label, expected, f"differs ({size:,} bytes)", "fail",
                           f"{w.path}: the server has another version than the render; "
                           "run `upi push` after `upi render`")
    if size == 0:
        return CheckResult(AREA, label, expected, "empty", "fail",
                           f"{w.path} ({w.what}) is empty on the server")
    if w.sha256 and digest.hexdigest() != w.sha256:
        return CheckResult(AREA, label, expected, f"sha256 {digest.hexdigest()[:12]} ({size:,} bytes)",
                           "fail", f"{w.path} ({w.what}) on the server is not the copy `upi images` "
                           "staged: run `upi push`")
    got = "same" if w.content is not None else f"{size:,} bytes, sha256 {digest.hexdigest()[:12]}"
    if disk:
        got = "installed: boots its disk"
    return CheckResult(AREA, label, expected, got, "pass")


def check_tftp(inv: Inventory, *, server: str | None = None, port: int = TFTP_PORT,
               timeout: float = 2.0, retries: int = 3, workers: int = 8,
               progress: Callable[[int], None] = lambda _n: None,
               render_dir: Path | None = None) -> list[CheckResult]:
    """Fetch every file of `wanted(inv, render_dir)` from `server` (default: the provisioner).

    Then the files `upi push` recorded placing there that the render no longer
    has (a removed node's per-MAC files) must be gone (upi.check.stale).
    """
    from upi.check.stale import check_stale

    host = server or str(inv.provisioner.ip)

    def one(w: Wanted) -> CheckResult:
        row = _probe(w, inv, host, port, timeout, retries)
        progress(1)
        return row

    files = wanted(inv, render_dir)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(one, files))
    return rows + check_stale(inv, host, port, {w.path for w in files}, timeout=timeout, retries=retries)
