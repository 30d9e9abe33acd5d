"""oc-mirror's cluster-resources directory as `upi gpu` reads it: hostile and broken files.

Each broken object is refused naming the file, the document's first line and
the field; nothing is half-applied (load_resources returns nothing when one
object is bad); kinds upi does not apply are listed as skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import inventory_path

from upi.errors import InventoryError
from upi.inventory import load_inventory
from upi.mirror.day2 import load_resources

REGISTRY = "mirror.lab.example.com:8443"
IDMS = f"""\
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  name: idms-oc-mirror-0
spec:
  imageDigestMirrors:
  - source: quay.io/openshift-release-dev/ocp-v4.0-art-dev
    mirrors: [{REGISTRY}/openshift/release]
"""


def _load(tmp_path: Path, files: dict[str, str | bytes]):
    directory = tmp_path / "cluster-resources"
    directory.mkdir()
    for name, content in files.items():
        (directory / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    inv = load_inventory(inventory_path("disconnected"))
    return load_resources(inv, directory), directory


def test_a_sound_directory_loads_and_skips_what_upi_does_not_apply(tmp_path: Path) -> None:
    got, _ = _load(tmp_path, {"idms-oc-mirror.yaml": IDMS,
                              "updateService.yaml": "kind: UpdateService\nmetadata: {name: u}\n",
                              "README.txt": "not a manifest"})
    assert [o["metadata"]["name"] for o in got.objects] == ["idms-oc-mirror-0"]
    assert got.skipped == ["updateService.yaml: UpdateService u"]


@pytest.mark.parametrize(("content", "line", "field", "fragment"), [
    (IDMS.replace("config.openshift.io/v1", "config.openshift.io/v2"), 1, "apiVersion",
     "ImageDigestMirrorSet is config.openshift.io/v1"),
    (IDMS.replace(f"[{REGISTRY}/openshift/release]", "[other.example.com/openshift/release]"), 1,
     "spec.imageDigestMirrors[0].mirrors[0]", "is not on mirror.registry mirror.lab.example.com:8443"),
    (IDMS.replace(f"[{REGISTRY}/openshift/release]", f"{REGISTRY}/openshift/release"), 1,
     "spec.imageDigestMirrors[0].mirrors", "not a list of repositories"),
    (IDMS.replace("quay.io/openshift-release-dev/ocp-v4.0-art-dev", "https://quay.io/x"), 1,
     "spec.imageDigestMirrors[0].source", "is written as a URL"),
    ("---\n" + IDMS.replace("  name: idms-oc-mirror-0\n", ""), 2, "metadata.name", "missing"),
    (IDMS.replace("metadata:\n  name: idms-oc-mirror-0\n", "metadata: [a, b]\n"), 1, "metadata.name",
     "missing"),
    ("kind: CatalogSource\napiVersion: operators.coreos.com/v1alpha1\nmetadata: {name: cs, namespace: x}\n"
     f"spec: {{image: '{REGISTRY}/redhat/index:v4.16', sourceType: configmap}}\n", 1, "spec.sourceType",
     "a mirrored index is served as grpc"),
    ("kind: CatalogSource\napiVersion: operators.coreos.com/v1alpha1\nmetadata: {name: cs, namespace: x}\n"
     f"spec: {{image: '{REGISTRY}/redhat/index:v4.16', sourceType: grpc}}\n", 1, "metadata.namespace",
     "not openshift-marketplace"),
])
def test_a_broken_object_is_refused_naming_file_line_and_field(tmp_path: Path, content: str, line: int,
                                                              field: str, fragment: str) -> None:
    with pytest.raises(InventoryError) as caught:
        _load(tmp_path, {"idms-oc-mirror.yaml": IDMS, "broken.yaml": content})
    broken = str(tmp_path / "cluster-resources" / "broken.yaml")
    problems = caught.value.problems
    assert any(p.startswith(f"{broken}:{line}: {field}: ") and fragment in p for p in problems), problems


@pytest.mark.parametrize(("content", "fragment"), [
    ("a: [1, 2\n", "not YAML"),
    (b"\xff\xfe not utf-8", "not UTF-8 text"),
    ("a: &a [x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                                                  for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
     "alias"),
    ("[" * 5000, "nested more than"),
    ("x" * (2 << 20), "is 2097152 bytes; upi reads at most 1048576"),
])
def test_hostile_files_are_refused_without_a_traceback(tmp_path: Path, content: str | bytes,
                                                      fragment: str) -> None:
    with pytest.raises(InventoryError) as caught:
        _load(tmp_path, {"hostile.yaml": content})
    text = "\n".join(caught.value.problems)
    assert fragment in text
    assert text.count(str(tmp_path / "cluster-resources" / "hostile.yaml")) == 1, text
