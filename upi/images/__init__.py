"""`upi images`: RHCOS kernel, initramfs and rootfs staged into a render dir, sha256-checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from upi.images.fetch import source_for
from upi.images.stage import ImagesResult, Progress, Staged, stage_images, wanted_images
from upi.images.stream import Stream, read_stream
from upi.installer import Installer, locate, version_warnings
from upi.inventory import load_inventory

__all__ = ["ImagesResult", "Staged", "Stream", "images", "signed_loaders", "wanted_images"]


def images(inventory: Path, out: Path, src: str, *, installer: Path | None = None,
           on_progress: Progress = lambda name, done, total: None) -> ImagesResult:
    """Read the installer's RHCOS stream, then stage the inventory's RHCOS files from `src` into `out`."""
    inv = load_inventory(inventory)
    source = source_for(src)
    binary = locate(installer, version=inv.cluster.openshift_version)
    name = Installer(binary, out).version()
    result = stage_images(inv, out, source, read_stream(binary), name, on_progress)
    result.warnings[:0] = version_warnings(inv, name)
    return result


def signed_loaders(inventory: Path, out: Path, shim: Path, grub: Path) -> dict[str, dict[str, Any]]:
    """Stage the signed shim and GRUB Secure Boot nodes boot into `out`; their manifest records."""
    from upi.images.loaders import read_loader_file, record_loaders

    inv = load_inventory(inventory)
    loaders = [read_loader_file("shim", shim), read_loader_file("grub", grub)]
    return record_loaders(inv, out, loaders)
