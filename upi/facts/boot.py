"""Network-boot entries: one per node, with the version's RHCOS kernel arguments."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from upi.facts.netargs import network_args
from upi.inventory.model import Firmware, Inventory, Node
from upi.inventory.segments import Segment, segments

# Serial and VGA consoles, as the docs' PXE examples carry them.
CONSOLE_ARGS = ("console=tty0", "console=ttyS0")
GRUB_IMAGE = "grubx64.efi"
PXELINUX_IMAGE = "pxelinux.0"
# What a machine with no per-MAC file finds: its own disk (only reachable with
# provisioner.dhcp_range; static leases give unknown MACs no address at all).
PXELINUX_FALLBACK = "tftp/pxelinux.cfg/default"
GRUB_FALLBACK = "tftp/grub.cfg"
# Secure Boot nodes are handed shim (signed by Microsoft's UEFI CA), which loads the
# signed grubx64.efi from the same TFTP directory (shim's netboot.c: the boot file's
# directory + DEFAULT_LOADER). Red Hat's signed GRUB reads grub.cfg-01-<mac> beside
# itself; a signed GRUB built with prefix /grub (Debian's grubnetx64) reads
# /grub/grub.cfg, which sends it on to the same per-MAC file.
SHIM_IMAGE = "shimx64.efi"
SECURE_BOOT_TAG = "upi-secureboot"
SIGNED_GRUB_DISPATCH = "tftp/grub/grub.cfg"


@dataclass(frozen=True)
class BootEntry:
    """How one node network-boots: which file, which kernel, which arguments."""

    node: Node
    firmware: Firmware
    config_path: str  # relative to the render dir, under tftp/
    kernel: str  # relative to the TFTP root
    initrd: str
    args: tuple[str, ...]
    secure_boot: bool = False  # handed shim + the signed GRUB

    @property
    def mac_name(self) -> str:
        """`01-<mac with dashes>`, the per-MAC name pxelinux and GRUB look for."""
        return mac_file_name(self.node.mac)


def mac_file_name(mac: str) -> str:
    """`01-<mac with dashes>`: the per-MAC name pxelinux and GRUB look for (ARP type 1)."""
    return "01-" + mac.replace(":", "-")


def artifact_url(inv: Inventory, value: str) -> str:
    """An RHCOS artifact as a URL: full URLs as given, else under http_base_url."""
    if urlsplit(value).scheme:
        return value
    return f"{inv.provisioner.http_base_url}/{value.lstrip('/')}"


def tftp_path(value: str) -> str:
    """Where the kernel or initramfs sits under the TFTP root.

    pxelinux.0 and GRUB read these over TFTP from the server they booted
    from, so a relative artifact keeps its path and a full URL lands in rhcos/.
    """
    if urlsplit(value).scheme:
        return "rhcos/" + posixpath.basename(urlsplit(value).path)
    return value.lstrip("/")


# A worker added to an installed cluster (upi nodes add) boots the worker ignition the cluster
# serves now, published under its own name: the day-1 files stay as `upi ignition` made them.
OWN_IGNITION_DIR = "ignition/nodes"


def own_ignition_path(name: str) -> str:
    """Where a day-2 node's own ignition file sits, relative to the HTTP root (and DIR/http/)."""
    return f"{OWN_IGNITION_DIR}/{name}.ign"


def ignition_url(inv: Inventory, node: Node, *, own: bool = False) -> str:
    """The ignition file of the node's role on the HTTP server (`own`: the node's day-2 file)."""
    rel = own_ignition_path(node.name) if own else f"ignition/{node.role.value}.ign"
    return f"{inv.provisioner.http_base_url}/{rel}"


def kernel_args(inv: Inventory, node: Node) -> tuple[str, ...]:
    """RHCOS installer arguments for this node, in the form its version needs."""
    return _kernel_args(inv, node, _image_url(inv), segments(inv))


def _image_url(inv: Inventory) -> str:
    """The URL of what the installer writes: the live rootfs (4.6+) or the metal image."""
    image = inv.rhcos.rootfs if inv.live_rootfs else inv.rhcos.image
    assert image is not None  # noqa: S101 - guaranteed by rules._rhcos
    return artifact_url(inv, image)


def _kernel_args(inv: Inventory, node: Node, image_url: str, segs: list[Segment], *,
                 own: bool = False) -> tuple[str, ...]:
    net = network_args(inv, node, segs)  # bond=, vlan=, ip=, nameserver= from `network:`
    if inv.live_rootfs:
        args = [
            f"coreos.live.rootfs_url={image_url}",
            f"coreos.inst.install_dev={node.disk}",
            f"coreos.inst.ignition_url={ignition_url(inv, node, own=own)}",
        ]
    else:
        # 4.1-4.5: the installer initramfs writes a metal image; devices without /dev/.
        args = [
            *(() if net else ("ip=dhcp",)),  # network: writes its own ip=
            "rd.neednet=1",
            "coreos.inst=yes",
            f"coreos.inst.install_dev={node.disk.removeprefix('/dev/')}",
            f"coreos.inst.image_url={image_url}",
            f"coreos.inst.ignition_url={ignition_url(inv, node, own=own)}",
        ]
    return (*args, *net, *CONSOLE_ARGS, *node.kernel_args)


def secure_boot_nodes(inv: Inventory, reported: Mapping[str, bool | None] | None = None) -> set[str]:
    """The UEFI nodes that boot with Secure Boot on.

    `secure_boot: true`, or auto and reported on by the node's BMC (`reported`:
    node name -> the BMC's SecureBootEnable; None where it has no answer).
    """
    reported = reported or {}
    return {n.name for n in inv.nodes if n.boot_firmware is Firmware.uefi
            and (n.secure_boot_mode is True
                 or (n.secure_boot_mode == "auto" and reported.get(n.name) is True))}


def boot_entries(inv: Inventory, own_ignition: frozenset[str] = frozenset(), *,
                 reported: Mapping[str, bool | None] | None = None) -> list[BootEntry]:
    """One entry per node: pxelinux for BIOS, GRUB for UEFI (behind shim with Secure Boot), named by MAC.

    `own_ignition`: day-2 nodes that boot their own ignition file (own_ignition_path).
    `reported`: what the BMCs said of Secure Boot (secure_boot_nodes).
    """
    out = []
    secure = secure_boot_nodes(inv, reported)
    # The same for every node: worked out once (URL parsing, 15,000 times for 5,000 nodes).
    kernel, initrd, image_url = tftp_path(inv.rhcos.kernel), tftp_path(inv.rhcos.initramfs), _image_url(inv)
    segs = segments(inv)
    for node in inv.nodes:
        mac_name = mac_file_name(node.mac)
        fw = node.boot_firmware
        path = f"tftp/pxelinux.cfg/{mac_name}" if fw is Firmware.bios else f"tftp/grub.cfg-{mac_name}"
        out.append(BootEntry(node=node, firmware=fw, config_path=path, kernel=kernel, initrd=initrd,
                             args=_kernel_args(inv, node, image_url, segs,
                                                  own=node.name in own_ignition),
                             secure_boot=node.name in secure))
    return out
