"""The inventory's `mirror:` section: each broken case exits 2 naming FILE:LINE: field.

Every case edits a copy of inventories/disconnected.yaml (line numbers are
those of the edited file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from certs import issue, make_ca
from conftest import inventory_path

from upi.cli import app
from upi.inventory import load_inventory
from upi.inventory.gpu import settings
from upi.inventory.mirror import catalog_source_name, catalogs

REGISTRY_LINE = "  registry: mirror.lab.example.com:8443\n"


@dataclass(frozen=True)
class Case:
    """Replace `old` by `new` (and write `files`), expect `line`, `field`, `fragment`."""

    id: str
    old: str
    new: str
    line: int
    field: str
    fragment: str
    files: dict[str, str] = field(default_factory=dict)


def _leaf_pem() -> str:
    return issue(make_ca("other CA"), "mirror.lab.example.com", server=True).cert_pem.decode()


CASES = [
    Case("registry-is-a-repository", REGISTRY_LINE, "  registry: mirror.lab.example.com:8443/ocp4\n", 55,
         "mirror.registry", "is a repository: name the registry alone, host[:port]"),
    Case("registry-is-a-url", REGISTRY_LINE, "  registry: https://mirror.lab.example.com\n", 55,
         "mirror.registry", "is written as a URL"),
    Case("registry-serves-no-mirror", REGISTRY_LINE, "  registry: other.lab.example.com:5000\n", 55,
         "mirror.registry", "other.lab.example.com:5000 serves none of cluster.mirrors"),
    Case("a-port-is-part-of-the-registry", REGISTRY_LINE, "  registry: mirror.lab.example.com\n", 55,
         "mirror.registry", "serves none of cluster.mirrors"),
    Case("no-trust-bundle", "  additional_trust_bundle_file: mirror-ca.pem # the CA of the mirror registry\n",
         "", 54, "mirror.registry", "CA is read from cluster.additional_trust_bundle_file, which is not set"),
    Case("bundle-without-a-ca", "", "", 10, "cluster.additional_trust_bundle_file",
         "mirror-ca.pem holds no CA certificate", files={"mirror-ca.pem": ""}),
    Case("no-credentials-for-the-registry", "", "", 55, "mirror.registry",
         "pull-secret-mirror.json holds no credentials for mirror.lab.example.com:8443",
         files={"pull-secret-mirror.json": json.dumps(
             {"auths": {"quay.io": {"auth": "dXNlcjpwYXNz"}}})}),
    Case("version-without-z-stream", '"4.16.3"', '"4.16"', 7, "cluster.openshift_version",
         "'4.16' names no z-stream: with mirror: write the exact release"),
    Case("catalog-without-tag", REGISTRY_LINE, REGISTRY_LINE + "  catalogs:\n    - catalog: "
         "registry.redhat.io/redhat/redhat-operator-index\n", 57, "mirror.catalogs[0].catalog",
         "names no tag or digest"),
    Case("catalog-not-a-reference", REGISTRY_LINE, REGISTRY_LINE + "  catalogs:\n    - catalog: "
         "'Registry.redhat.io/Redhat:v4.16'\n", 57, "mirror.catalogs[0].catalog",
         "is not an image reference"),
    Case("gpu-operator-catalog-not-mirrored", REGISTRY_LINE, REGISTRY_LINE + "  catalogs:\n    - catalog: "
         "registry.redhat.io/redhat/redhat-operator-index:v4.16\n", 56, "mirror.catalogs",
         "no mirrored catalog is registry.redhat.io/redhat/certified-operator-index, which the GPU "
         "Operator comes from"),
    Case("duplicate-catalog-names", REGISTRY_LINE, REGISTRY_LINE + "  catalogs:\n"
         "    - {catalog: 'registry.redhat.io/redhat/redhat-operator-index:v4.16', name: mirrored}\n"
         "    - {catalog: 'registry.redhat.io/redhat/certified-operator-index:v4.16', name: mirrored}\n",
         58, "mirror.catalogs[1].name", "'mirrored' is already the name of mirror.catalogs[0]"),
    Case("gpu-installs-from-a-default-catalog", "    nfd: cs-redhat-operator-index-v4-16\n",
         "    nfd: redhat-operators\n", 52, "gpu.catalog_sources.nfd",
         "'redhat-operators' is not the mirrored catalog of Node Feature Discovery: the cluster knows "
         "registry.redhat.io/redhat/redhat-operator-index:v4.16 as 'cs-redhat-operator-index-v4-16'"),
    Case("cluster-resources-missing", REGISTRY_LINE, REGISTRY_LINE + "  cluster_resources: oc-mirror/cr\n",
         56, "mirror.cluster_resources", "oc-mirror/cr is not a directory"),
    Case("validation-image-not-a-reference", "  catalog_sources:",
         "  validation: {image: 'nvcr.io/NVIDIA/cuda:12'}\n  catalog_sources:", 51, "gpu.validation.image",
         "is not an image reference oc-mirror can mirror"),
    Case("unknown-key", REGISTRY_LINE, REGISTRY_LINE + "  regsitry: x\n", 56, "mirror.regsitry",
         "unknown key"),
]


def _broken(tmp: Path, case: Case) -> Path:
    base = inventory_path("disconnected")
    text = base.read_text()
    if case.old:
        assert text.count(case.old) == 1, f"{case.id}: the edit must match exactly once"
        text = text.replace(case.old, case.new)
    for name in ("pull-secret-mirror.json", "id_rsa.pub", "mirror-ca.pem"):
        (tmp / name).write_text(case.files.get(name, (base.parent / name).read_text()))
    if case.id == "bundle-without-a-ca":  # a certificate, but the registry's own (not self-signed)
        (tmp / "mirror-ca.pem").write_text(_leaf_pem())
    path = tmp / "disconnected.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_broken_mirror_section_exits_2_naming_file_line_and_field(runner, tmp_path: Path,
                                                                    case: Case) -> None:
    path = _broken(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    where = f"{path}:{case.line}: {case.field}: "
    lines = [ln for ln in result.output.splitlines() if where in ln]
    assert lines, f"no problem at {where!r} in:\n{result.output}"
    assert any(case.fragment in ln for ln in lines), result.output
    assert "bm90LWEtcmVhbC1wYXNzd29yZA" not in result.output  # the password, base64 or not
    assert "not-a-real-password" not in result.output


def test_the_example_disconnected_inventory_is_valid(runner) -> None:
    result = runner.invoke(app, ["validate", str(inventory_path("disconnected"))])
    assert result.exit_code == 0, result.output


def test_default_catalogs_are_the_release_indexes_under_oc_mirrors_names() -> None:
    inv = load_inventory(inventory_path("disconnected"))
    assert catalogs(inv) == [
        ("registry.redhat.io/redhat/redhat-operator-index:v4.16", "cs-redhat-operator-index-v4-16"),
        ("registry.redhat.io/redhat/certified-operator-index:v4.16", "cs-certified-operator-index-v4-16"),
    ]


@pytest.mark.parametrize(("catalog", "name"), [
    # oc-mirror's own expectations (internal/pkg/clusterresources/clusterresources_test.go):
    ("registry.redhat.io/redhat/redhat-operator-index:v4.15", "cs-redhat-operator-index-v4-15"),
    ("registry.redhat.io/redhat/redhat-operator-index@sha256:7c4ef7434c97" + "0" * 52,
     "cs-redhat-operator-index-7c4ef7434c97"),
    # A tag past 12 characters is cut (hashTruncLen).
    ("quay.io/org/my.index:v4.16-2026-11-27", "cs-my-index-v4-16-2026-1"),
])
def test_catalog_source_names_follow_oc_mirror(catalog: str, name: str) -> None:
    assert catalog_source_name(catalog) == name


def test_schema_describes_the_mirror_section(runner) -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert "mirror" in doc["properties"]
    props = doc["$defs"]["MirrorSettings"]["properties"]
    assert set(props) == {"registry", "catalogs", "cluster_resources"}
    assert all("description" in p for p in props.values())
    assert "pull secret" in props["registry"]["description"]


def test_without_gpu_catalog_sources_upi_installs_from_the_mirrored_catalogs(runner, example_dir: Path,
                                                                            tmp_path: Path) -> None:
    path = example_dir / "disconnected.yaml"
    text = path.read_text()
    text = text[: text.index("gpu:\n")] + text[text.index("mirror:\n"):]  # no gpu: section at all
    path.write_text(text + "  catalogs:\n"
                    "    - catalog: 'registry.redhat.io/redhat/redhat-operator-index:v4.16'\n"
                    "      name: rh-mirror\n"
                    "    - catalog: 'registry.redhat.io/redhat/certified-operator-index:v4.16'\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    nfd = (out / "gpu" / "12-nfd-subscription.yaml").read_text()
    assert "source: rh-mirror\n" in nfd
    inv = load_inventory(path)
    sources = settings(inv).catalog_sources
    assert (sources.nfd, sources.gpu_operator) == ("rh-mirror", "cs-certified-operator-index-v4-16")
