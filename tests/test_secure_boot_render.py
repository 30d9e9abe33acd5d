"""Secure Boot nodes are handed shim + the signed GRUB; every other node keeps its files.

The per-node switch is `secure_boot:` (true | false | auto). The qemu proof that
the rendered layout boots under enforcing firmware is tests/test_pxe_secure_boot.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import require_path

from upi.cli import app
from upi.facts.boot import secure_boot_nodes
from upi.inventory import load_inventory

SHIM = "/usr/lib/shim/shimx64.efi.signed"
GRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
WORKER_0 = '{name: worker-0, role: worker, mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44, gpu: true'


def _with(example_dir: Path, extra: str, line: str = WORKER_0, name: str = "legacy-4.3") -> Path:
    """The example inventory with `extra` keys added to one node's flow mapping."""
    path = example_dir / f"{name}.yaml"
    text = path.read_text()
    assert line in text
    path.write_text(text.replace(line, f"{line}, {extra}", 1))
    return path


def _render(runner, inventory: Path, out: Path) -> dict[str, bytes]:
    result = runner.invoke(app, ["render", str(inventory), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("on", True), ("off", False),
                                                 ("false", False), ("auto", "auto")])
def test_secure_boot_reads_yaml_words(example_dir: Path, value: str, expected: object) -> None:
    inv = load_inventory(_with(example_dir, f"secure_boot: {value}, bmc: {{address: "
                               "'https://10.33.4.44', credentials_file: bmc.json}"), check_files=False)
    assert inv.nodes[4].secure_boot_mode == expected


def test_secure_boot_defaults_to_auto_with_a_bmc_else_off(example_dir: Path) -> None:
    inv = load_inventory(_with(example_dir, "bmc: {address: 'https://10.33.4.44', "
                               "credentials_file: bmc.json}"), check_files=False)
    modes = {n.name: n.secure_boot_mode for n in inv.nodes}
    assert modes["worker-0"] == "auto"
    assert modes["worker-1"] is False
    assert modes["master-0"] is False


def test_secure_boot_node_is_handed_shim(runner, example_dir: Path, tmp_path: Path) -> None:
    shim = require_path(SHIM, "Debian's signed shim, package shim-signed")
    grub = require_path(GRUB, "Debian's signed GRUB, package grub-efi-amd64-signed")
    plain = _render(runner, example_dir / "legacy-4.3.yaml", tmp_path / "plain")
    inventory = _with(example_dir, "secure_boot: true")
    staged = runner.invoke(app, ["images", str(inventory), "-o", str(tmp_path / "secure"),
                                 "--shim", str(shim), "--grub", str(grub)])
    assert staged.exit_code == 0, staged.output
    secure = _render(runner, inventory, tmp_path / "secure")
    conf = secure["dnsmasq/dhcp-pxe.conf"].decode()
    assert "dhcp-host=b8:ce:f6:10:33:44,set:upi-secureboot,10.33.3.44,worker-0,infinite\n" in conf
    assert "dhcp-host=b8:ce:f6:10:33:46,10.33.3.46,worker-1,infinite\n" in conf
    assert "dhcp-boot=tag:efi-x86_64,tag:upi-secureboot,shimx64.efi\n" in conf
    assert "dhcp-boot=tag:efi-x86_64,tag:!upi-secureboot,grubx64.efi\n" in conf
    assert "dhcp-boot=tag:efi-x86_64,grubx64.efi\n" not in conf
    # The per-MAC file GRUB reads is the same; a signed GRUB with prefix /grub is sent on to it.
    assert secure["tftp/grub.cfg-01-b8-ce-f6-10-33-44"] == plain["tftp/grub.cfg-01-b8-ce-f6-10-33-44"]
    dispatch = secure["tftp/grub/grub.cfg"].decode()
    assert 'configfile "/grub.cfg-01-$m1-$m2-$m3-$m4-$m5-$m6"' in dispatch
    changed = {p for p in plain if plain[p] != secure.get(p)} | (set(secure) - set(plain))
    assert changed == {"dnsmasq/dhcp-pxe.conf", "tftp/grub/grub.cfg", "manifest.json",
                       "tftp/shimx64.efi", "tftp/grubx64.efi"}


def test_auto_is_off_until_the_bmc_reports_on(example_dir: Path) -> None:
    inv = load_inventory(_with(example_dir, "bmc: {address: 'https://10.33.4.44', "
                               "credentials_file: bmc.json}"), check_files=False)
    assert secure_boot_nodes(inv) == set()
    assert secure_boot_nodes(inv, {"worker-0": True, "worker-1": True}) == {"worker-0"}
    assert secure_boot_nodes(inv, {"worker-0": None}) == set()


@pytest.mark.parametrize(("line", "extra", "message"), [
    ('{name: master-0, role: master, mac: "52:54:00:21:03:50", ip: 10.33.3.50', "secure_boot: true",
     "nodes[1].secure_boot: master-0 is a VM: secure_boot is for bare-metal nodes"),
    (WORKER_0, "secure_boot: on, firmware: bios",
     "nodes[4].secure_boot: worker-0 boots with BIOS: Secure Boot needs firmware: uefi"),
    (WORKER_0, "secure_boot: auto",
     "nodes[4].secure_boot: worker-0 has no bmc section to ask: write secure_boot: true or false"),
    (WORKER_0, "secure_boot: maybe", "nodes[4].secure_boot"),
])
def test_secure_boot_where_it_cannot_be(runner, example_dir: Path, tmp_path: Path, line: str,
                                        extra: str, message: str) -> None:
    inventory = _with(example_dir, extra, line=line)
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "legacy-4.3.yaml:" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()
