"""Signed UEFI loaders for Secure Boot nodes: shim and GRUB, staged into DIR/tftp/.

A node with Secure Boot on is handed shimx64.efi (signed by Microsoft's UEFI
CA, which the firmware trusts); shim loads grubx64.efi from the same TFTP
directory and checks it against the vendor key built into shim. So both must
be one vendor's signed pair (Red Hat's, from the RHCOS live ISO's EFI boot
image or the packages shim-x64 and grub2-efi-x64). The GRUB `render
--bootloaders` builds is not signed: the firmware and shim refuse it.

Staged files are recorded under `images` in manifest.json with a `loader`
key: `upi push` publishes them, `upi render` keeps them and refuses a Secure
Boot node without them (upi.renderdir).
"""

from __future__ import annotations

import hashlib
import json
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upi.errors import UsageError
from upi.facts.boot import GRUB_IMAGE, SHIM_IMAGE
from upi.inventory.model import Inventory
from upi.render import MANIFEST, PUBLIC, RenderedFile
from upi.renderdir import transaction
from upi.safefs import Tree, UnsafePath, kind_of, shown

SHIM_TARGET = f"tftp/{SHIM_IMAGE}"
GRUB_TARGET = f"tftp/{GRUB_IMAGE}"
LOADERS = {"shim": SHIM_TARGET, "grub": GRUB_TARGET}
LOADER_LIMIT = 16 << 20  # shim is ~1 MB, Red Hat's grubx64.efi ~2.5 MB
PARTIAL = "http/.upi-partial"
# PE/COFF: the optional header's data directory 4 is the certificate table, where an
# Authenticode signature lives (Microsoft PE format, "The Attribute Certificate Table").
_PE32_PLUS = 0x20B
_SECURITY_DIRECTORY = 4


@dataclass(frozen=True)
class Loader:
    """One signed loader: which (shim or grub), its bytes, where it came from."""

    key: str
    content: bytes
    origin: str

    @property
    def target(self) -> str:
        """Where it goes in DIR."""
        return LOADERS[self.key]


def authenticode_signed(data: bytes) -> bool | None:
    """True: a PE image with a certificate table; False: a PE image without; None: not a PE image."""
    if len(data) < 0x40 or data[:2] != b"MZ":
        return None
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if pe + 26 > len(data) or data[pe:pe + 4] != b"PE\0\0":
        return None
    magic = struct.unpack_from("<H", data, pe + 24)[0]
    directories = pe + 24 + (112 if magic == _PE32_PLUS else 96)
    at = directories + 8 * _SECURITY_DIRECTORY
    if at + 8 > len(data):
        return False
    size: int = struct.unpack_from("<II", data, at)[1]
    return size > 0


def check_loader(key: str, content: bytes, origin: str) -> Loader:
    """`content` as a loader, refused (exit 2) unless it is a signed EFI image."""
    signed = authenticode_signed(content)
    fix = ("pass Red Hat's signed pair: shimx64.efi and grubx64.efi from the RHCOS live ISO's "
           "EFI boot image or from shim-x64 and grub2-efi-x64 (/boot/efi/EFI/redhat/)")
    if signed is None:
        raise UsageError(f"{origin} is not an EFI image (no PE header): {fix}")
    if not signed:
        raise UsageError(f"{origin} is not signed (no Authenticode signature): Secure Boot "
                         f"firmware and shim refuse it; {fix}")
    return Loader(key, content, origin)


def read_loader_file(key: str, path: Path) -> Loader:
    """A loader from a file the user named (--shim, --grub)."""
    try:
        with path.open("rb") as f:
            content = f.read(LOADER_LIMIT + 1)
    except OSError as exc:
        raise UsageError(f"--{key} {path}: cannot read it: {exc.strerror or exc}") from None
    if len(content) > LOADER_LIMIT:
        raise UsageError(f"--{key} {path}: larger than {LOADER_LIMIT:,} bytes, not a boot loader")
    return check_loader(key, content, f"--{key} {path}")


