"""`upi images`: RHCOS kernel, initramfs and rootfs staged into a render dir, sha256-checked.

Each function imports what it uses: `upi render` imports this package for its
signed-loader records (upi.images.loaders), and the downloader's HTTP and TLS
stack (upi.images.fetch: http.client, ssl, ~30 ms) has no part in a render.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upi.inventory import load_inventory

if TYPE_CHECKING:
    from upi.images.stage import ImagesResult, Progress
    from upi.images.stream import Stream

__all__ = ["images", "iso_in", "request_loaders", "signed_loaders", "verify_iso"]


def request_loaders(inventory: Path, out: Path, src: str | None, *, shim: Path | None = None,
                    grub: Path | None = None, iso: Path | None = None, installer: Path | None = None,
                    say: Callable[[str], None] = lambda _m: None) -> dict[str, dict[str, Any]]:
    """`upi images`' options checked, and the signed loaders they ask for staged; their records ({}: none).

    The inventory is read first (a broken one is named before any option).
    Then: something to stage; --iso or --shim/--grub, not both; --shim and
    --grub as a pair. Without either, the installer's live ISO found in the
    directory SRC is used for Secure Boot nodes (`say` tells which).
    """
    from upi.errors import UsageError

    load_inventory(inventory, check_files=False)
    if src is None and shim is None and grub is None and iso is None:
        raise UsageError("--from: name the RHCOS files to stage (--from SRC), or the signed "
                         "loaders (--iso, or --shim and --grub), or both")
    if iso is not None and (shim or grub):
        raise UsageError("--iso: take shim and GRUB from the ISO, or pass --shim and --grub, not both")
    if (shim is None) != (grub is None):
        raise UsageError(f"--{'grub' if shim else 'shim'}: shim and GRUB are staged as a pair "
                         "(shim checks GRUB against its vendor's key): pass --shim and --grub")
    if iso is None and shim is None and src is not None:
        iso = iso_in(src, inventory, installer)  # Secure Boot nodes: the ISO beside the files
        if iso is not None:
            say(f"{iso}: the live ISO of the installer's RHCOS; its signed shim and GRUB "
                "are staged for the Secure Boot nodes")
    if iso is None and shim is None:
        return {}
    return signed_loaders(inventory, out, shim=shim, grub=grub, iso=iso, installer=installer)


def iso_in(src: str, inventory: Path, installer: Path | None = None) -> Path | None:
    """The installer's live ISO in the directory `src`, when a node boots with Secure Boot; else None.

    `upi images --from ~/Downloads` then stages the signed loaders from it as
    `--iso` would (a mirror URL is never searched: the ISO is a gigabyte).
    """
    from upi.facts.boot import secure_boot_nodes
    from upi.images.stream import read_stream
    from upi.installer import locate

    inv = load_inventory(inventory, check_files=False)
    if "://" in src or not secure_boot_nodes(inv) or not Path(src).is_dir():
        return None
    built = read_stream(locate(installer, version=inv.cluster.openshift_version)).artifacts.get("iso")
    if built is None:
        return None
    path = Path(src) / built.name
    return path if path.is_file() else None


def images(inventory: Path, out: Path, src: str, *, installer: Path | None = None,
           on_progress: Progress = lambda name, done, total: None) -> ImagesResult:
    """Read the installer's RHCOS stream, then stage the inventory's RHCOS files from `src` into `out`."""
    from upi.images.fetch import source_for
    from upi.images.stage import stage_images
    from upi.images.stream import read_stream
    from upi.installer import Installer, locate, version_warnings

    inv = load_inventory(inventory)
    source = source_for(src)
    binary = locate(installer, version=inv.cluster.openshift_version)
    name = Installer(binary, out).version()
    result = stage_images(inv, out, source, read_stream(binary), name, on_progress)
    result.warnings[:0] = version_warnings(inv, name)
    return result


def signed_loaders(inventory: Path, out: Path, *, shim: Path | None = None, grub: Path | None = None,
                   iso: Path | None = None, installer: Path | None = None) -> dict[str, dict[str, Any]]:
    """Stage the signed shim and GRUB Secure Boot nodes boot into `out`; their manifest records.

    From the live ISO's EFI boot image (`iso`, first checked to be the live ISO
    of the installer's RHCOS stream), or from the files `shim` and `grub`.
    """
    from upi.images.iso import loaders_from_iso
    from upi.images.loaders import check_loader, read_loader_file, record_loaders
    from upi.images.stream import read_stream
    from upi.installer import locate

    inv = load_inventory(inventory)
    if iso is not None:
        verify_iso(iso, read_stream(locate(installer, version=inv.cluster.openshift_version)))
        found = loaders_from_iso(iso)
        loaders = [check_loader(key, found[key], f"--iso {iso}: EFI/BOOT/{name}")
                   for key, name in (("shim", "BOOTX64.EFI"), ("grub", "grubx64.efi"))]
    else:
        assert shim is not None and grub is not None  # noqa: S101 - the CLI asks for both
        loaders = [read_loader_file("shim", shim), read_loader_file("grub", grub)]
    return record_loaders(inv, out, loaders)


def verify_iso(iso: Path, stream: Stream) -> None:
    """`iso` is the live ISO of the installer's RHCOS (sha256 from its stream); CheckFailed otherwise."""
    from upi.errors import CheckFailed, UsageError

    built = stream.artifacts.get("iso")
    if built is None:
        raise CheckFailed(f"--iso {iso}: the installer's RHCOS stream names no live ISO to check it "
                          "against; pass --shim and --grub instead")
    digest = hashlib.sha256()
    try:
        with iso.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise UsageError(f"--iso {iso}: cannot read it: {exc.strerror or exc}") from None
    if digest.hexdigest() != built.sha256:
        raise CheckFailed(f"--iso {iso}: sha256 {digest.hexdigest()} is not that of {built.name}, the "
                          f"live ISO of RHCOS {stream.release} the installer was built for "
                          f"({built.sha256}); download that one ({built.url})")
