from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, inventory_path, require

from upi.cli import app


@pytest.mark.parametrize("name", EXAMPLES)
def test_render_writes_every_file_of_the_layout(runner, tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path(name)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    for path in ("install-config.yaml", "install-config.yaml.orig", "hosts", "dnsmasq/dns.conf",
                 "dnsmasq/dhcp-pxe.conf", "haproxy/haproxy.cfg", "vms/virt-install.sh",
                 "csr/upi-approve-csr.service", "csr/upi-approve-csr.timer", "csr/crontab"):
        assert path in manifest["files"], path
        assert (out / path).is_file()


def test_install_config_holding_the_pull_secret_is_private(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    for name in ("install-config.yaml", "install-config.yaml.orig"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "hosts").stat().st_mode) == 0o644


def test_unknown_machines_fall_back_to_their_own_disk(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["render", str(inventory_path("compact")), "-o", str(out)])
    pxelinux = (out / "tftp" / "pxelinux.cfg" / "default").read_text()
    assert "LOCALBOOT 0" in pxelinux and "KERNEL" not in pxelinux
    grub = (out / "tftp" / "grub.cfg").read_text()
    assert grub.rstrip().endswith("exit") and "linux" not in grub.split("\n", 2)[-1]


def test_retire_bootstrap_leaves_it_out_of_haproxy_and_says_so(runner, tmp_path: Path) -> None:
    haproxy = require("haproxy")
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out),
                                 "--retire-bootstrap"])
    assert result.exit_code == 0, result.output
    cfg = (out / "haproxy" / "haproxy.cfg").read_text()
    assert "10.33.3.53" not in cfg and "server bootstrap" not in cfg
    assert "server master-0 10.33.3.50:6443" in cfg
    assert json.loads((out / "manifest.json").read_text())["bootstrap_retired"] is True
    subprocess.run([haproxy, "-c", "-f", str(out / "haproxy" / "haproxy.cfg")], check=True,
                   capture_output=True)
    again = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert again.exit_code == 0
    assert ("upi: warning: the last render of " + str(out) + " had the bootstrap retired (upi wait); "
            "this one puts bootstrap back into HAProxy's API pools: pass --retire-bootstrap "
            "to keep it out") in again.stderr
    assert "server bootstrap 10.33.3.53:6443" in (out / "haproxy" / "haproxy.cfg").read_text()
