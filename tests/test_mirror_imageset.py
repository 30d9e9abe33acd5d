"""`upi render` writes mirror/imageset-config.yaml, checked field by field against oc-mirror v2.

The facts (field names, required fields, apiVersion, semantics) are in
tests/data/oc-mirror-v2.yaml with the oc-mirror source each was read from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import inventory_path

from upi.cli import app
from upi.mirror.refs import parse_image

FACTS = yaml.safe_load((Path(__file__).parent / "data" / "oc-mirror-v2.yaml").read_text())
STRUCTS = FACTS["structs"]
# Which struct a key's value is, under each struct (type_config.go's field types).
CHILDREN = {
    ("ImageSetConfiguration", "mirror"): "Mirror",
    ("Mirror", "platform"): "Platform",
    ("Platform", "channels"): "ReleaseChannel",
    ("Mirror", "operators"): "Operator",
    ("Operator", "packages"): "IncludePackage",
    ("IncludePackage", "channels"): "IncludeChannel",
    ("Mirror", "additionalImages"): "AdditionalImage",
}


def _conforms(doc: Any, struct: str, where: str = "") -> list[str]:
    """Every key oc-mirror does not know, or required key missing, under `struct`."""
    if not isinstance(doc, dict):
        return [f"{where or '.'}: not a mapping"]
    spec = STRUCTS[struct]
    errors = [f"{where}.{k}: not a field of {struct}" for k in doc if k not in spec["fields"]]
    errors += [f"{where}.{k}: required by {struct}" for k in spec["required"] if k not in doc]
    for key, value in doc.items():
        child = CHILDREN.get((struct, key))
        if child is None:
            continue
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            errors += _conforms(item, child, f"{where}.{key}[{i}]")
    return errors


def _render(runner, inv: Path, out: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["render", str(inv), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load((out / "mirror" / "imageset-config.yaml").read_text())
    assert _conforms(doc, "ImageSetConfiguration") == []
    return doc


def _edited(example_dir: Path, old: str, new: str) -> Path:
    path = example_dir / "disconnected.yaml"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return path


def test_imageset_config_names_the_release_catalogs_and_images(runner, tmp_path: Path) -> None:
    doc = _render(runner, inventory_path("disconnected"), tmp_path / "out")
    assert doc["apiVersion"] == FACTS["api"]["apiVersion"]
    assert doc["kind"] == FACTS["api"]["kind"]
    platform = doc["mirror"]["platform"]
    assert platform["channels"] == [{"name": "stable-4.16", "minVersion": "4.16.3", "maxVersion": "4.16.3"}]
    assert platform["graph"] is True
    assert doc["mirror"]["operators"] == [
        {"catalog": "registry.redhat.io/redhat/redhat-operator-index:v4.16",
         "packages": [{"name": "nfd", "channels": [{"name": "stable"}]}]},
        {"catalog": "registry.redhat.io/redhat/certified-operator-index:v4.16",
         "packages": [{"name": "gpu-operator-certified"}]},
    ]
    images = [i["name"] for i in doc["mirror"]["additionalImages"]]
    assert images == ["registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.16",
                      "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubi8"]
    for image in images:
        parse_image(image)  # every name is a reference oc-mirror can pull


def test_the_inventorys_gpu_settings_reach_the_imageset(runner, example_dir: Path, tmp_path: Path) -> None:
    path = _edited(example_dir, "  catalog_sources:", "  operator_channel: v26.3\n  nfd_channel: '4.16'\n"
                   "  nfd_image: registry.example.com/nfd/operand:v1\n"
                   "  validation: {image: 'nvcr.io/nvidia/cuda:12.9.0-base-ubi9'}\n  catalog_sources:")
    doc = _render(runner, path, tmp_path / "out")
    operators = {o["catalog"].split("/")[-1]: o["packages"] for o in doc["mirror"]["operators"]}
    assert operators["redhat-operator-index:v4.16"] == [{"name": "nfd", "channels": [{"name": "4.16"}]}]
    assert operators["certified-operator-index:v4.16"] == [
        {"name": "gpu-operator-certified", "channels": [{"name": "v26.3"}]}]
    assert [i["name"] for i in doc["mirror"]["additionalImages"]] == [
        "registry.example.com/nfd/operand:v1", "nvcr.io/nvidia/cuda:12.9.0-base-ubi9"]


def test_another_release_mirrors_its_own_channel_and_indexes(runner, example_dir: Path,
                                                             tmp_path: Path) -> None:
    path = _edited(example_dir, '"4.16.3"', '"4.18.21"')
    text = path.read_text().replace("v4-16", "v4-18")
    path.write_text(text)
    doc = _render(runner, path, tmp_path / "out")
    assert doc["mirror"]["platform"]["channels"] == [
        {"name": "stable-4.18", "minVersion": "4.18.21", "maxVersion": "4.18.21"}]
    assert [o["catalog"] for o in doc["mirror"]["operators"]] == [
        "registry.redhat.io/redhat/redhat-operator-index:v4.18",
        "registry.redhat.io/redhat/certified-operator-index:v4.18"]
    assert "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.18" in [
        i["name"] for i in doc["mirror"]["additionalImages"]]


def test_explicit_catalogs_are_mirrored_as_named(runner, example_dir: Path, tmp_path: Path) -> None:
    path = _edited(example_dir, "  registry: mirror.lab.example.com:8443\n",
                   "  registry: mirror.lab.example.com:8443\n  catalogs:\n"
                   "    - {catalog: 'registry.redhat.io/redhat/certified-operator-index:v4.16',"
                   " name: certified}\n"
                   "    - {catalog: 'registry.redhat.io/redhat/redhat-operator-index:v4.16', name: redhat}\n")
    text = path.read_text().replace("cs-redhat-operator-index-v4-16", "redhat")
    path.write_text(text.replace("cs-certified-operator-index-v4-16", "certified"))
    doc = _render(runner, path, tmp_path / "out")
    assert [o["packages"][0]["name"] for o in doc["mirror"]["operators"]] == ["gpu-operator-certified", "nfd"]


def test_without_gpus_only_the_release_is_mirrored(runner, example_dir: Path, tmp_path: Path) -> None:
    path = example_dir / "disconnected.yaml"
    text = path.read_text().replace(", gpu: true}", "}")
    path.write_text(text[: text.index("gpu:\n")] + text[text.index("mirror:\n"):])
    doc = _render(runner, path, tmp_path / "out")
    assert set(doc["mirror"]) == {"platform"}


def test_without_a_mirror_section_nothing_is_written(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)]).exit_code == 0
    assert not (out / "mirror").exists()


@pytest.mark.parametrize(("key", "written"), [
    ("mirror_to_disk", "oc mirror --v2 -c imageset-config.yaml file://"),
    ("disk_to_mirror", "oc mirror --v2 -c imageset-config.yaml --from file://"),
])
def test_the_file_and_the_docs_give_the_oc_mirror_commands(runner, tmp_path: Path, key: str,
                                                           written: str) -> None:
    out = tmp_path / "out"
    _render(runner, inventory_path("disconnected"), out)
    head = (out / "mirror" / "imageset-config.yaml").read_text()
    docs = (Path(__file__).resolve().parents[1] / "docs" / "disconnected.md").read_text()
    # oc-mirror's own form of the command, as `oc mirror` (the oc plugin) takes it.
    fact = FACTS["semantics"][key].replace("oc-mirror --v2 -c <config>",
                                           "oc mirror --v2 -c imageset-config.yaml")
    assert written in fact
    assert written in head and written in docs
    if key == "disk_to_mirror":
        assert "docker://mirror.lab.example.com:8443" in head


@pytest.mark.parametrize(("policy", "network"), [
    ("    driver.rdma.enabled: true\n", True),
    ("    driver: {rdma: {enabled: true, useHostMofed: true}}\n", False),  # the host's MOFED, no operator
    ("    driver.rdma.enabled: false\n", False),
])
def test_gpudirect_rdma_mirrors_the_network_operator(runner, example_dir: Path, tmp_path: Path,
                                                     policy: str, network: bool) -> None:
    path = _edited(example_dir, "  catalog_sources:", "  cluster_policy:\n" + policy + "  catalog_sources:")
    doc = _render(runner, path, tmp_path / "out")
    certified = next(o for o in doc["mirror"]["operators"] if "certified-operator-index" in o["catalog"])
    names = [p["name"] for p in certified["packages"]]
    if network:
        assert names == ["gpu-operator-certified", "nvidia-network-operator"]
        # The bundle's default channel: Mellanox/network-operator v26.4.1,
        # bundle/metadata/annotations.yaml (operators.operatorframework.io.bundle.channel.default.v1).
        assert certified["packages"][1]["channels"] == [{"name": "stable"}]
    else:
        assert names == ["gpu-operator-certified"]
