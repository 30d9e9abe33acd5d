"""Network boot loaders for the rendered tftp/ tree, taken from the host's packages.

The rendered dhcp-pxe.conf hands BIOS clients pxelinux.0 (which loads
ldlinux.c32 next to it) and UEFI clients grubx64.efi; `upi render
--bootloaders` stages those three files so the tftp/ tree boots as it is.

Sources, first found wins:
- pxelinux.0, ldlinux.c32: Debian/Ubuntu `pxelinux` + `syslinux-common`;
  RHEL `syslinux-tftpboot` (/tftpboot) or `syslinux-nonlinux`.
- grubx64.efi: RHEL `grub2-efi-x64` ships a network-capable image; on
  Debian/Ubuntu it is built with `grub-mkimage` from `grub-efi-amd64-bin`
  modules. Its prefix is empty, so GRUB reads `grub.cfg-01-<mac>` from the
  directory it was loaded from. (Debian's signed grubnetx64.efi only reads
  /grub/grub.cfg and never looks for a per-MAC file: not used.)
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from upi.errors import RenderError
from upi.facts.boot import GRUB_IMAGE, PXELINUX_IMAGE
from upi.render import PUBLIC, RenderedFile
from upi.runner import run

LDLINUX = "ldlinux.c32"
GRUB_MODULES_DIR = "usr/lib/grub/x86_64-efi"
# Enough for a TFTP boot of a per-MAC config with `linux`/`initrd` entries, and for the
# `exit` (module minicmd) that hands an installed node or an unknown MAC back to the firmware.
GRUB_MODULES = ("efinet", "tftp", "net", "normal", "linux", "configfile", "echo", "test",
                "regexp", "halt", "reboot", "minicmd")
GRUB_MKIMAGE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Loader:
    """One boot loader file, where packages put it, and which packages those are."""

    name: str
    candidates: tuple[str, ...]  # relative to the host root
    debian: str
    rhel: str


PXELINUX = Loader(
    PXELINUX_IMAGE,
    ("usr/lib/PXELINUX/pxelinux.0", "tftpboot/pxelinux.0", "usr/share/syslinux/pxelinux.0"),
    debian="pxelinux",
    rhel="syslinux-tftpboot",
)
LDLINUX_C32 = Loader(
    LDLINUX,
    ("usr/lib/syslinux/modules/bios/ldlinux.c32", "tftpboot/ldlinux.c32",
     "usr/share/syslinux/ldlinux.c32"),
    debian="syslinux-common",
    rhel="syslinux-tftpboot",
)
GRUB = Loader(
    GRUB_IMAGE,
    tuple(f"boot/efi/EFI/{vendor}/grubx64.efi"
          for vendor in ("redhat", "centos", "rocky", "almalinux", "fedora")),
    debian="grub-efi-amd64-bin grub-common",
    rhel="grub2-efi-x64",
)


def _install_hint(loader: Loader, root: Path) -> str:
    searched = ", ".join(str(root / c) for c in loader.candidates)
    extra = f", or grub-mkimage with {root / GRUB_MODULES_DIR}" if loader is GRUB else ""
    return (f"{loader.name} (looked in {searched}{extra}): install Debian/Ubuntu "
            f"`apt-get install {loader.debian}` or RHEL `dnf install {loader.rhel}`")


def _packaged(loader: Loader, root: Path) -> bytes | None:
    for candidate in loader.candidates:
        path = root / candidate
        if path.is_file():
            return path.read_bytes()
    return None


def grub_mkimage(mkimage: str, modules_dir: Path) -> bytes:
    """A GRUB EFI network image with an empty prefix, built by `grub-mkimage`."""
    with tempfile.TemporaryDirectory(prefix="upi-grub-") as tmp:
        image = Path(tmp) / GRUB_IMAGE
        run([mkimage, "-O", "x86_64-efi", "-d", modules_dir, "-o", image, "-p", "",
             *GRUB_MODULES], timeout=GRUB_MKIMAGE_TIMEOUT)
        return image.read_bytes()


def _grub(root: Path, path: str | None) -> bytes | None:
    packaged = _packaged(GRUB, root)
    if packaged is not None:
        return packaged
    modules_dir = root / GRUB_MODULES_DIR
    mkimage = shutil.which("grub-mkimage", path=path) or shutil.which("grub2-mkimage", path=path)
    if mkimage is None or not (modules_dir / "linux.mod").is_file():
        return None
    return grub_mkimage(mkimage, modules_dir)


def stage_bootloaders(*, root: Path = Path("/"), path: str | None = None) -> list[RenderedFile]:
    """pxelinux.0, ldlinux.c32 and grubx64.efi as tftp/ files of the render tree.

    `root` is where the host's packages are installed and `path` the PATH
    searched for grub-mkimage (tests point both at fixtures). Every missing
    file is reported at once, each with the package that provides it.
    """
    found = {
        PXELINUX.name: _packaged(PXELINUX, root),
        LDLINUX_C32.name: _packaged(LDLINUX_C32, root),
        GRUB.name: _grub(root, path),
    }
    missing = [_install_hint(loader, root) for loader in (PXELINUX, LDLINUX_C32, GRUB)
               if found[loader.name] is None]
    if missing:
        raise RenderError("cannot stage the network boot loaders; missing " + "; ".join(missing))
    return [RenderedFile(f"tftp/{name}", content, PUBLIC)
            for name, content in found.items() if content is not None]


BOOTLOADER_PATHS = (f"tftp/{PXELINUX_IMAGE}", f"tftp/{LDLINUX}", f"tftp/{GRUB_IMAGE}")
