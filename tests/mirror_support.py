"""A mirror site for the tests: the real registry holding what a disconnected install pulls.

`site` (a module fixture body) starts Debian's docker-registry (tests/realregistry.py)
with a test CA and htpasswd, and pushes the release image, the NFD operand,
the validation image and the images an installed cluster names (operators'
relatedImages, the driver toolkit). `mirror_inventory` writes
inventories/disconnected.yaml pointed at it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from certs import make_ca
from conftest import INVENTORIES
from realregistry import RunningRegistry, registry

EXAMPLE_REGISTRY = "mirror.lab.example.com:8443"
RELEASE = ("openshift/release-images", "4.16.3-x86_64")
NFD = ("openshift4/ose-node-feature-discovery-rhel9", "v4.16")
VALIDATION_REPO = "nvidia/k8s/cuda-sample"
NEVER_MIRRORED = "registry.redhat.io/openshift4/never-mirrored:v1"
# What an installed cluster names (by digest), and where oc-mirror puts each in the registry.
NFD_OPERATOR = "registry.redhat.io/openshift4/ose-cluster-nfd-rhel9-operator"
CLUSTER_IMAGES = {
    NFD_OPERATOR: "openshift4/ose-cluster-nfd-rhel9-operator",
    "nvcr.io/nvidia/gpu-operator": "nvidia/gpu-operator",
    "nvcr.io/nvidia/driver": "nvidia/driver",
    "quay.io/openshift-release-dev/ocp-v4.0-art-dev": "openshift/release",
}


@dataclass(frozen=True)
class Site:
    """The running registry and the validation image's digest (pushed under VALIDATION_REPO)."""

    reg: RunningRegistry
    digest: str
    elsewhere: str  # a digest pushed only under another repository
    storage: Path  # the registry's storage, which a second (token-auth) registry serves too
    cluster: dict[str, str]  # source image by digest -> pushed (the installed cluster's images)


def start_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The registry with every image pushed, until the generator is closed."""
    ca = make_ca("upi test mirror CA")
    work = tmp_path_factory.mktemp("registry")
    with registry(work, ca) as reg:
        reg.push(*RELEASE, fmt="oci")
        reg.push(*NFD, fmt="docker")
        digest = reg.push(VALIDATION_REPO, "vectoradd", fmt="oci")
        elsewhere = reg.push("nvidia/k8s/other-sample", "v1", fmt="oci", payload=b"only here")
        cluster = {}
        for source, repo in CLUSTER_IMAGES.items():
            cluster[source] = f"{source}@{reg.push(repo, 'x', fmt='docker', payload=source.encode())}"
        yield Site(reg, digest, elsewhere, work / "storage", cluster)


def mirror_inventory(tmp: Path, reg: RunningRegistry, *, host: str | None = None, password: str | None = None,
               ca_pem: bytes | None = None, validation: str | None = None,
               skip_nfd: bool = False) -> Path:
    """inventories/disconnected.yaml (and its files) in `tmp`, served by `reg` (or `host`)."""
    host = host or reg.host
    text = (INVENTORIES / "disconnected.yaml").read_text().replace(EXAMPLE_REGISTRY, host)
    if validation:
        text = text.replace("  catalog_sources:",
                            f"  validation: {{image: '{validation}'}}\n  catalog_sources:")
    if skip_nfd:
        text = text.replace("  catalog_sources:",
                            f"  nfd_image: {NEVER_MIRRORED}\n  catalog_sources:")
    auth = base64.b64encode(f"{reg.user}:{password or reg.password}".encode()).decode()
    secret = {"auths": {"cloud.openshift.com": {"auth": "RkFLRTpub3QtYS1yZWFs"}, host: {"auth": auth}}}
    (tmp / "pull-secret-mirror.json").write_text(json.dumps(secret))
    (tmp / "mirror-ca.pem").write_bytes(ca_pem or reg.ca.cert_pem)
    (tmp / "id_rsa.pub").write_text((INVENTORIES / "id_rsa.pub").read_text())
    path = tmp / "disconnected.yaml"
    path.write_text(text)
    return path
