"""upi as an admin installs it: a wheel from the checkout, `upi` on PATH, units that call it.

The rendered approver units (csr/) and crontab call the upi that rendered
them, or the inventory's `csr_approver.upi`; never a path upi only hopes for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, inventory_path

from upi import __version__
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
    (wheel,) = wheels.glob("upi-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "upi = upi.cli:main" in zf.read(entry).decode()
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
