"""The inventory's `gpu:` section and the GPU rules (docs/gpu.md, reference gpu-day2.md).

Kept apart from model.py so the GPU day-2 settings grow without touching the
model every other command shares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from upi.inventory.crdfields import carried, expand, misfit_message
from upi.inventory.crdfields import merge as merge  # re-exported: upi.gpu merges the overrides

if TYPE_CHECKING:
    from upi.inventory.model import Inventory

Finding = tuple[tuple[str | int, ...], str]

_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
# A crun change in these releases breaks every GPU Operator version (gpu-day2.md §4).
BROKEN_VERSIONS = frozenset({"4.18.22", "4.18.23"})


def _k8s_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes name (lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit)"
        )
    return value


def _image(value: str) -> str:
    if not _IMAGE.fullmatch(value):
        raise ValueError(f"{value!r} is not a container image reference (registry/repo:tag)")
    return value


def _policy(value: dict[str, Any]) -> dict[str, Any]:
    return expand(value, policy_facts()["specFields"], "ClusterPolicy")


K8sName = Annotated[str, AfterValidator(_k8s_name)]
Image = Annotated[str, AfterValidator(_image)]
MigProfile = Annotated[str, AfterValidator(_k8s_name)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogSources(_Model):
    """OLM catalog sources the operators come from (rename them for a mirrored catalog)."""

    nfd: K8sName = "redhat-operators"
    gpu_operator: K8sName = "certified-operators"
    namespace: K8sName = "openshift-marketplace"


class Validation(_Model):
    """The workload that proves a GPU is schedulable: one pod per GPU node."""

    image: Image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubi8"
    success_log: str = Field(default="Test PASSED", min_length=1)
    command: list[str] | None = Field(default=None, min_length=1)


def _branch(value: Any) -> Any:
    """`version: 580` in YAML is an int: the driver branch is meant."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Precompiled(_Model):
    """Where the precompiled, signed driver images are (the GPU Operator's driver.repository/image/version).

    The operator pulls `<repository>/<image>:<version>-<kernel>-<os>` per node
    kernel (gpu-operator api/nvidia/v1alpha1 GetPrecompiledImagePath); the
    defaults are the images Red Hat publishes for OpenShift (NVIDIA's
    cloud-native-docs, openshift/gpu-operator-with-precompiled-drivers).
    """

    repository: Annotated[str, AfterValidator(_image)] = "registry.redhat.io/nvidia"
    image: K8sName = "gpu-driver-rhel9"
    # The driver branch (580), or a full driver version.
    version: Annotated[str, BeforeValidator(_branch), Field(pattern=r"^[0-9]+(\.[0-9]+)*$")] = "580"
    os: Annotated[str | None, Field(pattern=r"^[a-z]+[0-9][0-9.]*$")] = None  # default: rhcos<X.Y>


class GpuSettings(_Model):
    """Cluster-level GPU day 2: NFD + NVIDIA GPU Operator through OLM."""

    operator_channel: K8sName | None = None
    nfd_channel: K8sName = "stable"
    operator_namespace: K8sName = "nvidia-gpu-operator"
    catalog_sources: CatalogSources = CatalogSources()
    nfd_image: Image | None = None
    cluster_policy: Annotated[dict[str, Any], AfterValidator(_policy)] = Field(default_factory=dict)
    validation: Validation = Validation()
    # precompiled: signed driver images per kernel (Secure Boot); build: built on the node by the
    # Driver Toolkit; auto: precompiled when a GPU node boots with Secure Boot on.
    driver: Literal["precompiled", "build", "auto"] = "auto"
    precompiled: Precompiled = Precompiled()


DEFAULT = GpuSettings()


def settings(inv: Inventory) -> GpuSettings:
    """The inventory's `gpu:` section, or every default.

    With `mirror:`, a catalog source the section does not name is the mirrored
    catalog's (the default sources are off on a disconnected cluster).
    """
    gpu = inv.gpu or DEFAULT
    if inv.mirror is None:
        return gpu
    from upi.inventory.mirror import mirrored_catalog_sources

    return gpu.model_copy(update={"catalog_sources": mirrored_catalog_sources(inv, gpu.catalog_sources)})


def policy_facts() -> dict[str, Any]:
    """The ClusterPolicy spec's field names (cluster-policy.json, rebuilt by tests/carried_facts.py).

    From NVIDIA/gpu-operator's CRD and the CSV that owns it (Apache-2.0):
    validate checks `gpu.cluster_policy` against them (crdfields.py).
    """
    return carried("cluster-policy.json")


def gpu_rules(inv: Inventory) -> Iterator[Finding]:
    """`gpus` and `mig_config` mean something only on a `gpu: true` node; the ClusterPolicy overrides fit."""
    if inv.gpu is not None:
        # The CRD is structural: the API server would drop the field, or refuse the object, at upi gpu.
        bad = misfit_message("ClusterPolicy", policy_facts(), inv.gpu.cluster_policy)
        if bad is not None:
            yield ("gpu", "cluster_policy"), bad
    for i, node in enumerate(inv.nodes):
        if node.gpu and node.role.value != "worker":
            # The GPU pool is a custom MachineConfigPool, and the MCO keeps masters in the master
            # pool (machine-config-operator docs/custom-pools.md: custom pools on masters are not
            # supported): the pool's rollout would wait for a node that never joins it.
            yield ("nodes", i, "gpu"), (
                f"{node.name} is a {node.role.value}: gpu: true is for workers (the DGXs join the GPU pool, "
                "a custom MachineConfigPool, and the machine config operator keeps control-plane nodes "
                "out of custom pools)")
        if node.gpus is not None and not node.gpu:
            yield ("nodes", i, "gpus"), f"{node.name} sets gpus but not gpu: true (add gpu: true)"
        if node.mig_config is not None and not node.gpu:
            yield ("nodes", i, "mig_config"), f"{node.name} sets mig_config but not gpu: true"


def gpu_warnings(inv: Inventory) -> list[str]:
    """GPU facts worth a warning: a release the GPU Operator is known broken on."""
    out = []
    if inv.gpu_pool is not None and not any(n.gpu for n in inv.nodes):
        out.append("gpu_pool is set but no node has gpu: true, so there is no GPU pool and the section "
                   "is not used")
    if any(n.gpu for n in inv.nodes) and inv.cluster.openshift_version in BROKEN_VERSIONS:
        out.append(f"OpenShift {inv.cluster.openshift_version} breaks every GPU Operator version "
                   "(crun change): install another release before upi gpu")
    return out
