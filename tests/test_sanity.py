"""Sanity an admin expects: each a warning or an error (exit 2, file:line: field) with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from upi.cli import app
from upi.inventory.sanity import rhcos_version_of


def _edit(example_dir: Path, old: str, new: str, name: str = "dgxpod") -> Path:
    path = example_dir / f"{name}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def _render(runner, inventory: Path, tmp_path: Path):
    return runner.invoke(app, ["render", str(inventory), "-o", str(tmp_path / "out")])


def test_vm_below_the_documented_minimum_is_warned_about(runner, example_dir: Path,
                                                         tmp_path: Path) -> None:
    inv = _edit(example_dir, 'ip: 10.33.3.50}', 'ip: 10.33.3.50, vm: {vcpus: 2, memory_mib: 8192}}')
    result = _render(runner, inv, tmp_path)
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.stderr.splitlines() if "master-0" in ln)
    assert "vcpus 2 < 4" in line and "memory_mib 8192 < 16384" in line and "disk_gib" not in line
    assert "documented minimum for a master" in line
    # The defaults are the minimums: the example itself has no such warning.
    clean = _render(runner, example_dir / "compact.yaml", tmp_path / "c")
    assert "documented minimum" not in clean.stderr


@pytest.mark.parametrize(("kernel", "warned"), [
    ("rhcos/rhcos-4.15.9-x86_64-live-kernel-x86_64", "RHCOS for 4.15"),
    ("rhcos/rhcos-417.94.202410090804-0-live-kernel-x86_64", "RHCOS for 4.17"),
    ("https://m.example.com/rhcos-416.94.202405291527-0-live-kernel-x86_64", None),
    ("rhcos/rhcos-9.6.20250402-0-live-kernel.x86_64", None),  # names no OpenShift version
])
def test_rhcos_file_names_disagreeing_with_the_version(runner, example_dir: Path, tmp_path: Path,
                                                       kernel: str, warned: str | None) -> None:
    inv = _edit(example_dir, "rhcos/rhcos-4.16.3-x86_64-live-kernel-x86_64", kernel)
    result = _render(runner, inv, tmp_path)
    assert result.exit_code == 0, result.output
    if warned:
        assert f"rhcos.kernel is {warned} but cluster.openshift_version is 4.16" in result.stderr
    else:
        assert "rhcos.kernel" not in result.stderr
    assert "rhcos.initramfs" not in result.stderr


def test_rhcos_version_of_file_names() -> None:
    assert rhcos_version_of("rhcos-4.3.8-x86_64-installer-kernel-x86_64") == (4, 3)
    assert rhcos_version_of("x/rhcos-410.84.202205191234-0-live-kernel-x86_64") == (4, 10)
    assert rhcos_version_of("rhcos-49.84.202110081407-0-live-rootfs.x86_64.img") == (4, 9)
    assert rhcos_version_of("rhcos-9.6.20250402-0-live-kernel.x86_64") is None
    assert rhcos_version_of("vmlinuz") is None


def test_libvirt_nat_bridge_is_warned_about_naming_the_metal_nodes(runner, example_dir: Path,
                                                                   tmp_path: Path) -> None:
    inv = _edit(example_dir, "bridge: br0", "bridge: virbr0")
    result = _render(runner, inv, tmp_path)
    assert result.exit_code == 0, result.output
    assert "hypervisor.bridge is virbr0, libvirt's NAT network" in result.stderr
    assert "worker-0, worker-1" in result.stderr


@pytest.mark.parametrize(("url", "port_use"), [
    ("http://10.33.3.54", "ingress HTTP"),
    ("https://10.33.3.54", "ingress HTTPS"),
    ("http://10.33.3.54:6443", "the API"),
    ("http://10.33.3.54:22623", "the machine-config server"),
])
def test_http_server_on_the_load_balancers_ip_and_port_is_an_error(
        runner, example_dir: Path, tmp_path: Path, url: str, port_use: str) -> None:
    inv = _edit(example_dir, "http_base_url: http://10.33.3.18:8080", f"http_base_url: {url}")
    result = _render(runner, inv, tmp_path)
    assert result.exit_code == 2
    assert f"{inv}:19: provisioner.http_base_url:" in result.stderr
    assert f"where the load balancer serves {port_use}" in result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_http_server_beside_the_load_balancer_on_its_own_port_is_fine(
        runner, example_dir: Path, tmp_path: Path) -> None:
    inv = _edit(example_dir, "http_base_url: http://10.33.3.18:8080", "http_base_url: http://10.33.3.54:8080")
    assert _render(runner, inv, tmp_path).exit_code == 0


@pytest.mark.parametrize("written", ["4.20", "4.10", "4.16", "4.3", "4.90"])
def test_an_unquoted_version_is_quoted_as_written_never_guessed(runner, example_dir: Path,
                                                                 tmp_path: Path, written: str) -> None:
    inv = _edit(example_dir, 'openshift_version: "4.16"', f"openshift_version: {written}")
    result = runner.invoke(app, ["validate", str(inv)])
    assert result.exit_code == 2
    message = result.stderr
    assert f"{inv}:6: cluster.openshift_version:" in message
    assert f'openshift_version: "{written}"' in message
    dropped = str(float(written)) if "." in written else None
    if dropped and dropped != written:  # 4.20 -> 4.2: the dropped form is never suggested
        assert f'"{dropped}"' not in message
    assert message.count("cluster.openshift_version") == 1
    assert "Traceback" not in result.output


def test_a_quoted_or_block_version_is_fine(runner, example_dir: Path) -> None:
    inv = _edit(example_dir, 'openshift_version: "4.16"', "openshift_version: '4.16'")
    assert runner.invoke(app, ["validate", str(inv)]).exit_code == 0
