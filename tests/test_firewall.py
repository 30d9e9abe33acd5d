"""firewall/*.sh: the rendered firewalld commands, run against firewalld's own offline tool.

firewall-cmd needs a running firewalld (D-Bus), which cannot run here. A FAKE
firewall-cmd forwards each command to the real `firewall-offline-cmd` on a
config directory of the test (`--permanent` dropped: offline changes are
permanent; `--state` and `--reload` succeed), so firewalld itself checks
every service name and port the scripts open. SELinux tools cannot run on
this host either: FAKE `selinuxenabled`, `semanage`, `restorecon` and
`setsebool` record what the scripts ask of them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, inventory_path, require

from upi.cli import app
from upi.facts.firewall import http_port
from upi.inventory import load_inventory

FAKE_FIREWALL_CMD = """#!/bin/sh
# FAKE firewall-cmd: firewalld's offline tool on the test's config dir.
echo "firewall-cmd $*" >> "$FAKE_LOG"
case "$*" in --state|--reload) exit 0 ;; esac
for a in "$@"; do shift; [ "$a" = --permanent ] || set -- "$@" "$a"; done
exec firewall-offline-cmd --system-config "$FAKE_FIREWALLD_DIR" "$@" 2>>"$FAKE_LOG.err"
"""
FAKE_RECORDER = """#!/bin/sh
# FAKE {name}: records its arguments.
echo "{name} $*" >> "$FAKE_LOG"
"""


def _fakes(bin_dir: Path, selinux: bool) -> None:
    bin_dir.mkdir()
    scripts = {"firewall-cmd": FAKE_FIREWALL_CMD}
    if selinux:
        for name in ("semanage", "restorecon", "setsebool", "selinuxenabled"):
            scripts[name] = FAKE_RECORDER.format(name=name)
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def _run(script: Path, tmp_path: Path, selinux: bool = False) -> tuple[Path, list[str]]:
    """Run a rendered script as written with the fakes first on PATH; its firewalld dir and log."""
    offline = require("firewall-offline-cmd")
    bin_dir = tmp_path / f"bin-{script.stem}-{selinux}"
    _fakes(bin_dir, selinux)
    config = tmp_path / f"firewalld-{script.stem}-{selinux}"
    config.mkdir()
    if Path("/etc/firewalld/firewalld.conf").exists():
        shutil.copy("/etc/firewalld/firewalld.conf", config)
    log = tmp_path / f"{script.stem}-{selinux}.log"
    env = {"PATH": f"{bin_dir}:{Path(offline).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
           "FAKE_FIREWALLD_DIR": str(config), "FAKE_LOG": str(log)}
    result = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=180,
                            check=False)
    err = Path(f"{log}.err")
    assert result.returncode == 0, f"{result.stderr}\n{err.read_text() if err.exists() else ''}"
    return config, log.read_text().splitlines()


def _listed(config: Path, *args: str) -> set[str]:
    out = subprocess.run([require("firewall-offline-cmd"), "--system-config", str(config), *args],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return set(out.split())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from typer.testing import CliRunner

    out = {}
    for name in EXAMPLES:
        dest = tmp_path_factory.mktemp(name) / "out"
        result = CliRunner().invoke(app, ["render", str(inventory_path(name)), "-o", str(dest)])
        assert result.exit_code == 0, result.output
        out[name] = dest
    return out


@pytest.mark.parametrize("name", ["dgxpod", "compact"])
def test_provisioner_script_opens_dns_dhcp_tftp_and_the_http_port(
        rendered: dict[str, Path], tmp_path: Path, name: str) -> None:
    inv = load_inventory(inventory_path(name))
    script = rendered[name] / "firewall/provisioner.sh"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    config, _ = _run(script, tmp_path)
    zone = "public"  # the interface has no zone of its own here: the default zone
    assert _listed(config, f"--zone={zone}", "--list-services") >= {"dns", "dhcp", "tftp"}
    assert f"{http_port(inv)}/tcp" in _listed(config, f"--zone={zone}", "--list-ports")


@pytest.mark.parametrize("name", ["dgxpod", "compact"])
def test_load_balancer_script_opens_every_haproxy_frontend(
        rendered: dict[str, Path], tmp_path: Path, name: str) -> None:
    config, _ = _run(rendered[name] / "firewall/load-balancer.sh", tmp_path)
    assert _listed(config, "--list-ports") == {"6443/tcp", "22623/tcp", "80/tcp", "443/tcp"}


def test_selinux_labels_port_and_boolean_are_asked_for_when_selinux_is_on(
        rendered: dict[str, Path], tmp_path: Path) -> None:
    _, prov = _run(rendered["dgxpod"] / "firewall/provisioner.sh", tmp_path, selinux=True)
    assert "semanage fcontext -a -t tftpdir_t /var/lib/tftpboot(/.*)?" in prov
    assert "semanage fcontext -a -t httpd_sys_content_t /var/www/html(/.*)?" in prov
    assert "restorecon -R /var/lib/tftpboot /var/www/html /etc/dnsmasq.d" in prov
    assert "semanage port -a -t http_port_t -p tcp 8080" in prov  # not for 80 or 443
    _, lb = _run(rendered["dgxpod"] / "firewall/load-balancer.sh", tmp_path, selinux=True)
    assert "setsebool -P haproxy_connect_any on" in lb


def test_without_firewalld_the_script_says_what_to_open_and_succeeds(
        rendered: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "firewall-cmd").write_text("#!/bin/sh\nexit 252\n")  # FAKE: "not running"
    (bin_dir / "firewall-cmd").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = subprocess.run([str(rendered["dgxpod"] / "firewall/provisioner.sh")], env=env,
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert "firewalld is not running: open these yourself: dns dhcp tftp 8080/tcp" in result.stderr
