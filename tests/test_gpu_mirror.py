"""`upi gpu` on a disconnected cluster: oc-mirror's cluster resources, the default sources off,
and the mirror pre-flight against the REAL registry (tests/mirror_support.py).

The cluster is the FAKE GPU cluster (tests/fake_gpu.py on tests/fake_apiserver.py),
seen as oc-mirror leaves it: its PackageManifests served by the mirrored
CatalogSources, each channel's current CSV listing its relatedImages, and
the driver-toolkit imagestream naming the release's image.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_gpu import FakeGpuCluster
from gpu_support import gpu_args, sim_nodes, start_cluster
from mirror_support import NFD_OPERATOR, VALIDATION_REPO, Site, mirror_inventory, start_site

from upi.cli import app

OLM = "operators.coreos.com/v1alpha1"
CONFIG = "config.openshift.io/v1"
PACKAGES = "packages.operators.coreos.com/v1"
MARKETPLACE = "openshift-marketplace"
SOURCES = {"nfd": "cs-redhat-operator-index-v4-16",
           "gpu-operator-certified": "cs-certified-operator-index-v4-16"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from start_site(tmp_path_factory)


def _catalogs_become_ready(fake: FakeGpuCluster) -> None:
    """OLM's catalog operator: a CatalogSource whose registry pod serves gets connectionState READY
    (operator-framework/api, pkg/operators/v1alpha1/catalogsource_types.go, GRPCConnectionState)."""
    for cs in fake.api.list(OLM, "CatalogSource", MARKETPLACE):
        state = ((cs.get("status") or {}).get("connectionState") or {}).get("lastObservedState")
        if state != "READY":
            fake.api.set_status(OLM, "CatalogSource", cs["metadata"]["name"], MARKETPLACE,
                                {"connectionState": {"lastObservedState": "READY"}})


def _disconnected(fake: FakeGpuCluster, site: Site, extra_related: str | None = None) -> None:
    """The packages as the mirrored catalogs serve them, and the release's driver-toolkit image."""
    related = {"nfd": {"stable": [site.cluster[NFD_OPERATOR]]},
               "gpu-operator-certified": {"v26.3": [site.cluster["nvcr.io/nvidia/gpu-operator"],
                                                    site.cluster["nvcr.io/nvidia/driver"]]}}
    if extra_related:
        related["gpu-operator-certified"]["v26.3"].append(extra_related)
    for name, channels in related.items():
        pm = fake.api.get(PACKAGES, "PackageManifest", name, MARKETPLACE)
        assert pm is not None
        pm["status"]["catalogSource"] = SOURCES[name]
        pm["metadata"]["labels"] = {"catalog": SOURCES[name]}
        for channel in pm["status"]["channels"]:
            channel["currentCSVDesc"] = {"relatedImages": channels.get(channel["name"], [])}
        fake.api.put(pm)
    dtk = site.cluster["quay.io/openshift-release-dev/ocp-v4.0-art-dev"]
    fake.api.put({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                  "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
                  "spec": {"tags": [{"name": "latest", "from": {"kind": "DockerImage", "name": dtk}}]}})
    fake.api.put({"apiVersion": CONFIG, "kind": "OperatorHub", "metadata": {"name": "cluster"}, "spec": {}})
    fake.api.controllers.append(lambda: _catalogs_become_ready(fake))


def _resources(directory: Path, host: str, *, cs_image_host: str | None = None) -> None:
    """cluster-resources/ as oc-mirror v2 writes it (docs/features/cluster-resources.md)."""
    directory.mkdir()
    (directory / "idms-oc-mirror.yaml").write_text(f"""\
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  name: idms-oc-mirror-release-0
spec:
  imageDigestMirrors:
  - mirrors:
    - {host}/openshift/release
    source: quay.io/openshift-release-dev/ocp-v4.0-art-dev
  - mirrors:
    - {host}/openshift/release-images
    source: quay.io/openshift-release-dev/ocp-release
---
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  name: idms-oc-mirror-operator-0
spec:
  imageDigestMirrors:
  - mirrors:
    - {host}/nvidia
    source: nvcr.io/nvidia
  - mirrors:
    - {host}/openshift4
    source: registry.redhat.io/openshift4
""")
    (directory / "itms-oc-mirror.yaml").write_text(f"""\
apiVersion: config.openshift.io/v1
kind: ImageTagMirrorSet
metadata:
  name: itms-oc-mirror-0
spec:
  imageTagMirrors:
  - mirrors:
    - {host}/nvidia/k8s
    source: nvcr.io/nvidia/k8s
""")
    for index, name in (("redhat-operator-index", SOURCES["nfd"]),
                        ("certified-operator-index", SOURCES["gpu-operator-certified"])):
        (directory / f"{name}.yaml").write_text(f"""\
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: {name}
  namespace: openshift-marketplace
spec:
  image: {cs_image_host or host}/redhat/{index}:v4.16
  sourceType: grpc
""")
    (directory / "cc-redhat-operator-index-v4-16.yaml").write_text(f"""\
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: cc-redhat-operator-index-v4-16
spec:
  source:
    type: Image
    image:
      ref: {host}/redhat/redhat-operator-index:v4.16
""")
    (directory / "updateService.yaml").write_text("""\
apiVersion: updateservice.operator.openshift.io/v1
kind: UpdateService
metadata:
  name: update-service-oc-mirror
  namespace: openshift-update-service
spec:
  replicas: 2
""")


