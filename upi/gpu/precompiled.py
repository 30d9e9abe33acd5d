"""Precompiled, signed NVIDIA driver images: the ClusterPolicy's driver fields and the tag pre-flight.

With Secure Boot on, the kernel refuses the module the GPU Operator builds
on the node (unsigned); the precompiled driver containers carry signed
modules per kernel. The operator pulls, per GPU node,
`<repository>/<image>:<version>-<kernelVersion>-<os>` (gpu-operator
api/nvidia/v1alpha1 NVIDIADriverSpec.GetPrecompiledImagePath: driver
branch, the node's `status.nodeInfo.kernelVersion`, then the OS as
`<ID><VERSION_ID>` of os-release, e.g. `rhcos4.18`), and the ClusterPolicy
asks for it with `driver.usePrecompiled: true` and `repository`, `image`,
`version` (NVIDIA cloud-native-docs, openshift/gpu-operator-with-precompiled-drivers).
A tag missing for a node's kernel leaves that node without a driver, so
the pre-flight asks the registry first.
"""

from __future__ import annotations

import difflib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from upi.facts.boot import secure_boot_nodes
from upi.inventory.gpu import Precompiled, settings
from upi.inventory.model import Inventory

Driver = Literal["precompiled", "build"]
OS_ID = "feature.node.kubernetes.io/system-os_release.ID"  # NFD's os-release labels
OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
NEAREST = 3


def driver_mode(inv: Inventory, reported: Mapping[str, bool | None] | None = None) -> Driver:
    """`gpu.driver`, with auto resolved: precompiled when a GPU node boots with Secure Boot on.

    `reported`: node name -> the BMC's SecureBootEnable (facts.boot.secure_boot_nodes).
    """
    mode = settings(inv).driver
    if mode != "auto":
        return mode
    secure = secure_boot_nodes(inv, reported)
    return "precompiled" if any(n.gpu and n.name in secure for n in inv.nodes) else "build"


def policy_driver(inv: Inventory, reported: Mapping[str, bool | None] | None = None) -> dict[str, Any]:
    """The ClusterPolicy spec fields the driver mode sets (none for build)."""
    if driver_mode(inv, reported) != "precompiled":
        return {}
    pre = settings(inv).precompiled
    return {"driver": {"usePrecompiled": True, "repository": pre.repository, "image": pre.image,
                       "version": pre.version}}


def os_tag(inv: Inventory, labels: Mapping[str, str] | None = None) -> str:
    """The `<os>` part of the tag: gpu.precompiled.os, else the node's os-release (NFD), else rhcos<X.Y>."""
    pre = settings(inv).precompiled
    if pre.os:
        return pre.os
    labels = labels or {}
    if labels.get(OS_ID) and labels.get(OS_VERSION):
        return f"{labels[OS_ID]}{labels[OS_VERSION]}"
    major, minor = inv.cluster.openshift_version.split(".")[:2]
    return f"rhcos{major}.{minor}"


def tag_for(pre: Precompiled, kernel: str, os: str) -> str:
    """The tag the GPU Operator pulls for one node."""
    return f"{pre.version}-{kernel}-{os}"


def nearest(tags: list[str], want: str) -> list[str]:
    """The tags closest to `want`: same branch and OS first, by likeness."""
    branch, os = want.split("-", 1)[0] + "-", "-" + want.rsplit("-", 1)[-1]
    same = [t for t in tags if t.startswith(branch) and t.endswith(os)]
    pool = same or tags
    close = difflib.get_close_matches(want, pool, n=NEAREST, cutoff=0.0)
    return close or sorted(pool)[:NEAREST]


@dataclass(frozen=True)
class NodeKernel:
    """One GPU node as the cluster reports it."""

    node: str
    kernel: str
    os: str


def missing_tags(inv: Inventory, nodes: list[NodeKernel], timeout: float = 10.0) -> list[str]:
    """Per GPU node whose precompiled tag the registry does not hold: node, kernel, tag and nearest tags.

    The registry is asked with the pull secret's credentials for it and the
    inventory's trust bundle (as the cluster pulls).
    """
    from upi.mirror.auth import credentials_for
    from upi.mirror.refs import parse_image
    from upi.mirror.registry import Registry, trust
    from upi.safefs import UnreadableFile, read_named_text

    pre = settings(inv).precompiled
    ref = parse_image(f"{pre.repository}/{pre.image}")
    c = inv.cluster
    where = f"{ref.registry}/{ref.repository}"
    try:
        secret = read_named_text(inv.resolve(c.pull_secret_file))
        bundle = inv.resolve(c.additional_trust_bundle_file) if c.additional_trust_bundle_file else None
        context = trust(bundle)
    except (UnreadableFile, OSError, ssl.SSLError) as exc:
        # upi gpu may run where the install's files are not: the check says so, the run stops there.
        why = str(exc) if isinstance(exc, UnreadableFile) else \
            f"the trust bundle {c.additional_trust_bundle_file}: {getattr(exc, 'strerror', None) or exc}"
        return [f"{where}: not asked: {why}"]
    client = Registry(ref.registry, credentials_for(secret, ref.registry, ref.repository), context, timeout)
    down = client.ping()
    if down is not None:
        return [f"{where}: {down}"]
    problems = []
    listed: list[str] | None = None
    for n in nodes:
        tag = tag_for(pre, n.kernel, n.os)
        probe = client.head_manifest(ref.repository, tag)
        if probe.verdict == "found":
            continue
        if probe.verdict != "missing":
            problems.append(f"{n.node} (kernel {n.kernel}): {where}:{tag}: {probe.verdict}, {probe.detail}")
            continue
        if listed is None:
            listed, _ = client.tags(ref.repository)  # no list: no nearest tags, the tag is still named
        near = nearest(listed, tag)
        problems.append(f"{n.node} (kernel {n.kernel}): no precompiled driver {where}:{tag}; nearest "
                        f"tags: {', '.join(near) if near else 'none (the repository lists no tags)'}")
    return problems
