"""`upi gpu` asks the DGX BMCs about Secure Boot before the operators go in (the AMI fake, a fake
of the DGX BMC, and the fake GPU cluster): the unsigned NVIDIA driver cannot load under it."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_support import clean_cluster, gpu_args, gpu_inventory
from redfish_support import PASSWORD, AmiFake, Tls, inventory_with_bmcs, write_credentials

from upi.cli import app


@pytest.fixture
def cluster(tmp_path: Path):
    yield from clean_cluster(tmp_path)


def _metal_gpu_inventory(tmp_path: Path, tls: Tls, url: str) -> Path:
    write_credentials(tmp_path / "bmc-admin.yaml")
    section = {"address": url, "credentials_file": "bmc-admin.yaml", "verify_tls": str(tls.ca_file),
               "timeout": 5.0}
    return inventory_with_bmcs(gpu_inventory(tmp_path), {"worker-0": section})


@pytest.mark.parametrize("secure_boot", [True, False])
def test_secure_boot_on_with_a_built_driver_is_warned_before_the_operators(
        runner, tmp_path: Path, tls: Tls, ami: AmiFake, cluster, secure_boot: bool) -> None:
    ami.state.secure_boot = secure_boot
    inv = _metal_gpu_inventory(tmp_path, tls, ami.url)
    inv.write_text(inv.read_text() + "gpu:\n  driver: build\n")
    result = runner.invoke(app, gpu_args(inv, cluster))
    said = " ".join(result.output.split())
    warned = "worker-0: Secure Boot is on, but the NVIDIA driver is built on the node"
    assert (warned in said) is secure_boot, result.output
    assert PASSWORD not in result.output and "Traceback" not in result.output
    # A warning, not a stop: the fake cluster loads the driver either way, so the run goes on.
    assert result.exit_code == 0, result.output + cluster.dump()
    assert ami.state.resets == []  # asking about Secure Boot never powers anything


def test_secure_boot_reported_on_turns_auto_into_precompiled_before_the_preflight(
        runner, tmp_path: Path, tls: Tls, ami: AmiFake, cluster) -> None:
    """gpu.driver auto: the BMC's report decides, and the precompiled tag pre-flight then runs
    (here against a registry address nothing listens on: the check fails naming it)."""
    ami.state.secure_boot = True
    inv = _metal_gpu_inventory(tmp_path, tls, ami.url)
    inv.write_text(inv.read_text() + "gpu:\n  precompiled: {repository: '127.0.0.1:1/nvidia'}\n")
    (tmp_path / "pull-secret.json").write_text('{"auths": {}}')
    result = runner.invoke(app, gpu_args(inv, cluster, "--dry-run"))
    said = " ".join(result.output.split())
    assert "worker-0: Secure Boot on; NVIDIA driver: precompiled (gpu.driver: auto)" in said, result.output
    failed = "FAIL precompiled driver images: 127.0.0.1:1/nvidia/gpu-driver-rhel9: Connection refused"
    assert failed in said, result.output
    assert result.exit_code == 1, result.output
    assert "built on the node" not in said and ami.state.resets == []


def test_an_unreachable_bmc_is_a_warning_naming_the_node(runner, tmp_path: Path, tls: Tls, ami: AmiFake,
                                                         cluster) -> None:
    url = ami.url
    ami.stop()
    inv = _metal_gpu_inventory(tmp_path, tls, url)
    result = runner.invoke(app, gpu_args(inv, cluster))
    said = " ".join(result.output.split())
    assert "worker-0: Secure Boot not checked" in said, result.output
    assert result.exit_code == 0, result.output
