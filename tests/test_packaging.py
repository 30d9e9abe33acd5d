"""upi as an admin installs it: a wheel from the checkout, `upi` on PATH, units that call it.

The rendered approver units (csr/) and crontab call the upi that rendered
them, or the inventory's `csr_approver.upi`; never a path upi only hopes for.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT, inventory_path

from upi import DISTRIBUTION, __version__
from upi.cli import app

UNITS = ("csr/upi-approve-csr.service", "csr/upi-approve-csr-once.service")


def _calls(out: Path) -> list[str]:
    """The upi command each unit and the crontab run (what precedes ` approve-csr`)."""
    lines = [ln.removeprefix("ExecStart=") for u in UNITS for ln in (out / u).read_text().splitlines()
             if ln.startswith("ExecStart=")]
    lines += [ln.removeprefix("* * * * * ") for ln in (out / "csr/crontab").read_text().splitlines()
              if ln.startswith("* * * * * ")]
    assert len(lines) == 3
    return [ln.split(" approve-csr ")[0] for ln in lines]


@pytest.mark.slow
def test_the_wheel_installs_a_upi_whose_units_call_it(tmp_path: Path) -> None:
    # pip builds the wheel as pipx would (hatchling in an isolated build env); installed
    # into a target dir without dependencies, it runs on this venv's (PYTHONPATH first).
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=300, capture_output=True)
    (wheel,) = wheels.glob("upi_openshift_dgx-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "upi = upi.cli:main" in zf.read(entry).decode()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert f"\nName: {DISTRIBUTION}\n" in meta and "\nProvides-Extra: libvirt\n" in meta
    assert "upi/templates/csr/upi-approve-csr.service.j2" in names  # templates travel with the package
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, timeout=300, capture_output=True)
    script = target / "bin" / "upi"
    env = {**os.environ, "PYTHONPATH": str(target), "PATH": f"{target / 'bin'}:/usr/bin:/bin"}
    version = subprocess.run(["upi", "--version"], env=env, capture_output=True, text=True, timeout=60,
                             cwd=tmp_path, check=True)
    assert version.stdout == f"upi {__version__}\n"
    out = tmp_path / "out"
    subprocess.run(["upi", "render", str(inventory_path("dgxpod")), "-o", str(out)], env=env,
                   capture_output=True, text=True, timeout=120, cwd=tmp_path, check=True)
    assert _calls(out) == [str(script)] * 3
    where = subprocess.run([str(script), "version", "--json"], env=env, capture_output=True, text=True,
                           timeout=60, check=True).stdout
    assert str(target) in where or str(script) in where


def test_python_m_upi_writes_units_that_run_the_same_interpreter(tmp_path: Path) -> None:
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "upi", "render", str(inventory_path("dgxpod")), "-o", str(out)],
                   capture_output=True, text=True, timeout=120, cwd=tmp_path, check=True)
    assert _calls(out) == [f"{sys.executable} -m upi"] * 3


def test_the_inventory_names_the_upi_of_another_host(runner, example_dir: Path, tmp_path: Path) -> None:
    inventory = example_dir / "dgxpod.yaml"
    inventory.write_text(inventory.read_text() + "csr_approver:\n  upi: /opt/upi/bin/upi\n")
    result = runner.invoke(app, ["render", str(inventory), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert _calls(tmp_path / "out") == ["/opt/upi/bin/upi"] * 3


@pytest.mark.parametrize("value", ["/opt/my upi/bin/upi", "upi", "/usr/bin/upi%h", "/opt/../bin/upi"])
def test_a_upi_path_no_unit_can_hold_is_refused(runner, example_dir: Path, value: str) -> None:
    inventory = example_dir / "dgxpod.yaml"
    text = inventory.read_text()
    inventory.write_text(text + f'csr_approver:\n  upi: "{value}"\n')
    line = text.count("\n") + 2
    result = runner.invoke(app, ["validate", str(inventory)])
    assert result.exit_code == 2
    assert f"{inventory}:{line}: csr_approver.upi: " in result.output
    assert "is not an absolute program path" in result.output


def test_the_distribution_is_named_apart_from_pypis_upi(runner) -> None:
    # PyPI's project `upi` is an unrelated one: `pip install 'upi[libvirt]'` installs it.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "upi-openshift-dgx"
    assert project["scripts"] == {"upi": "upi.cli:main"}  # the command stays `upi`
    assert metadata.version(DISTRIBUTION) == __version__  # this venv's editable install
    doc = json.loads(runner.invoke(app, ["version", "--json"]).stdout)
    assert doc["distribution"] == DISTRIBUTION


# `pip install upi`, `pip install 'upi[libvirt]'`, `pipx install upi`, `pip install -U upi-...`:
# each would fetch a PyPI project, never this checkout.
_FROM_PYPI = re.compile(r"""\bpipx?3?\s+install\s+(?:-\S+\s+)*['"]?upi\b""")
_SKIP = {".git", ".venv", "out", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
         ".hypothesis", "build", "dist"}


def _text_files(top: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in _SKIP and not d.endswith(".egg-info")]
        found += [Path(folder) / f for f in files]
    return found


def test_no_message_or_doc_installs_upi_from_pypi() -> None:
    this = Path(__file__).resolve()
    hits = []
    for path in _text_files(ROOT):
        if path.resolve() == this:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
                 for m in _FROM_PYPI.finditer(text)]
    assert not hits, "install from the checkout (pipx inject, the venv's pip -e .), not PyPI:\n" + \
        "\n".join(hits)


@pytest.mark.parametrize("line", ["pip install 'upi[libvirt]'", "pip install upi", "pipx install upi",
                                  "python3 -m pip install -U \"upi[libvirt]\"",
                                  "pip3 install upi-openshift-dgx"])
def test_the_scan_finds_each_form_of_an_install_from_pypi(line: str) -> None:
    assert _FROM_PYPI.search(line)


@pytest.mark.parametrize("line", ["pip install -e '.[libvirt]'", "pipx install --force '.[libvirt]'",
                                  "pipx inject upi-openshift-dgx libvirt-python",
                                  "pip install '.[dev,libvirt]'"])
def test_the_scan_lets_installs_from_the_checkout_pass(line: str) -> None:
    assert not _FROM_PYPI.search(line)
