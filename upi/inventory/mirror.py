"""The inventory's `mirror:` section and its rules (docs/disconnected.md).

A disconnected site mirrors the release, the operator catalogs upi installs
from and the images upi pulls into one registry with oc-mirror. The section
names that registry, the catalogs as the cluster will know them, and where
oc-mirror wrote its cluster resources. Credentials come from the pull secret
and the CA from `cluster.additional_trust_bundle_file`, as for the installer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from upi.inventory.gpu import CatalogSources, K8sName

if TYPE_CHECKING:
    from upi.inventory.model import Inventory

Finding = tuple[tuple[str | int, ...], str]

# The Red Hat and certified operator indexes, by release (oc-mirror's docs and
# OpenShift's "Mirroring Operator catalogs": registry.redhat.io/redhat/<index>:v4.Y).
REDHAT_INDEX = "registry.redhat.io/redhat/redhat-operator-index"
CERTIFIED_INDEX = "registry.redhat.io/redhat/certified-operator-index"
# oc-mirror v2 cuts a tag to this many characters in the CatalogSource name it
# writes (internal/pkg/clusterresources/clusterresources.go, hashTruncLen).
_TAG_CUT = 12


def _registry(value: str) -> str:
    from upi.inventory.installer_rules import repository_problem

    if "/" in value and "://" not in value:
        raise ValueError(f"{value[:80]!r} is a repository: name the registry alone, host[:port] "
                         "(the repositories are in cluster.mirrors)")
    problem = repository_problem(value)
    if problem:
        raise ValueError(f"{value[:80]!r} {problem}")
    return value


def _catalog_image(value: str) -> str:
    from upi.mirror.refs import parse_image

    try:
        ref = parse_image(value)
    except ValueError as exc:
        raise ValueError(f"{value[:80]!r} is not an image reference: {exc}") from None
    if ref.tag is None and ref.digest is None:
        raise ValueError(f"{value[:80]!r} names no tag or digest: write the index of a release "
                         f"({REDHAT_INDEX}:v4.16)")
    return value


Registry = Annotated[str, AfterValidator(_registry)]
CatalogImage = Annotated[str, AfterValidator(_catalog_image)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MirroredCatalog(_Model):
    """One operator index mirrored, and the CatalogSource name the cluster knows it by."""

    catalog: CatalogImage
    name: K8sName | None = None


class MirrorSettings(_Model):
    """The mirror registry of a disconnected site (oc-mirror v2)."""

    registry: Registry
    catalogs: list[MirroredCatalog] | None = Field(default=None, min_length=1)
    cluster_resources: str | None = None


def catalog_source_name(catalog: str) -> str:
    """The CatalogSource name oc-mirror v2 writes for an index (cs-<repository>-<tag>).

    Follows generateCatalogSource in oc-mirror's internal/pkg/clusterresources:
    the last path component, the tag (or digest) cut to 12 characters, every
    character outside [a-z0-9-] turned into '-'.
    """
    from upi.mirror.refs import parse_image

    ref = parse_image(catalog)
    suffix = (ref.tag if ref.tag is not None else (ref.digest or "").split(":", 1)[-1])[:_TAG_CUT]
    suffix = re.sub(r"[^a-z0-9-]", "-", suffix.lower()) or "0"
    return f"cs-{ref.repository.rsplit('/', 1)[-1]}-{suffix}".replace(".", "-")


def default_catalogs(version: tuple[int, int]) -> list[MirroredCatalog]:
    """The two indexes upi installs from, at the cluster's release."""
    tag = f"v{version[0]}.{version[1]}"
    return [MirroredCatalog(catalog=f"{REDHAT_INDEX}:{tag}"),
            MirroredCatalog(catalog=f"{CERTIFIED_INDEX}:{tag}")]


def catalogs(inv: Inventory) -> list[tuple[str, str]]:
    """(index image, CatalogSource name) of every mirrored catalog; [] without `mirror:`."""
    if inv.mirror is None:
        return []
    chosen = inv.mirror.catalogs or default_catalogs(inv.cluster.version)
    return [(c.catalog, c.name or catalog_source_name(c.catalog)) for c in chosen]


def index_of(inv: Inventory, index: str) -> tuple[int, str, str] | None:
    """(position, image, CatalogSource name) of the mirrored catalog that is `index`, at any tag."""
    from upi.mirror.refs import parse_image

    for i, (image, name) in enumerate(catalogs(inv)):
        if parse_image(image).name == index:
            return i, image, name
    return None


def mirrored_catalog_sources(inv: Inventory, given: CatalogSources) -> CatalogSources:
    """gpu.catalog_sources with each name the inventory leaves out taken from the mirrored catalogs."""
    names = {}
    for key, index in (("nfd", REDHAT_INDEX), ("gpu_operator", CERTIFIED_INDEX)):
        found = index_of(inv, index)
        if found is not None and key not in given.model_fields_set:
            names[key] = found[2]
    return given.model_copy(update=names) if names else given


