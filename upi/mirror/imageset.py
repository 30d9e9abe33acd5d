"""What a disconnected site must mirror for this install, as oc-mirror v2 reads it.

`mirror/imageset-config.yaml` is an ImageSetConfiguration of
`mirror.openshift.io/v2alpha1`; the fields written here, and the oc-mirror
sources each follows, are listed in tests/data/oc-mirror-v2.yaml. The same
lists drive `upi check mirror` (release_image, additional_images), so the
check asks the registry for what the file told oc-mirror to put there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from upi.inventory.gpu import settings
from upi.inventory.mirror import CERTIFIED_INDEX, REDHAT_INDEX, catalogs, index_of
from upi.inventory.model import Inventory

API_VERSION = "mirror.openshift.io/v2alpha1"
KIND = "ImageSetConfiguration"
# Where the OpenShift release images are published (OpenShift docs, "Mirroring images
# for a disconnected installation"): quay.io/openshift-release-dev/ocp-release:<x.y.z>-<arch>.
RELEASE_REPOSITORY = "quay.io/openshift-release-dev/ocp-release"
ARCH = "x86_64"
NETWORK_PACKAGE = "nvidia-network-operator"


@dataclass(frozen=True)
class Needed:
    """One image upi's install pulls, and why."""

    image: str
    why: str


def uses_gpu(inv: Inventory) -> bool:
    """Day 2 installs the GPU stack: a gpu: true node or a gpu: section (as render's gpu/)."""
    return any(n.gpu for n in inv.nodes) or inv.gpu is not None


def release_image(inv: Inventory) -> str:
    """The release image of the inventory's exact version (mirror: requires x.y.z)."""
    return f"{RELEASE_REPOSITORY}:{inv.cluster.openshift_version}-{ARCH}"


def additional_images(inv: Inventory) -> list[Needed]:
    """Images upi names itself (not through a catalog): NFD's operand, the validation pod."""
    if not uses_gpu(inv):
        return []
    from upi.gpu.objects import nfd_operand_image

    gpu = settings(inv)
    # upi's NodeFeatureDiscovery names the operand by tag, which the catalog's
    # relatedImages (by digest) do not carry: mirrored on its own.
    out = [Needed(nfd_operand_image(inv), "NFD operand (spec.operand.image of nfd-instance)"),
           Needed(gpu.validation.image, "GPU validation pod (gpu.validation.image)")]
    if any(n.rdma is not None for n in inv.nodes):  # the RDMA bandwidth test's pods (docs/rdma.md)
        from upi.inventory.rdma import operator_settings

        out.append(Needed(operator_settings(inv).bandwidth.image,
                          "RDMA bandwidth test pods (network_operator.bandwidth.image)"))
    return out


def operator_packages(inv: Inventory) -> list[tuple[str, str, str | None]]:
    """(index, package, channel or None for every channel head) of each operator upi installs."""
    if not uses_gpu(inv):
        return []
    from upi.gpu.objects import GPU_PACKAGE, NFD_PACKAGE

    gpu = settings(inv)
    out = [(REDHAT_INDEX, NFD_PACKAGE, gpu.nfd_channel), (CERTIFIED_INDEX, GPU_PACKAGE, gpu.operator_channel)]
    if rdma(inv):
        # GPUDirect RDMA needs the NVIDIA Network Operator first (gpu-day2.md §5); its bundle
        # (Mellanox/network-operator bundle/metadata/annotations.yaml) names the package and the
        # default channel `stable`; it is in the certified index.
        out.append((CERTIFIED_INDEX, NETWORK_PACKAGE, _network_channel(inv)))
    return out


def _network_channel(inv: Inventory) -> str:
    from upi.inventory.rdma import operator_settings

    return operator_settings(inv).channel or "stable"


def rdma(inv: Inventory) -> bool:
    """GPUDirect RDMA asked for: a DGX with rdma:, or driver.rdma.enabled without a host NIC driver."""
    if any(n.rdma is not None for n in inv.nodes):
        return True
    driver = settings(inv).cluster_policy.get("driver") or {}
    flags = driver.get("rdma") or {} if isinstance(driver, dict) else {}
    return isinstance(flags, dict) and flags.get("enabled") is True and flags.get("useHostMofed") is not True


def imageset_config(inv: Inventory) -> dict[str, Any]:
    """The ImageSetConfiguration document, keys in oc-mirror's order."""
    major, minor = inv.cluster.version
    version = inv.cluster.openshift_version
    mirror: dict[str, Any] = {"platform": {
        "channels": [{"name": f"stable-{major}.{minor}", "minVersion": version, "maxVersion": version}],
        "graph": True,
    }}
    operators = []
    for image, _name in catalogs(inv):
        packages = []
        for index, package, channel in operator_packages(inv):
            found = index_of(inv, index)
            if found is not None and found[1] == image:
                entry: dict[str, Any] = {"name": package}
                if channel:
                    entry["channels"] = [{"name": channel}]
                packages.append(entry)
        if packages:
            operators.append({"catalog": image, "packages": packages})
    if operators:
        mirror["operators"] = operators
    extra = additional_images(inv)
    if extra:
        mirror["additionalImages"] = [{"name": n.image} for n in extra]
    return {"kind": KIND, "apiVersion": API_VERSION, "mirror": mirror}


def render_files(inv: Inventory) -> list[tuple[str, str]]:
    """`mirror/` of the render layout: only when the inventory has `mirror:`."""
    if inv.mirror is None:
        return []
    from upi.gpu.objects import dump

    head = ("# What oc-mirror v2 must mirror for this install (docs/disconnected.md):\n"
            "#   connected side:    oc mirror --v2 -c imageset-config.yaml file://<archive dir>\n"
            "#   disconnected side: oc mirror --v2 -c imageset-config.yaml --from file://<archive dir> "
            f"docker://{inv.mirror.registry}\n")
    return [("mirror/imageset-config.yaml", head + dump(imageset_config(inv)))]
