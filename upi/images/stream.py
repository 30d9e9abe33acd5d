"""The RHCOS an installer was built for: `openshift-install coreos print-stream-json`.

Shape (reference/real-installer.md): the PXE artifacts for x86_64 are at
`.architectures.x86_64.artifacts.metal.formats.pxe.{kernel,initramfs,rootfs}`,
each `{location, sha256}`; the metal raw image (the `image` of OpenShift
before 4.6) at `formats["raw.gz"].disk`; `.release` beside `formats` is the
RHCOS build.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from upi.errors import UpiError
from upi.runner import run

ARCH = "x86_64"
STREAM_TIMEOUT = 120.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# inventory key -> where the stream keeps that artifact under .formats
_FORMATS = {"kernel": ("pxe", "kernel"), "initramfs": ("pxe", "initramfs"),
            "rootfs": ("pxe", "rootfs"), "image": ("raw.gz", "disk"),
            "iso": ("iso", "disk")}  # the live ISO: `upi images --iso` takes shim and GRUB from it


class StreamError(UpiError):
    """The installer's stream could not be read or has not the expected shape (exit 1)."""


@dataclass(frozen=True)
class StreamArtifact:
    """One artifact of the stream: the inventory key it serves, file name, URL, sha256."""

    key: str
    name: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Stream:
    """The RHCOS build an installer was built for, and its x86_64 metal artifacts by key."""

    release: str
    artifacts: dict[str, StreamArtifact]

    def sha256_by_name(self) -> dict[str, str]:
        """File name -> sha256 of every artifact."""
        return {a.name: a.sha256 for a in self.artifacts.values()}


def _at(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            raise StreamError(f"the installer's RHCOS stream has no {'.'.join(keys)}: it is not the "
                              "shape `coreos print-stream-json` prints (reference: stream-metadata-go)")
        doc = doc[key]
    return doc


def parse_stream(text: str) -> Stream:
    """The x86_64 metal artifacts of a stream document."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StreamError(f"the installer's RHCOS stream is not JSON: {exc}") from None
    metal = _at(doc, "architectures", ARCH, "artifacts", "metal")
    formats = _at(metal, "formats")
    found = {}
    for key, (fmt, part) in _FORMATS.items():
        entry = formats.get(fmt, {}).get(part) if isinstance(formats.get(fmt), dict) else None
        if not isinstance(entry, dict):
            continue
        url, sha = entry.get("location"), entry.get("sha256")
        if not isinstance(url, str) or not isinstance(sha, str) or not _SHA256.match(sha):
            raise StreamError(f"the installer's RHCOS stream has no usable location/sha256 for "
                              f"{fmt}.{part}")
        found[key] = StreamArtifact(key, posixpath.basename(urlsplit(url).path), url, sha)
    release = metal.get("release")
    return Stream(release if isinstance(release, str) else "unknown", found)


def read_stream(installer: Path) -> Stream:
    """Run `openshift-install coreos print-stream-json` (offline, a few seconds) and parse it."""
    result = run([installer, "coreos", "print-stream-json"], timeout=STREAM_TIMEOUT)
    return parse_stream(result.stdout)