def _inventory(tmp_path: Path, site: Site, **kw: Any) -> Path:
    # tag and digest, as a disconnected site pins it: the FAKE cluster runs the vectorAdd sample
    # for the cuda-sample image of a vectoradd tag (tests/fake_images.py)
    validation = f"nvcr.io/{VALIDATION_REPO}:vectoradd-cuda12.5.0@{site.digest}"
    path = mirror_inventory(tmp_path, site.reg, validation=validation)
    _resources(tmp_path / "cluster-resources", site.reg.host, **kw)
    text = path.read_text().replace(f"  registry: {site.reg.host}\n",
                                    f"  registry: {site.reg.host}\n  cluster_resources: cluster-resources\n")
    path.write_text(text)
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    fake = start_cluster(tmp_path, sim_nodes())
    yield fake
    fake.stop()
    assert fake.api.schema_violations == [] and fake.api.controller_errors == []


def test_gpu_applies_oc_mirrors_resources_and_installs_from_the_mirrored_catalogs(
        runner, tmp_path: Path, site: Site, cluster: FakeGpuCluster) -> None:
    _disconnected(cluster, site)
    result = runner.invoke(app, gpu_args(_inventory(tmp_path, site), cluster))
    assert result.exit_code == 0, result.output
    api = cluster.api
    for kind, name in (("ImageDigestMirrorSet", "idms-oc-mirror-release-0"),
                       ("ImageDigestMirrorSet", "idms-oc-mirror-operator-0"),
                       ("ImageTagMirrorSet", "itms-oc-mirror-0")):
        assert api.get("config.openshift.io/v1", kind, name) is not None, name
    for name in SOURCES.values():
        cs = api.get(OLM, "CatalogSource", name, MARKETPLACE)
        assert cs is not None and cs["spec"]["image"].startswith(f"{site.reg.host}/redhat/")
    hub = api.get("config.openshift.io/v1", "OperatorHub", "cluster")
    assert hub is not None and hub["spec"]["disableAllDefaultSources"] is True
    for package, ns in (("nfd", "openshift-nfd"), ("gpu-operator-certified", "nvidia-gpu-operator")):
        sub = api.get(OLM, "Subscription", package, ns)
        assert sub is not None and sub["spec"]["source"] == SOURCES[package]
    assert "skipped cc-redhat-operator-index-v4-16.yaml: ClusterCatalog" in result.output
    assert "skipped updateService.yaml: UpdateService" in result.output
    assert f"mirror: {site.cluster['nvcr.io/nvidia/driver']} -> found" in result.output


def test_an_image_missing_from_the_mirror_stops_gpu_before_anything_is_installed(
        runner, tmp_path: Path, site: Site, cluster: FakeGpuCluster) -> None:
    missing = "nvcr.io/nvidia/gpu-operator-validator@sha256:" + "b" * 64
    _disconnected(cluster, site, extra_related=missing)
    result = runner.invoke(app, gpu_args(_inventory(tmp_path, site), cluster, "--json"))
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert (doc["diagnosis"]["step"], doc["diagnosis"]["object"]) == ("mirror", missing)
    assert missing in json.dumps(doc["diagnosis"])
    assert cluster.api.get(OLM, "Subscription", "nfd", "openshift-nfd") is None


def test_a_catalog_source_off_the_mirror_registry_is_refused_naming_file_and_field(
        runner, tmp_path: Path, site: Site, cluster: FakeGpuCluster) -> None:
    _disconnected(cluster, site)
    path = _inventory(tmp_path, site, cs_image_host="registry.redhat.io")
    result = runner.invoke(app, gpu_args(path, cluster))
    assert result.exit_code == 2, result.output
    where = f"{tmp_path / 'cluster-resources' / (SOURCES['nfd'] + '.yaml')}:1: spec.image: "
    assert where + "registry.redhat.io/redhat/redhat-operator-index:v4.16 is not on mirror.registry" \
        in result.output
    assert "Traceback" not in result.output
    assert cluster.api.get(CONFIG, "ImageDigestMirrorSet", "idms-oc-mirror-release-0") is None
