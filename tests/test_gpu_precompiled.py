"""`gpu.driver: precompiled | build | auto`: the ClusterPolicy's driver fields, and the tag pre-flight
against a real registry (Debian's docker-registry, TLS with a test CA, htpasswd)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import make_ca
from conftest import INVENTORIES
from mirror_support import mirror_inventory
from realregistry import RunningRegistry, registry
from redfish_support import inventory_with_bmcs

from upi.gpu.objects import cluster_policy
from upi.gpu.precompiled import NodeKernel, driver_mode, missing_tags, os_tag, tag_for
from upi.inventory import load_inventory
from upi.inventory.gpu import settings

KERNEL = "5.14.0-427.26.1.el9_4.x86_64"
OTHER_KERNEL = "5.14.0-427.13.1.el9_4.x86_64"
REPO = "nvidia/gpu-driver-rhel9"
EXAMPLE = {"apiVersion": "nvidia.com/v1", "spec": {"driver": {"enabled": True}, "toolkit": {"enabled": True}}}


def _dgxpod(tmp_path: Path, gpu: str = "", secure_boot: str = "") -> Path:
    text = (INVENTORIES / "dgxpod.yaml").read_text()
    if secure_boot:
        text = text.replace("gpu: true}", f"gpu: true, secure_boot: {secure_boot}}}", 1)
    for name in ("pull-secret.json", "id_rsa.pub"):
        src = INVENTORIES / name
        if src.exists():
            (tmp_path / name).write_text(src.read_text())
    path = tmp_path / "dgxpod.yaml"
    path.write_text(text + gpu)
    return path


def test_auto_is_build_without_secure_boot_and_precompiled_with_it(tmp_path: Path) -> None:
    plain = load_inventory(_dgxpod(tmp_path), check_files=False)
    assert settings(plain).driver == "auto" and driver_mode(plain) == "build"
    assert "usePrecompiled" not in cluster_policy(plain, EXAMPLE)["spec"]["driver"]
    secure = load_inventory(_dgxpod(tmp_path, secure_boot="true"), check_files=False)
    assert driver_mode(secure) == "precompiled"
    # auto on the node: what its BMC reports decides.
    with_bmc = inventory_with_bmcs(_dgxpod(tmp_path, secure_boot="auto"), {"worker-0": {
        "address": "https://127.0.0.1:1", "credentials_file": "bmc-admin.yaml"}})
    asked = load_inventory(with_bmc, check_files=False)
    gpu_node = "worker-0"
    assert driver_mode(asked, {gpu_node: False}) == "build"
    assert driver_mode(asked, {gpu_node: True}) == "precompiled"


def test_precompiled_sets_the_cluster_policy_driver_fields(tmp_path: Path) -> None:
    gpu = ("gpu:\n  driver: precompiled\n  precompiled:\n"
           "    repository: quay.io/acme\n    image: drv\n    version: 570\n")
    inv = load_inventory(_dgxpod(tmp_path, gpu), check_files=False)
    driver = cluster_policy(inv, EXAMPLE)["spec"]["driver"]
    assert driver == {"enabled": True, "usePrecompiled": True, "repository": "quay.io/acme", "image": "drv",
                      "version": "570"}
    assert os_tag(inv) == "rhcos4.16"
    assert os_tag(inv, {"feature.node.kubernetes.io/system-os_release.ID": "rhcos",
                        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "4.16"}) == "rhcos4.16"
    assert tag_for(settings(inv).precompiled, KERNEL, "rhcos4.16") == f"570-{KERNEL}-rhcos4.16"


def test_build_wins_over_secure_boot_and_overrides_win_over_precompiled(tmp_path: Path) -> None:
    build = load_inventory(_dgxpod(tmp_path, "gpu:\n  driver: build\n", secure_boot="true"),
                           check_files=False)
    assert driver_mode(build) == "build"
    over = load_inventory(_dgxpod(tmp_path, "gpu:\n  driver: precompiled\n  cluster_policy:\n"
                                            "    driver.version: '535'\n"), check_files=False)
    assert cluster_policy(over, EXAMPLE)["spec"]["driver"]["version"] == "535"


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegistry]:
    ca = make_ca("upi test precompiled CA")
    with registry(tmp_path_factory.mktemp("precompiled-registry"), ca) as running:
        running.push(REPO, f"580-{KERNEL}-rhcos4.16", fmt="oci")
        running.push(REPO, f"580-{OTHER_KERNEL}-rhcos4.16", fmt="docker")
        running.push(REPO, f"570-{KERNEL}-rhcos4.16", fmt="oci")
        yield running


def _cluster_site(tmp_path: Path, reg: RunningRegistry, branch: str) -> Path:
    """dgxpod (GPU counts as the fake cluster has them) pulling precompiled drivers from `reg`."""
    import base64
    import json

    from gpu_support import gpu_inventory

    auth = base64.b64encode(f"{reg.user}:{reg.password}".encode()).decode()
    (tmp_path / "pull-secret.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
    (tmp_path / "registry-ca.pem").write_bytes(reg.ca.cert_pem)
    (tmp_path / "id_rsa.pub").write_text((INVENTORIES / "id_rsa.pub").read_text())
    path = gpu_inventory(tmp_path, f"gpu:\n  driver: precompiled\n  precompiled: "
                                   f"{{repository: '{reg.host}/nvidia', version: '{branch}'}}\n")
    path.write_text(path.read_text().replace(
        "  pull_secret_file: pull-secret.json\n",
        "  pull_secret_file: pull-secret.json\n  additional_trust_bundle_file: registry-ca.pem\n"))
    return path


@pytest.mark.parametrize("branch", ["580", "535"])
def test_upi_gpu_preflight_asks_the_registry_for_each_gpu_nodes_kernel(
        runner, tmp_path: Path, reg: RunningRegistry, branch: str) -> None:
    from fake_gpu import KERNEL as NODE_KERNEL
    from gpu_support import clean_cluster, gpu_args

    from upi.cli import app

    assert NODE_KERNEL == KERNEL
    path = _cluster_site(tmp_path, reg, branch)
    cluster_gen = clean_cluster(tmp_path)
    cluster = next(cluster_gen)
    try:
        result = runner.invoke(app, gpu_args(path, cluster, "--dry-run"))
    finally:
        cluster_gen.close()
    said = " ".join(result.output.split())
    if branch == "580":
        assert result.exit_code == 0, result.output
        assert f"ok precompiled driver images: worker-0: {KERNEL}, worker-1: {KERNEL}" in said
    else:
        assert result.exit_code == 1, result.output
        assert (f"worker-0 (kernel {KERNEL}): no precompiled driver {reg.host}/{REPO}:535-{KERNEL}-rhcos4.16;"
                f" nearest tags: ") in said
        assert "worker-1 (kernel" in said and reg.password not in result.output
    assert "Traceback" not in result.output


def _site(tmp_path: Path, reg: RunningRegistry, **kw: object) -> Path:
    path = mirror_inventory(tmp_path, reg, **kw)  # type: ignore[arg-type]
    text = path.read_text().replace("gpu:\n", f"gpu:\n  driver: precompiled\n  precompiled: "
                                              f"{{repository: '{reg.host}/nvidia'}}\n", 1)
    path.write_text(text)
    return path


def test_a_present_tag_passes(tmp_path: Path, reg: RunningRegistry) -> None:
    inv = load_inventory(_site(tmp_path, reg))
    assert missing_tags(inv, [NodeKernel("worker-0", KERNEL, "rhcos4.16")]) == []


def test_a_missing_tag_names_node_kernel_and_the_nearest_tags(tmp_path: Path, reg: RunningRegistry) -> None:
    inv = load_inventory(_site(tmp_path, reg))
    kernel = "5.14.0-427.28.1.el9_4.x86_64"
    (problem,) = missing_tags(inv, [NodeKernel("worker-0", KERNEL, "rhcos4.16"),
                                    NodeKernel("worker-1", kernel, "rhcos4.16")])
    assert problem.startswith(f"worker-1 (kernel {kernel}): no precompiled driver "
                              f"{reg.host}/{REPO}:580-{kernel}-rhcos4.16; nearest tags: ")
    near = problem.split("nearest tags: ")[1].split(", ")
    # Same branch and OS only, the likest first.
    assert set(near) == {f"580-{KERNEL}-rhcos4.16", f"580-{OTHER_KERNEL}-rhcos4.16"}


def test_wrong_credentials_are_reported_as_unauthorised(tmp_path: Path, reg: RunningRegistry) -> None:
    inv = load_inventory(_site(tmp_path, reg, password="not-the-password"))
    (problem,) = missing_tags(inv, [NodeKernel("worker-0", KERNEL, "rhcos4.16")])
    assert problem.startswith("worker-0 (kernel ") and "unauthorised, HTTP 401" in problem
    assert "not-the-password" not in problem


def test_an_unknown_ca_is_refused_naming_the_trust_bundle(tmp_path: Path, reg: RunningRegistry) -> None:
    other = make_ca("some other CA")
    inv = load_inventory(_site(tmp_path, reg, ca_pem=other.cert_pem))
    (problem,) = missing_tags(inv, [NodeKernel("worker-0", KERNEL, "rhcos4.16")])
    assert f"{reg.host}/{REPO}" in problem and "TLS certificate verify failed" in problem
    assert "trust bundle" in problem
