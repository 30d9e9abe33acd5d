"""The real programs that read each rendered file accept it.

dnsmasq --test, haproxy -c, libvirt's test driver (define + start) and
virt-install --dry-run against the test driver (test-harness.md).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from bootvms_support import require_libvirt
from conftest import EXAMPLES, inventory_path, require

from upi.inventory import load_inventory
from upi.render import render_inventory
from upi.writer import write_tree


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name in EXAMPLES:
        target = tmp_path_factory.mktemp("render") / name
        write_tree(target, render_inventory(load_inventory(inventory_path(name))))
        out[name] = target
    return out


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, **kw)  # type: ignore[call-overload]


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("conf", ["dns.conf", "dhcp-pxe.conf"])
def test_dnsmasq_accepts_both_rendered_files(rendered, name: str, conf: str) -> None:
    proc = _run([require("dnsmasq"), "--test", f"--conf-file={rendered[name] / 'dnsmasq' / conf}"])
    assert proc.returncode == 0, proc.stderr
    assert "syntax check OK" in proc.stderr


def _listen_blocks(cfg: str) -> dict[str, list[str]]:
    """listen name -> its server lines (name ip:port flags...)."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in cfg.splitlines():
        if line.startswith("listen "):
            current = line.split()[1]
            blocks[current] = []
        elif current and line.strip().startswith("server "):
            blocks[current].append(line.strip().removeprefix("server "))
    return blocks


@pytest.mark.parametrize("name", EXAMPLES)
def test_haproxy_accepts_the_rendered_config(rendered, name: str) -> None:
    proc = _run([require("haproxy"), "-c", "-f", str(rendered[name] / "haproxy" / "haproxy.cfg")])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", EXAMPLES)
def test_bootstrap_is_a_backup_server_in_both_api_pools(rendered, name: str) -> None:
    blocks = _listen_blocks((rendered[name] / "haproxy" / "haproxy.cfg").read_text())
    for pool in ("api-server-6443", "machine-config-server-22623"):
        bootstrap = [s for s in blocks[pool] if s.startswith("bootstrap ")]
        assert len(bootstrap) == 1 and bootstrap[0].endswith(" backup"), blocks[pool]
        assert sum(1 for s in blocks[pool] if " backup" not in s) == 3
    api = blocks["api-server-6443"]
    assert all("check-ssl" in s and "verify none" in s for s in api)


def _ingress_ips(cfg: str) -> dict[str, set[str]]:
    blocks = _listen_blocks(cfg)
    return {pool: {s.split()[1].rsplit(":", 1)[0] for s in blocks[pool]}
            for pool in ("ingress-router-https-443", "ingress-router-http-80")}


def test_ingress_goes_to_the_masters_in_a_compact_cluster(rendered) -> None:
    masters = {"192.168.122.11", "192.168.122.12", "192.168.122.13"}
    for ips in _ingress_ips((rendered["compact"] / "haproxy" / "haproxy.cfg").read_text()).values():
        assert ips == masters


def test_ingress_goes_to_the_workers_when_there_are_workers(rendered) -> None:
    for ips in _ingress_ips((rendered["dgxpod"] / "haproxy" / "haproxy.cfg").read_text()).values():
        assert ips == {"10.33.3.44", "10.33.3.46"}


def _libvirt() -> ModuleType:
    return require_libvirt()  # type: ignore[no-any-return]


def _vm_xmls() -> list[tuple[str, str]]:
    out = []
    for name in EXAMPLES:
        inv = load_inventory(inventory_path(name))
        out += [(name, n.name) for n in inv.nodes if n.machine_kind.value == "vm"]
    return out


@pytest.mark.parametrize(("name", "vm"), _vm_xmls())
def test_libvirt_test_driver_defines_and_starts_each_vm(rendered, tmp_path: Path, name: str, vm: str) -> None:
    libvirt = _libvirt()
    node = tmp_path / "node.xml"
    node.write_text("<node/>\n")  # a fresh, empty test-driver host for this test only
    conn = libvirt.open(f"test://{node}")
    try:
        # The test driver takes the rendered type='kvm' domain as is: nothing substituted.
        dom = conn.defineXML((rendered[name] / "vms" / f"{vm}.xml").read_text())
        dom.create()
        assert dom.name() == vm
        assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
        dom.destroy()
        dom.undefine()
    finally:
        conn.close()


def _virt_install_commands(script: str) -> list[list[str]]:
    joined = re.sub(r"\\\n", " ", script)
    lines = [ln for ln in joined.splitlines() if ln.startswith("virt-install ")]
    return [shlex.split(ln) for ln in lines]


def _on_test_driver(argv: list[str], exe: str) -> list[str]:
    """The same command against the test driver.

    The test driver's storage is a fixed 100 GiB, smaller than a 120 GiB
    master disk: only for it, the free-space check is off (the real host has room).
    """
    argv = [exe, *argv[1:]]
    argv[argv.index("--connect") + 1] = "test:///default"
    return [*argv, "--check", "disk_size=off"]


def _virt_install_cases() -> list[tuple[str, int]]:
    out = []
    for name in EXAMPLES:
        inv = load_inventory(inventory_path(name))
        n = sum(1 for node in inv.nodes if node.machine_kind.value == "vm")
        out += [(name, i) for i in range(n)]
    return out


@pytest.fixture
def xdg_env(tmp_path: Path) -> dict[str, str]:
    # virt-install logs to ~/.cache/virt-manager: keep it in the test's tmp dir.
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}


@pytest.mark.parametrize(("name", "index"), _virt_install_cases())
def test_virt_install_accepts_each_command_of_the_script(rendered, xdg_env, name: str, index: int) -> None:
    exe = require("virt-install")
    commands = _virt_install_commands((rendered[name] / "vms" / "virt-install.sh").read_text())
    proc = _run([*_on_test_driver(commands[index], exe), "--dry-run"], env=xdg_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Dry run completed successfully" in proc.stdout + proc.stderr


@pytest.mark.parametrize(("name", "vm"), [("dgxpod", "bootstrap"), ("compact", "cp-2")])
def test_a_vm_restarted_after_install_boots_its_disk_not_the_network(rendered, xdg_env, name: str,
                                                                      vm: str) -> None:
    exe = require("virt-install")
    commands = _virt_install_commands((rendered[name] / "vms" / "virt-install.sh").read_text())
    argv = next(c for c in commands if c[c.index("--name") + 1] == vm)
    proc = _run([*_on_test_driver(argv, exe), "--print-xml"], env=xdg_env)
    assert proc.returncode == 0, proc.stderr
    install, final = re.findall(r"<domain .*?</domain>", proc.stdout, re.S)
    assert re.findall(r"<boot dev=\"(\w+)\"", install) == ["network", "hd"]
    assert re.findall(r"<boot dev=\"(\w+)\"", final) == ["hd"]


def test_virt_install_script_is_valid_sh(rendered) -> None:
    for name in EXAMPLES:
        proc = _run(["sh", "-n", str(rendered[name] / "vms" / "virt-install.sh")])
        assert proc.returncode == 0, proc.stderr
