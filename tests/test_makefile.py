"""The Makefile's set-up targets, run by the real make: what `make demo` installs, what
`make system-deps` looks for, and the one apt-get line it prints when not root.

The machine is varied, not the Makefile: a PATH without gcc, a pkg-config that knows no
libvirt, a python3 without ensurepip or Python.h (Debian's python3 without python3-venv or
python3-dev), an `id` that is not root. tests/fresh/debian12.sh runs the same targets on a
real fresh Debian 12 (docs/testing.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, require

# What a Debian machine without the build prerequisites still has.
TOOLS = ("sed", "paste", "cat", "touch")
NOT_ROOT = "#!/bin/sh\necho 1000\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile with what its set-up targets read (pyproject.toml), nothing built."""
    dest = tmp_path / "checkout"
    dest.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def machine(tmp_path: Path, *, gcc: bool = True, libvirt: bool = True, ensurepip: bool = True,
            headers: bool = True) -> dict[str, str]:
    """An environment whose PATH holds only the tools the set-up checks look at, each present or not."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in TOOLS:
        (bin_ / tool).symlink_to(require(tool))
    if gcc:
        (bin_ / "gcc").symlink_to(require("gcc"))
    _script(bin_ / "pkg-config", f"#!/bin/sh\nexit {0 if libvirt else 1}\n")  # `--exists libvirt`
    _script(bin_ / "id", NOT_ROOT)
    # python3 as Debian ships it apart: ensurepip in python3-venv, Python.h in python3-dev.
    checks = "" if ensurepip else 'case "$*" in *ensurepip*) exit 1;; esac\n'
    checks += "" if headers else 'case "$*" in *INCLUDEPY*) echo /usr/include/nowhere; exit 0;; esac\n'
    _script(bin_ / "python3", f"#!/bin/sh\n{checks}exec {sys.executable} \"$@\"\n")
    return {"PATH": str(bin_), "HOME": str(tmp_path), "LANG": "C.UTF-8"}


def make(checkout: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    python = Path(env["PATH"]) / "python3"
    return subprocess.run([require("make"), "-s", "-C", str(checkout), f"PYTHON={python}", *args],
                          env=env, capture_output=True, text=True, timeout=60)


def apt_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if "apt-get install" in line]


@pytest.mark.parametrize(("lacks", "missing"), [
    ({"gcc": False}, "program gcc"),
    ({"libvirt": False}, "pkg-config libvirt (libvirt-dev)"),
    ({"headers": False}, "/usr/include/nowhere/Python.h"),
    ({"ensurepip": False}, "-m venv (ensurepip)"),
])
def test_system_deps_not_root_names_a_missing_build_prerequisite_and_stops(
        checkout: Path, tmp_path: Path, lacks: dict[str, bool], missing: str) -> None:
    result = make(checkout, machine(tmp_path, **lacks), "system-deps")
    assert result.returncode != 0, result.stdout
    assert f"  {missing}" in result.stdout.replace(str(tmp_path / "bin" / "python3") + " ", "")
    (line,) = apt_lines(result.stdout)  # one line to run, with every package make test needs
    packages = line.split("--no-install-recommends ")[1].split()
    for package in ("python3-venv", "python3-dev", "gcc", "pkg-config", "libvirt-dev", "dnsmasq-base",
                    "haproxy", "qemu-system-x86", "nginx", "firewalld", "netbase", "kubernetes-client"):
        assert package in packages, line


def test_debians_kubectl_is_asked_for_only_where_no_kubectl_is_installed(checkout: Path,
                                                                          tmp_path: Path) -> None:
    # kubernetes-client conflicts with the kubectl package of Kubernetes' own repository.
    env = machine(tmp_path, gcc=False)
    _script(Path(env["PATH"]) / "kubectl", "#!/bin/sh\nexit 0\n")
    (line,) = apt_lines(make(checkout, env, "system-deps").stdout)
    assert "kubernetes-client" not in line.split()


def test_make_test_not_root_prints_one_apt_get_line_only(checkout: Path, tmp_path: Path) -> None:
    # The venv's own check (build-deps) must not print a second, shorter line.
    result = make(checkout, machine(tmp_path, gcc=False, libvirt=False), "test")
    assert result.returncode != 0
    assert len(apt_lines(result.stdout + result.stderr)) == 1
    assert not (checkout / ".venv").exists()


def test_make_demo_not_root_without_venv_prints_the_python3_venv_line(checkout: Path,
                                                                      tmp_path: Path) -> None:
    result = make(checkout, machine(tmp_path, gcc=False, libvirt=False, headers=False, ensurepip=False),
                  "demo")
    assert result.returncode != 0
    # make demo needs no compiler: only python3 -m venv is missing for it.
    assert apt_lines(result.stdout) == ["apt-get install -y --no-install-recommends python3-venv"]
    assert "gcc" not in result.stdout and not (checkout / ".venv").exists()


def test_make_demo_installs_upi_alone_and_make_test_then_adds_the_extras(checkout: Path,
                                                                         tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    demo = make(checkout, env, "-n", "demo")
    assert demo.returncode == 0, demo.stderr
    installs = [line for line in demo.stdout.splitlines() if "pip install" in line]
    assert installs == [".venv/bin/pip install -q --upgrade pip", ".venv/bin/pip install -q -e ."]
    # After make demo (its stamp newer than pyproject.toml), make test upgrades the same venv.
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").touch()
    (checkout / ".venv" / ".base").touch()
    again = make(checkout, env, "-n", "demo")
    assert "pip install" not in again.stdout
    venv = make(checkout, env, "-n", "venv")
    assert ".venv/bin/pip install -q -e '.[dev,libvirt]'" in venv.stdout.splitlines()
