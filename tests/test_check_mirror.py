"""`upi check mirror` against a REAL registry: Debian's docker-registry (tests/realregistry.py).

TLS with a test CA, htpasswd credentials, images the tests push themselves.
The inventory is inventories/disconnected.yaml with the registry's loopback
address as mirror.registry and in cluster.mirrors, its credentials in the
pull secret and the test CA as the trust bundle.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from certs import make_ca
from check_helpers import LOOPBACK, free_port
from conftest import INVENTORIES
from mirror_support import (
    NFD_OPERATOR,
    RELEASE,
    VALIDATION_REPO,
    Site,
    mirror_inventory,
    start_site,
)
from realregistry import registry
from tokenserver import token_server

from upi.cli import app
from upi.mirror.registry import MANIFEST_TYPES


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from start_site(tmp_path_factory)


_inventory = mirror_inventory


def _rows(runner, path: Path) -> tuple[int, dict[str, dict[str, str]], str]:
    result = runner.invoke(app, ["check", "mirror", str(path), "--json", "--timeout", "5"])
    assert "Traceback" not in result.output
    doc = json.loads(result.stdout)
    return result.exit_code, {r["check"]: r for r in doc["checks"]}, result.output


def _state(row: dict[str, str]) -> str:
    return row["got"].split(" ", 1)[0]


def test_all_present_exits_0_with_a_row_per_image(runner, tmp_path: Path, site: Site) -> None:
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    code, rows, _ = _rows(runner, _inventory(tmp_path, site.reg, validation=validation))
    assert code == 0, rows
    assert {k: _state(r) for k, r in rows.items()} == {
        "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64": "found",
        "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.16": "found",
        validation: "found",
    }
    host = site.reg.host
    assert rows["quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"]["expected"] == \
        f"{host}/openshift/release-images:4.16.3-x86_64"
    assert rows[validation]["expected"] == f"{host}/{VALIDATION_REPO}@{site.digest}"
    assert {k: r["verdict"] for k, r in rows.items()} == {
        "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64": "pass",  # the installer pulls it by digest
        "registry.redhat.io/openshift4/ose-node-feature-discovery-rhel9:v4.16": "warn",  # by tag
        validation: "pass",  # by digest
    }


def test_with_oc_mirrors_resources_named_a_tag_pull_is_no_warning(runner, tmp_path: Path, site: Site) -> None:
    path = _inventory(tmp_path, site.reg, validation=f"nvcr.io/{VALIDATION_REPO}@{site.digest}")
    (tmp_path / "cluster-resources").mkdir()
    text = path.read_text().replace(f"  registry: {site.reg.host}\n",
                                    f"  registry: {site.reg.host}\n  cluster_resources: cluster-resources\n")
    path.write_text(text)
    code, rows, _ = _rows(runner, path)
    assert code == 0
    assert {r["verdict"] for r in rows.values()} == {"pass"}


def test_the_table_names_source_mirror_and_state(runner, tmp_path: Path, site: Site) -> None:
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    path = _inventory(tmp_path, site.reg, validation=validation)
    result = runner.invoke(app, ["check", "mirror", str(path)])
    assert result.exit_code == 0, result.output
    # The NFD operand is pulled by tag: found, but only an ImageTagMirrorSet sends the cluster there.
    assert "3 checks: 2 passed, 1 warning, 0 failed" in result.output
    assert "warn: NFD operand (spec.operand.image of nfd-instance) is pulled by tag" in result.output
    assert f"{site.reg.host}/openshift4/ose-node-feature-discovery-rhel9:v4.16" in result.output


def test_one_missing_image_exits_1_and_names_it(runner, tmp_path: Path, site: Site) -> None:
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    code, rows, output = _rows(runner, _inventory(tmp_path, site.reg, validation=validation, skip_nfd=True))
    assert code == 1
    states = {k: _state(r) for k, r in rows.items()}
    assert states["registry.redhat.io/openshift4/never-mirrored:v1"] == "missing"
    assert states["quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"] == "found"
    assert states[validation] == "found"
    assert "HTTP 404" in rows["registry.redhat.io/openshift4/never-mirrored:v1"]["got"]


def test_a_digest_present_under_another_repository_only_is_missing(runner, tmp_path: Path,
                                                                  site: Site) -> None:
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.elsewhere}"
    code, rows, _ = _rows(runner, _inventory(tmp_path, site.reg, validation=validation))
    assert code == 1
    assert _state(rows[validation]) == "missing"
    assert rows[validation]["expected"] == f"{site.reg.host}/{VALIDATION_REPO}@{site.elsewhere}"


def test_an_image_no_mapping_covers_is_missing(runner, tmp_path: Path, site: Site) -> None:
    validation = "ghcr.io/someone/cuda-sample:v1"  # cluster.mirrors maps no ghcr.io
    code, rows, _ = _rows(runner, _inventory(tmp_path, site.reg, validation=validation))
    assert code == 1
    assert rows[validation]["expected"] == "no cluster.mirrors entry covers it"
    fix = rows[validation]["fix"]
    assert "add a cluster.mirrors entry whose source is ghcr.io/someone/cuda-sample" in fix


def test_wrong_credentials_are_unauthorised_and_never_shown(runner, tmp_path: Path, site: Site) -> None:
    path = _inventory(tmp_path, site.reg, password="wrong-password-42")
    code, rows, output = _rows(runner, path)
    assert code == 1
    assert {_state(r) for r in rows.values()} == {"unauthorised"}
    assert "HTTP 401" in next(iter(rows.values()))["got"]
    for secret in ("wrong-password-42", site.reg.password, base64.b64encode(b"wrong-password-42").decode()):
        assert secret not in output


def test_an_unknown_ca_is_unreachable_naming_the_trust_bundle(runner, tmp_path: Path, site: Site) -> None:
    other = make_ca("some other CA")
    code, rows, _ = _rows(runner, _inventory(tmp_path, site.reg, ca_pem=other.cert_pem))
    assert code == 1
    for row in rows.values():
        assert _state(row) == "unreachable"
        assert "certificate verify failed" in row["got"] and "trust bundle" in row["got"]


def test_a_registry_that_is_down_is_unreachable(runner, tmp_path: Path, site: Site) -> None:
    down = f"{LOOPBACK}:{free_port()}"  # nothing listens there
    code, rows, _ = _rows(runner, _inventory(tmp_path, site.reg, host=down))
    assert code == 1
    assert {_state(r) for r in rows.values()} == {"unreachable"}
    assert all("refused" in r["got"].lower() for r in rows.values())


@pytest.mark.parametrize("password", [None, "wrong-password-42"], ids=["right", "wrong"])
def test_a_registry_asking_for_bearer_tokens_gets_one_from_its_realm(runner, tmp_path: Path, site: Site,
                                                                    password: str | None) -> None:
    """The token flow: 401 Bearer challenge -> the realm with Basic credentials -> a JWT."""
    with token_server(tmp_path / "token", site.reg.ca, site.reg.user, site.reg.password) as tokens, \
            registry(tmp_path / "bearer", site.reg.ca, storage=site.storage, token=tokens) as bearer:
        validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
        path = _inventory(tmp_path, bearer, password=password, validation=validation)
        code, rows, output = _rows(runner, path)
    states = {_state(r) for r in rows.values()}
    if password is None:
        assert (code, states) == (0, {"found"})
    else:
        assert (code, states) == (1, {"unauthorised"})
        assert password not in output
    assert {r["service"] for r in tokens.requests} == {"upi-test-registry"}
    assert f"repository:{VALIDATION_REPO}:pull" in {r["scope"] for r in tokens.requests}
    assert {r["authorised"] for r in tokens.requests} == {str(password is None)}


def test_the_registry_answers_404_for_an_oci_manifest_not_asked_for(site: Site) -> None:
    """Why Accept names both formats: the real registry hides an OCI manifest from a Docker-only ask."""
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(cadata=site.reg.ca.cert_pem.decode())
    host, port = site.reg.host.split(":")
    auth = base64.b64encode(f"{site.reg.user}:{site.reg.password}".encode()).decode()
    answers = {}
    for name, accept in (("docker", MANIFEST_TYPES[2]), ("both", ", ".join(MANIFEST_TYPES))):
        conn = http.client.HTTPSConnection(host, int(port), timeout=5, context=ctx)
        conn.request("HEAD", f"/v2/{RELEASE[0]}/manifests/{RELEASE[1]}",
                     headers={"Accept": accept, "Authorization": f"Basic {auth}"})
        answers[name] = conn.getresponse().status
        conn.close()
    assert answers == {"docker": 404, "both": 200}


def test_without_a_mirror_section_exits_2(runner) -> None:
    result = runner.invoke(app, ["check", "mirror", str(INVENTORIES / "dgxpod.yaml")])
    assert result.exit_code == 2
    assert "mirror: the inventory has no mirror: section" in result.output
    assert "Traceback" not in result.output


# --- an installed cluster: the FAKE API server (tests/fake_apiserver.py) ---------------------

MARKETPLACE = "openshift-marketplace"


def _package(name: str, source: str, channels: dict[str, list[str]], default: str) -> dict[str, Any]:
    """A PackageManifest as the package server lists it (OLM pkg/package-server/apis/operators/v1/
    packagemanifest_types.go: status.channels[].currentCSVDesc.relatedImages, a list of strings)."""
    return {"apiVersion": "packages.operators.coreos.com/v1", "kind": "PackageManifest",
            "metadata": {"name": name, "namespace": MARKETPLACE, "labels": {"catalog": source}},
            "status": {"catalogSource": source, "catalogSourceNamespace": MARKETPLACE, "packageName": name,
                       "defaultChannel": default,
                       "channels": [{"name": c, "currentCSV": f"{name}.{c}",
                                     "currentCSVDesc": {"relatedImages": images}}
                                    for c, images in channels.items()]}}


@pytest.fixture
def cluster(tmp_path: Path, site: Site) -> Iterator[Any]:
    from fake_apiserver import FakeApiServer

    img = site.cluster
    fake = FakeApiServer(tmp_path / "kube").start()
    fake.put(_package("nfd", "cs-redhat-operator-index-v4-16",
                      {"stable": [img[NFD_OPERATOR]]}, "stable"))
    fake.put(_package("gpu-operator-certified", "cs-certified-operator-index-v4-16", {
        "v26.3": [img["nvcr.io/nvidia/gpu-operator"], img["nvcr.io/nvidia/driver"]],
        "v26.7": ["nvcr.io/nvidia/gpu-operator@sha256:" + "7" * 64],  # not the chosen channel
    }, "v26.3"))
    fake.put({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
              "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
              "spec": {"tags": [{"name": "latest", "from": {
                  "kind": "DockerImage", "name": img["quay.io/openshift-release-dev/ocp-v4.0-art-dev"]}}]}})
    yield fake
    fake.stop()


def _cluster_rows(runner, path: Path, fake: Any) -> tuple[int, dict[str, dict[str, str]]]:
    result = runner.invoke(app, ["check", "mirror", str(path), "--kubeconfig", str(fake.kubeconfig),
                                 "--json", "--timeout", "5"])
    assert "Traceback" not in result.output
    return result.exit_code, {r["check"]: r for r in json.loads(result.stdout)["checks"]}


def test_an_installed_cluster_adds_related_images_and_the_driver_toolkit(runner, tmp_path: Path, site: Site,
                                                                        cluster: Any) -> None:
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    code, rows = _cluster_rows(runner, _inventory(tmp_path, site.reg, validation=validation), cluster)
    assert code == 0, rows
    assert set(site.cluster.values()) <= set(rows)  # every relatedImage of the chosen channels, and the DTK
    assert len(rows) == 3 + len(site.cluster)  # nothing from the channel upi does not subscribe to
    dtk = site.cluster["quay.io/openshift-release-dev/ocp-v4.0-art-dev"]
    assert rows[dtk]["expected"] == f"{site.reg.host}/openshift/release@{dtk.split('@')[1]}"
    assert {_state(r) for r in rows.values()} == {"found"}


def test_a_related_image_not_mirrored_fails_and_is_named(runner, tmp_path: Path, site: Site,
                                                        cluster: Any) -> None:
    missing = "nvcr.io/nvidia/gpu-operator-validator@sha256:" + "a" * 64
    pm = cluster.get("packages.operators.coreos.com/v1", "PackageManifest", "gpu-operator-certified",
                     MARKETPLACE)
    pm["status"]["channels"][0]["currentCSVDesc"]["relatedImages"].append(missing)
    cluster.put(pm)
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    code, rows = _cluster_rows(runner, _inventory(tmp_path, site.reg, validation=validation), cluster)
    assert code == 1
    assert _state(rows[missing]) == "missing"
    assert "gpu-operator-certified.v26.3 (relatedImages)" in rows[missing]["fix"]


def test_a_package_the_mirrored_catalog_lacks_fails(runner, tmp_path: Path, site: Site, cluster: Any) -> None:
    cluster.delete("packages.operators.coreos.com/v1", "PackageManifest", "nfd", MARKETPLACE)
    cluster.delete("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift")
    validation = f"nvcr.io/{VALIDATION_REPO}@{site.digest}"
    code, rows = _cluster_rows(runner, _inventory(tmp_path, site.reg, validation=validation), cluster)
    assert code == 1
    nfd = rows[f"PackageManifest {MARKETPLACE}/nfd"]
    assert nfd["verdict"] == "fail" and "no mirrored catalog serves the package" in nfd["got"]
    assert "CatalogSource cs-redhat-operator-index-v4-16" in nfd["fix"]
    assert rows["ImageStream openshift/driver-toolkit"]["verdict"] == "fail"


def test_a_registry_that_never_answers_is_unreachable_within_the_timeout(runner, tmp_path: Path,
                                                                        site: Site) -> None:
    """A port that accepts and then says nothing (a hung proxy, a firewall): the check ends."""
    import socket

    with socket.socket() as silent:
        silent.bind((LOOPBACK, 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or writes
        host = f"{LOOPBACK}:{silent.getsockname()[1]}"
        path = _inventory(tmp_path, site.reg, host=host)
        result = runner.invoke(app, ["check", "mirror", str(path), "--json", "--timeout", "0.5"])
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)["checks"]
    assert {_state(r) for r in rows} == {"unreachable"}
    assert all("timed out" in r["got"] or "no answer within" in r["got"] for r in rows), rows


def test_a_plain_http_token_realm_gets_no_credentials(runner, tmp_path: Path, site: Site) -> None:
    """A registry whose Bearer challenge names an http:// realm: nothing is sent there."""
    import socket

    from tokenserver import TokenServer

    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen(8)
        listener.settimeout(0.2)
        realm = f"http://{LOOPBACK}:{listener.getsockname()[1]}/token"
        fake_realm = TokenServer(realm, make_ca("unused signer"))
        with registry(tmp_path / "http-realm", site.reg.ca, storage=site.storage, token=fake_realm) as reg:
            code, rows, output = _rows(runner, _inventory(tmp_path, reg, password="realm-must-not-see"))
        try:
            listener.accept()[0].close()
            contacted = True
        except TimeoutError:
            contacted = False
    assert code == 1
    assert not contacted
    assert all("is not https://: no credentials sent" in r["got"] for r in rows.values()), rows
    assert "realm-must-not-see" not in output
