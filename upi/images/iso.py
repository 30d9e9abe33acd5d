"""shim and GRUB out of a live ISO's EFI boot image, read in place: no mount, no root.

The RHCOS live ISO boots UEFI machines from an El Torito entry for the EFI
platform: a FAT image (images/efiboot.img) whose EFI/BOOT/ holds BOOTX64.EFI
(shim, signed by Microsoft's UEFI CA) and grubx64.efi (GRUB, signed by Red
Hat). Layouts read here, from the specifications:

- El Torito ("El Torito" Bootable CD-ROM Format Specification 1.0): the boot
  record volume descriptor in sector 17 points (offset 0x47) to the boot
  catalog: a validation entry, the default entry, then section headers
  (0x90, last 0x91; platform 0xEF is EFI) each followed by its entries
  (0x88 bootable; 0x44 extensions skipped). An entry's load RBA (offset 8)
  is the image's 2048-byte sector.
- FAT (Microsoft FAT32 File System Specification, "FAT: General Overview of
  On-Disk Format" 1.03): the BPB gives sector and cluster sizes, the FATs and
  the root directory; the FAT type follows from the count of clusters; 32-byte
  directory entries with 8.3 names (long-name entries, attribute 0x0F, skipped).

Every size and count comes from the file and is bounded before use.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from upi.errors import UsageError

ISO_SECTOR = 2048
EFI_PLATFORM = 0xEF
BOOT_LOADERS = {"shim": ("EFI", "BOOT", "BOOTX64.EFI"), "grub": ("EFI", "BOOT", "GRUBX64.EFI")}
MAX_FILE = 16 << 20
_MAX_CATALOG_ENTRIES = 64  # one 2048-byte sector of 32-byte entries
_MAX_DIR_ENTRIES = 65536


class IsoError(UsageError):
    """The ISO (or its EFI boot image) is not what a live ISO holds: exit 2."""


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise IsoError(f"ends at byte {offset + len(data):,}: too short for an ISO 9660 live image "
                       f"(reading {size:,} bytes at {offset:,})")
    return data


def efi_image_offset(f: BinaryIO) -> int:
    """Byte offset of the El Torito EFI boot image."""
    record = _read(f, 17 * ISO_SECTOR, ISO_SECTOR)
    if record[0] != 0 or record[1:6] != b"CD001" or not record[7:30] == b"EL TORITO SPECIFICATION":
        raise IsoError("has no El Torito boot record (sector 17): not a bootable ISO 9660 image")
    catalog = _read(f, struct.unpack_from("<I", record, 0x47)[0] * ISO_SECTOR, ISO_SECTOR)
    if catalog[0] != 1 or catalog[30:32] != b"\x55\xaa":
        raise IsoError("has a broken El Torito boot catalog (no validation entry)")
    platform = catalog[1]  # the validation entry's platform is the default entry's
    for at in range(32, min(len(catalog), _MAX_CATALOG_ENTRIES * 32), 32):
        entry = catalog[at:at + 32]
        if entry[0] in (0x90, 0x91):  # a section header: the entries after it are for its platform
            platform = entry[1]
        elif entry[0] == 0x88 and platform == EFI_PLATFORM:
            return int(struct.unpack_from("<I", entry, 8)[0]) * ISO_SECTOR
    raise IsoError("has no bootable El Torito entry for EFI (platform 0xEF): not a UEFI-bootable ISO")


class Fat:
    """A read-only FAT12/16/32 file system at `base` in `f`."""

    def __init__(self, f: BinaryIO, base: int) -> None:
        self.f, self.base = f, base
        bpb = _read(f, base, 512)
        self.sector: int = struct.unpack_from("<H", bpb, 11)[0]
        self.per_cluster = bpb[13]
        reserved, fats = struct.unpack_from("<H", bpb, 14)[0], bpb[16]
        root_entries = struct.unpack_from("<H", bpb, 17)[0]
        total = struct.unpack_from("<H", bpb, 19)[0] or struct.unpack_from("<I", bpb, 32)[0]
        fat_size = struct.unpack_from("<H", bpb, 22)[0] or struct.unpack_from("<I", bpb, 36)[0]
        if (bpb[510:512] != b"\x55\xaa" or self.sector not in (512, 1024, 2048, 4096)
                or self.per_cluster == 0 or self.per_cluster & (self.per_cluster - 1) or fats == 0
                or fat_size == 0):
            raise IsoError("has an EFI boot image that is not a FAT file system")
        self.fat_start = reserved * self.sector
        root_bytes = root_entries * 32
        self.root_start = self.fat_start + fats * fat_size * self.sector
        self.data_start = self.root_start + -(-root_bytes // self.sector) * self.sector
        self.root_entries = root_entries
        clusters = (total * self.sector - self.data_start) // (self.sector * self.per_cluster)
        self.bits = 12 if clusters < 4085 else 16 if clusters < 65525 else 32
        self.clusters = clusters
        self.root_cluster = struct.unpack_from("<I", bpb, 44)[0] if self.bits == 32 else 0

    @property
    def cluster_size(self) -> int:
        """Bytes per cluster."""
        return self.sector * self.per_cluster

    def _next(self, cluster: int) -> int | None:
        if self.bits == 12:
            raw = struct.unpack("<H", _read(self.f, self.base + self.fat_start + cluster * 3 // 2, 2))[0]
            value, end = (raw >> 4 if cluster & 1 else raw & 0xFFF), 0xFF8
        elif self.bits == 16:
            raw = struct.unpack("<H", _read(self.f, self.base + self.fat_start + cluster * 2, 2))[0]
            value, end = raw, 0xFFF8
        else:
            raw = struct.unpack("<I", _read(self.f, self.base + self.fat_start + cluster * 4, 4))[0]
            value, end = raw & 0x0FFFFFFF, 0x0FFFFFF8
        return None if value >= end else value

    def _chain(self, first: int, limit: int) -> bytes:
        out, seen = bytearray(), set()
        cluster: int | None = first
        while cluster is not None and len(out) < limit:
            if not 2 <= cluster < self.clusters + 2 or cluster in seen:
                raise IsoError("has an EFI boot image with a broken cluster chain")
            seen.add(cluster)
            offset = self.data_start + (cluster - 2) * self.cluster_size
            out += _read(self.f, self.base + offset, self.cluster_size)
            cluster = self._next(cluster)
        return bytes(out[:limit])

    def _entries(self, cluster: int) -> list[tuple[str, int, int, int]]:
        """(8.3 name, attributes, first cluster, size) of a directory (cluster 0: FAT12/16 root)."""
        if cluster == 0:
            raw = _read(self.f, self.base + self.root_start, self.root_entries * 32)
        else:
            raw = self._chain(cluster, _MAX_DIR_ENTRIES * 32)
        found = []
        for at in range(0, len(raw) - 31, 32):
            e = raw[at:at + 32]
            if e[0] == 0:
                break
            if e[0] == 0xE5 or e[11] == 0x0F or e[11] & 0x08:
                continue
            base, ext = e[0:8].decode("latin-1").rstrip(), e[8:11].decode("latin-1").rstrip()
            first = struct.unpack_from("<H", e, 20)[0] << 16 | struct.unpack_from("<H", e, 26)[0]
            size = struct.unpack_from("<I", e, 28)[0]
            found.append((f"{base}.{ext}" if ext else base, e[11], first, size))
        return found

    def read(self, path: tuple[str, ...], limit: int = MAX_FILE) -> bytes | None:
        """The file at `path` (8.3 names, any case), None if missing; refused above `limit`."""
        cluster = self.root_cluster
        for i, part in enumerate(path):
            match = next((e for e in self._entries(cluster) if e[0].upper() == part.upper()), None)
            if match is None:
                return None
            _name, attrs, first, size = match
            if i < len(path) - 1:
                if not attrs & 0x10:
                    return None
                cluster = first
                continue
            if attrs & 0x10:
                return None
            if size > limit:
                raise IsoError(f"holds {'/'.join(path)} of {size:,} bytes: larger than a boot loader")
            return self._chain(first, size) if size else b""
        return None


def loaders_from_iso(iso: Path) -> dict[str, bytes]:
    """Shim and GRUB (keys of BOOT_LOADERS) from the ISO's El Torito EFI boot image."""
    try:
        with iso.open("rb") as f:
            try:
                fat = Fat(f, efi_image_offset(f))
                found = {key: fat.read(path) for key, path in BOOT_LOADERS.items()}
            except IsoError as exc:
                raise IsoError(f"--iso {iso}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--iso {iso}: cannot read it: {exc.strerror or exc}") from None
    missing = ["/".join(BOOT_LOADERS[k]) for k, v in found.items() if v is None]
    if missing:
        raise IsoError(f"--iso {iso}: its EFI boot image has no {' or '.join(missing)}: not a "
                       "live ISO with shim and GRUB (the RHCOS live ISO has both)")
    return {k: v for k, v in found.items() if v is not None}