def mirror_rules(inv: Inventory) -> Iterator[Finding]:
    """The registry serves cluster.mirrors; the catalogs are there and named as `upi gpu` uses them."""
    m = inv.mirror
    if m is None:
        return
    c = inv.cluster
    if c.openshift_version.count(".") != 2:
        yield ("cluster", "openshift_version"), (
            f"{c.openshift_version!r} names no z-stream: with mirror: write the exact release "
            f"(\"{c.openshift_version}.3\"), the one oc-mirror mirrors and the installer installs")
    served = [mm for entry in c.mirrors for mm in entry.mirrors
              if mm == m.registry or mm.startswith(f"{m.registry}/")]
    if not served:
        yield ("mirror", "registry"), (
            f"{m.registry} serves none of cluster.mirrors: copy the mappings oc-mirror wrote "
            "(cluster-resources/idms-oc-mirror.yaml) into cluster.mirrors")
    if not c.additional_trust_bundle_file:
        yield ("mirror", "registry"), (
            f"{m.registry}'s CA is read from cluster.additional_trust_bundle_file, which is not set: "
            "name the PEM file holding the CA that signed the registry's certificate")
    yield from _catalog_rules(inv)
    yield from _image_rules(inv)


def _image_rules(inv: Inventory) -> Iterator[Finding]:
    """Images upi pulls by name must be references oc-mirror and `upi check mirror` can follow."""
    from upi.mirror.refs import parse_image

    if inv.gpu is None:
        return  # the defaults are references
    named: list[Finding] = [(("gpu", "validation", "image"), inv.gpu.validation.image)]
    if inv.gpu.nfd_image:
        named.append((("gpu", "nfd_image"), inv.gpu.nfd_image))
    for loc, image in named:
        try:
            parse_image(image)
        except ValueError as exc:
            yield loc, f"{image[:80]!r} is not an image reference oc-mirror can mirror: {exc}"


def _catalog_rules(inv: Inventory) -> Iterator[Finding]:
    from upi.inventory.gpu import settings

    assert inv.mirror is not None  # noqa: S101 - mirror_rules returns first without it
    names: dict[str, int] = {}
    for i, (_image, name) in enumerate(catalogs(inv)):
        if name in names:
            yield ("mirror", "catalogs", i, "name"), (
                f"{name!r} is already the name of mirror.catalogs[{names[name]}]")
        names.setdefault(name, i)
    if not any(n.gpu for n in inv.nodes) and inv.gpu is None:
        return
    gpu = settings(inv)
    wanted = (("nfd", REDHAT_INDEX, "Node Feature Discovery"),
              ("gpu_operator", CERTIFIED_INDEX, "the GPU Operator"))
    for key, index, what in wanted:
        found = index_of(inv, index)
        if found is None:
            yield ("mirror", "catalogs"), (
                f"no mirrored catalog is {index}, which {what} comes from: add it "
                f"(catalog: {index}:v{inv.cluster.version[0]}.{inv.cluster.version[1]})")
            continue
        chosen = getattr(gpu.catalog_sources, key)
        if chosen != found[2]:
            # upi gpu subscribes from gpu.catalog_sources; a default source is off when disconnected.
            yield ("gpu", "catalog_sources", key), (
                f"{chosen!r} is not the mirrored catalog of {what}: the cluster knows "
                f"{found[1]} as {found[2]!r} (mirror.catalogs[{found[0]}]): set "
                f"gpu.catalog_sources.{key}: {found[2]}")


def mirror_files(inv: Inventory) -> Iterator[Finding]:
    """The pull secret holds the registry's credentials, the bundle a CA, the resources directory exists."""
    from upi.inventory.rules import MAX_NAMED_FILE, _read
    from upi.mirror.auth import credentials_for

    m = inv.mirror
    if m is None:
        return
    c = inv.cluster
    secret, _ = _read(inv, c.pull_secret_file)
    if secret is not None and credentials_for(secret, m.registry, "") is None:
        yield ("mirror", "registry"), (
            f"{c.pull_secret_file} holds no credentials for {m.registry} (an \"auths\" entry "
            f"\"{m.registry}\" with \"auth\"): add them, e.g. podman login --authfile "
            f"{c.pull_secret_file} {m.registry}")
    if c.additional_trust_bundle_file:
        bundle, _ = _read(inv, c.additional_trust_bundle_file, MAX_NAMED_FILE)
        if bundle is not None and not _holds_ca(bundle):
            yield ("cluster", "additional_trust_bundle_file"), (
                f"{c.additional_trust_bundle_file} holds no CA certificate (CA:TRUE, or self-signed) "
                f"to verify {m.registry} with: add the CA that signed the registry's certificate")
    if m.cluster_resources and not inv.resolve(m.cluster_resources).is_dir():
        yield ("mirror", "cluster_resources"), (
            f"{m.cluster_resources} is not a directory (relative paths start at the inventory's "
            "folder): name the cluster-resources directory oc-mirror wrote in its workspace")


def _holds_ca(text: str) -> bool:
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(text.encode())
    except ValueError:
        return True  # safety.trust_bundle reports a bundle that does not parse
    for cert in certs:
        try:
            if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
                return True
        except x509.ExtensionNotFound:
            pass
        if cert.issuer == cert.subject:
            return True
    return False