def stage_loaders(tree: Tree, loaders: list[Loader]) -> dict[str, dict[str, Any]]:
    """Write each loader to its tftp/ path (through a partial file); their manifest records."""
    records = {}
    for loader in loaders:
        part = f"{PARTIAL}/{loader.key}.efi.part"
        tree.unlink(part)
        tree.create(part, loader.content, PUBLIC)
        tree.move_to(part, tree, loader.target)
        records[loader.target] = {"sha256": hashlib.sha256(loader.content).hexdigest(),
                                  "size": len(loader.content), "mode": f"{PUBLIC:04o}",
                                  "loader": loader.key}
    return records


def record_loaders(inv: Inventory, out: Path, loaders: list[Loader]) -> dict[str, dict[str, Any]]:
    """Stage `loaders` into DIR (locked) and record them in manifest.json's `images`."""
    with transaction(out) as txn:
        doc = dict(txn.records.manifest) if txn.records.manifest else {}
        if doc.get("cluster", inv.cluster.domain) != inv.cluster.domain:
            raise UsageError(f"{out} was rendered for {doc.get('cluster')}, not "
                             f"{inv.cluster.domain}: pass the render dir of this inventory")
        for loader in loaders:
            st = txn.tree.lstat(loader.target)  # UnsafePath for a link on the way
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"{shown(txn.tree.root / loader.target)} is {kind_of(st.st_mode)}: "
                                 "upi writes a regular file there; remove it")
        records = stage_loaders(txn.tree, loaders)
        doc.setdefault("cluster", inv.cluster.domain)
        doc.setdefault("openshift_version", inv.cluster.openshift_version)
        # A GRUB an earlier `render --bootloaders` wrote is replaced: no longer a rendered file
        # (else the next render would remove the signed one as stale, or keep the built one).
        files = doc.get("files")
        doc["files"] = {k: v for k, v in files.items() if k not in records} if isinstance(files, dict) else {}
        doc["images"] = dict(sorted((txn.records.images | records).items()))
        txn.write_manifest(RenderedFile(MANIFEST, (json.dumps(doc, indent=2) + "\n").encode(), PUBLIC))
    return records


def staged_loaders(images: dict[str, dict[str, Any]]) -> set[str]:
    """Which signed loaders manifest.json records as staged (shim, grub)."""
    return {key for key, target in LOADERS.items() if images.get(target, {}).get("loader") == key}


def require_signed_loaders(secure: set[str], images: dict[str, dict[str, Any]],
                           extra: list[RenderedFile], out: Path) -> list[RenderedFile]:
    """Refuse Secure Boot nodes without staged signed loaders; `extra` without what they replace.

    A GRUB staged by `upi images` wins over the one `render --bootloaders` builds
    (it serves every UEFI node: signed GRUB boots with Secure Boot off too).
    """
    kept = [f for f in extra if f.path not in images]
    if not secure:
        return kept
    staged = staged_loaders(images)
    missing = [key for key in LOADERS if key not in staged]
    if missing:
        built = any(f.path == GRUB_TARGET for f in extra)
        why = (" (the grubx64.efi `render --bootloaders` stages is built here and unsigned: "
               "the firmware refuses it)") if built else ""
        names = ", ".join(sorted(secure))
        files = " and ".join(LOADERS[m].removeprefix("tftp/") for m in missing)
        raise UsageError(
            f"{names}: secure_boot is on but {shown(out)} has no signed {files} staged{why}; stage "
            f"Red Hat's signed pair with `upi images INVENTORY -o {shown(out)} --iso RHCOS-LIVE.iso` "
            "(or --shim shimx64.efi --grub grubx64.efi from shim-x64 and grub2-efi-x64: "
            "/boot/efi/EFI/redhat/), then render again")
    return kept
