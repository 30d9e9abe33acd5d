"""What an installed cluster will pull for GPU day 2, read from the cluster itself.

The operators' images are those their CSVs list as `relatedImages`: the
PackageManifest API (packages.operators.coreos.com/v1) carries them for each
channel's current CSV in `status.channels[].currentCSVDesc.relatedImages`
(operator-framework/operator-lifecycle-manager, pkg/package-server/apis/
operators/v1/packagemanifest_types.go: CSVDescription.RelatedImages). The
driver container is built on the release's driver-toolkit image, which the
imagestream `openshift/driver-toolkit` names (`spec.tags[].from`, kind
DockerImage) - gpu-day2.md §4: disconnected, it must be mirrored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from upi.gpu.kube import Kube
from upi.inventory.gpu import settings
from upi.inventory.mirror import index_of
from upi.inventory.model import Inventory
from upi.mirror.imageset import Needed, operator_packages, uses_gpu

PACKAGES = "packages.operators.coreos.com/v1"
DTK = ("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift")


@dataclass(frozen=True)
class Unknown:
    """A list of images that could not be read from the cluster, and what to do."""

    what: str
    why: str
    fix: str


def _related(entry: dict[str, Any]) -> list[str]:
    desc = entry.get("currentCSVDesc") or {}
    images = []
    for item in desc.get("relatedImages") or []:
        image = item.get("image") if isinstance(item, dict) else item
        if isinstance(image, str) and image and image not in images:
            images.append(image)
    return images


def operator_images(inv: Inventory, kube: Kube) -> tuple[list[Needed], list[Unknown]]:
    """The relatedImages of each operator upi installs, at the channel it subscribes to."""
    out: list[Needed] = []
    unknown: list[Unknown] = []
    namespace = settings(inv).catalog_sources.namespace
    for index, package, channel in operator_packages(inv):
        found = index_of(inv, index)
        source = found[2] if found else "?"
        what = f"PackageManifest {namespace}/{package}"
        pm = kube.get(PACKAGES, "PackageManifest", package, namespace)
        st = (pm or {}).get("status") or {}
        if pm is None:
            unknown.append(Unknown(what, "no mirrored catalog serves the package",
                                   f"mirror {package} with mirror/imageset-config.yaml and apply the "
                                   f"CatalogSource {source} oc-mirror wrote"))
            continue
        if st.get("catalogSource") not in (None, source):
            unknown.append(Unknown(what, f"served by CatalogSource {st.get('catalogSource')}, not {source}",
                                   f"apply the CatalogSource {source} oc-mirror wrote"))
            continue
        chosen = channel or st.get("defaultChannel")
        entry = next((c for c in st.get("channels") or [] if c.get("name") == chosen), None)
        if entry is None:
            unknown.append(Unknown(what, f"no channel {chosen!r} in the mirrored catalog",
                                   "mirror the channel upi subscribes to (mirror/imageset-config.yaml)"))
            continue
        csv = entry.get("currentCSV", "?")
        out += [Needed(image, f"{csv} (relatedImages)") for image in _related(entry)]
    return out, unknown


def driver_toolkit_image(kube: Kube) -> tuple[Needed | None, Unknown | None]:
    """The driver-toolkit image of the cluster's release, from its imagestream."""
    stream = kube.get(*DTK)
    what = "ImageStream openshift/driver-toolkit"
    for tag in ((stream or {}).get("spec") or {}).get("tags") or []:
        source = tag.get("from") or {}
        if source.get("kind") == "DockerImage" and source.get("name"):
            return Needed(str(source["name"]), "driver-toolkit of the cluster's release"), None
    return None, Unknown(what, "names no image (absent, or no tag from a DockerImage)",
                         "mirror the release's driver-toolkit image (it is part of the release payload)")


def cluster_images(inv: Inventory, kube: Kube) -> tuple[list[Needed], list[Unknown]]:
    """Every image GPU day 2 pulls that the cluster can name, and what it could not name."""
    if not uses_gpu(inv):
        return [], []
    needed, unknown = operator_images(inv, kube)
    dtk, missing = driver_toolkit_image(kube)
    if dtk is not None:
        needed.append(dtk)
    if missing is not None:
        unknown.append(missing)
    return needed, unknown
