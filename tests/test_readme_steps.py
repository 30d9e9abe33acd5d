"""README's "The install, step by step", run literally: each `upi` line as written, in order.

The commands come from README.md itself (a line changed there is a line changed here), run
with the current directory holding `inventories/dgxpod.yaml` and `~` a home whose
Downloads/ holds the RHCOS files. They run inside a network namespace that is the site:
its `eno1` carries the provisioner's, the load balancer's and the bootstrap's addresses
from the inventory, so nothing in any command line is rewritten. What answers there:

- real: dnsmasq and HAProxy, started and reloaded by the site's "service manager" (the
  inventory's `reload_command`, a script that (re)starts them on what `upi push` wrote);
  nginx serving `http_root` on `http_base_url`'s address and port; libvirt's test driver
  as the hypervisor;
- fakes: the FAKE openshift-install (tests/fakes), the machine config server behind the
  real HAProxy (tests/wait_support.FakeMcs on the bootstrap's address), the Kubernetes API
  (tests/fake_apiserver for the install, tests/fake_gpu for `upi gpu`), the DGXs' BMCs (the
  AMI fake and the real sushy-tools emulator).

The lab's inventory differs from README's example only in where the site's files live
(under the lab, not /etc and /var), the BMC sections, `gpus:` counts, the RHCOS file names
the FAKE installer's stream vouches for, and the hypervisor URI (the test driver).
Overridden in-process, and only that: the metal helper's poll (10 s in production).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import realnginx
import yaml
from bootvms_support import node_uri, require_libvirt, shut_off
from conftest import ROOT, require, require_root
from fake_apiserver import FakeApiServer
from fake_gpu import FakeGpuCluster
from gpu_support import sim_nodes
from pxe_harness import Lab
from redfish_support import AmiFake, Emulator, fake_system, make_tls, write_credentials
from test_images import NAMES, OLD, fake_bytes
from typer.testing import CliRunner
from wait_support import FakeMcs, cluster_ca, script

import upi.wait.metal as metal
from upi.cli import app
from upi.facts import vm_specs
from upi.inventory import load_inventory

pytestmark = pytest.mark.usefixtures("fake_openshift_install")

DOMAIN = "dgxpod.nvidia.com"
UUID = "7b0c3f1e-2d4a-4c55-9a6e-0f1d2c3b4a51"
# The inventory's addresses this site answers on (provisioner, load balancer, bootstrap).
PROVISIONER, LB, BOOTSTRAP = "10.33.3.18", "10.33.3.54", "10.33.3.53"
MASTERS = ("10.33.3.50", "10.33.3.51", "10.33.3.52")
GRUB = {"worker-0": "grub.cfg-01-b8-ce-f6-10-33-44", "worker-1": "grub.cfg-01-b8-ce-f6-10-33-46"}


def readme_steps() -> list[str]:
    """The `upi ...` lines of README's step-by-step block, comments dropped, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The install, step by step", 1)[1]
    lines = []
    for line in _indented_block(section).splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["upi"]:
            lines.append(line)
    return lines


def _indented_block(section: str) -> str:
    """The first 4-space-indented block after the heading."""
    out: list[str] = []
    for line in section.splitlines()[1:]:
        if line.startswith("    "):
            out.append(line[4:])
        elif out and line.strip():
            break
    return "\n".join(out)


SERVICE = """#!/bin/sh
# The site's service manager, for `upi push`'s reloads: (re)start dnsmasq or HAProxy on the
# files upi pushed. Only paths differ from a provisioner's: pid and lease files in the lab.
set -eu
lab={lab}
case "$1" in
dnsmasq)
    [ -f "$lab/dnsmasq.pid" ] && kill "$(cat "$lab/dnsmasq.pid")" 2>/dev/null && sleep 0.2 || true
    exec {dnsmasq} --conf-dir={dnsmasq_dir} --pid-file="$lab/dnsmasq.pid" \\
        --dhcp-leasefile="$lab/dnsmasq.leases" ;;
haproxy)
    old=""
    [ -f "$lab/haproxy.pid" ] && old="-sf $(cat "$lab/haproxy.pid")"
    # -n: the rendered `maxconn 20000` needs about 40,000 file descriptors, which a provisioner's
    # systemd gives haproxy.service (hard limit 524288) but this sandbox cannot (hard limit
    # 20000, no CAP_SYS_RESOURCE): the lab caps the connections, the file itself runs as written.
    # shellcheck disable=SC2086
    exec {haproxy} -D -n 9000 -f {haproxy_cfg} -p "$lab/haproxy.pid" $old ;;
esac
echo "unknown service $1" >&2
exit 1
"""


def lab_inventory(home: Path, site: Path, bmcs: dict[str, dict[str, Any]]) -> Path:
    """README's dgxpod.yaml, with the site's paths, BMCs, GPU counts and the FAKE RHCOS names."""
    src = ROOT / "inventories"
    inv_dir = home / "inventories"
    inv_dir.mkdir(parents=True)
    for name in ("pull-secret.json", "id_rsa.pub"):
        (inv_dir / name).write_bytes((src / name).read_bytes())
    (inv_dir / "pull-secret.json").chmod(0o600)
    text = (src / "dgxpod.yaml").read_text()
    for key, old in OLD.items():
        text = text.replace(old, NAMES[key])
    doc = yaml.safe_load(text)
    service = site / "service"
    prov, lb = doc["provisioner"], doc["load_balancer"]
    prov.update(tftp_root=f"{site}/var/lib/tftpboot", http_root=f"{site}/var/www/html",
                dnsmasq_dir=f"{site}/etc/dnsmasq.d", dnsmasq_log=f"{site}/log/dnsmasq-upi.log",
                http_access_log=f"{site}/log/access.log",
                ssh={"local": True, "reload_command": [str(service), "dnsmasq"]})
    lb.update(config_path=f"{site}/etc/haproxy/haproxy.cfg",
              ssh={"local": True, "reload_command": [str(service), "haproxy"]})
    for node in doc["nodes"]:
        if node["name"] in bmcs:
            node.update(gpus=8, bmc=bmcs[node["name"]])
    path = inv_dir / "dgxpod.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    inv = load_inventory(path, check_files=False)
    doc["hypervisor"]["uri"] = node_uri(site, *(shut_off(_xml(s)) for s in vm_specs(inv)), name="hv")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    service.write_text(SERVICE.format(
        lab=site, dnsmasq=require("dnsmasq"), haproxy=require("haproxy"),
        dnsmasq_dir=prov["dnsmasq_dir"], haproxy_cfg=lb["config_path"]))
    service.chmod(0o755)
    return path


def _xml(spec: Any) -> str:
    from upi.render import domain_xml

    return domain_xml(spec)


@pytest.fixture
def site_lab(tmp_path: Path) -> Iterator[tuple[Lab, Lab]]:
    """The provisioner (also the load balancer), and the control plane on the same link: HAProxy
    binds every address of its host, so the machine config server answers from a host of its own
    carrying the bootstrap's and the masters' addresses (the masters serve it once the bootstrap
    is retired)."""
    require_root("a network namespace carrying the inventory's addresses")
    for program in ("dnsmasq", "haproxy", "nginx", "grub-mkimage"):
        require(program)
    require_libvirt()
    with Lab(tmp_path / "lab", "eno1", f"{PROVISIONER}/24") as lab, \
            Lab(tmp_path / "bootstrap", "ens3", f"{BOOTSTRAP}/24") as node:
        lab.ip("addr", "add", f"{LB}/24", "dev", "eno1")
        for address in MASTERS:
            node.ip("addr", "add", f"{address}/24", "dev", "ens3")
        lab.ip("link", "add", "to-bootstrap", "type", "veth", "peer", "name", "to-site", "netns", node.ns)
        lab.ip("link", "set", "to-bootstrap", "master", "eno1", "up")
        node.ip("link", "set", "to-site", "master", "ens3", "up")
        yield lab, node


@dataclass
class Peers:
    """What answers the site besides upi's own files: BMCs, the API fakes, the web server."""

    ami: AmiFake
    emulator: Emulator
    kube: FakeApiServer


def _start_peers(lab: Lab, tmp_path: Path, site: Path, stack: contextlib.ExitStack) -> Peers:
    tls = make_tls(tmp_path / "tls")
    ami: AmiFake = lab.inside(lambda: AmiFake(tls))
    stack.callback(ami.stop)
    (tmp_path / "emulator").mkdir()
    emulator: Emulator = lab.inside(lambda: Emulator(tmp_path / "emulator",
                                                     [fake_system(UUID, "dgx-b", power="Off")], tls))
    stack.callback(emulator.stop)
    kube: FakeApiServer = lab.inside(lambda: FakeApiServer(tmp_path / "kube").start())
    stack.callback(kube.stop)
    bmc = {"verify_tls": str(tls.ca_file), "timeout": 5.0}
    lab_inventory(tmp_path / "home", site, {
        "worker-0": {"address": ami.url, "credentials_file": str(write_credentials(tmp_path / "ami.yaml")),
                     **bmc},
        "worker-1": {"address": emulator.url,
                     "credentials_file": str(write_credentials(tmp_path / "emu.yaml")), **bmc}})
    # The site's web server (not upi's to render): nginx on http_base_url's address and port.
    conf = realnginx.write_conf(tmp_path / "nginx", site / "var/www/html", host=PROVISIONER, port=8080,
                                http=f"    access_log {site}/log/access.log combined;")
    lab.spawn(realnginx.argv(conf), tmp_path / "nginx.out")  # stopped with the lab
    for pid in ("dnsmasq.pid", "haproxy.pid"):  # started by `upi push` through the site's service
        stack.callback(_kill, site / pid)
    return Peers(ami, emulator, kube)


def _site_dirs(lab: Lab, home: Path) -> Path:
    # dnsmasq serves the TFTP root and writes its log as `nobody`: the site lives where it can.
    site = lab.public / "site"
    for sub in ("var/lib/tftpboot", "var/www/html", "etc/dnsmasq.d", "etc/haproxy", "log"):
        (site / sub).mkdir(parents=True)
    (site / "log").chmod(0o1777)
    downloads = home / "Downloads"
    downloads.mkdir(parents=True)
    for name in NAMES.values():
        (downloads / name).write_bytes(fake_bytes(name))
    return site


def test_readmes_step_list_runs_as_written_from_inventory_to_gpus_verified(
        site_lab: tuple[Lab, Lab], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = readme_steps()
    verbs = [shlex.split(s)[1] for s in steps]
    assert verbs == ["validate", "render", "images", "ignition", "push", "check", "boot-vms", "wait",
                     "gpu"], steps
    lab, control_plane = site_lab
    home = tmp_path / "home"
    site = _site_dirs(lab, home)
    monkeypatch.chdir(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(metal, "POLL", 0.1)
    script(monkeypatch, tmp_path, bootstrap_complete=["ok"], install_complete=["slow"])
    runner = CliRunner()
    outputs: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        peers = _start_peers(lab, tmp_path, site, stack)
        stop = threading.Event()
        stack.callback(stop.set)
        for line in steps:
            argv = [os.path.expanduser(w) for w in shlex.split(line, comments=True)][1:]
            verb = argv[0] if argv[0] != "check" else f"check {argv[1]}"
            if verb == "wait":
                mcs = control_plane.inside(lambda: _mcs(tmp_path, home / "assets"))
                stack.callback(mcs.stop)
                lab.inside(lambda: _play_cluster(peers, home, stop))
            if verb == "gpu":  # the cluster's API for the GPU step: the GPU fake (tests/fake_gpu.py)
                gpu = lab.inside(lambda: FakeGpuCluster(tmp_path / "gpu", sim_nodes()).start())
                stack.callback(gpu.stop)
                _point_kubeconfig(home / "assets", gpu.kubeconfig)
            result = lab.inside(lambda argv=argv: runner.invoke(app, argv))
            outputs[verb] = result.output
            assert result.exit_code == 0, f"`{line}` exited {result.exit_code}:\n{result.output}"
            assert "Traceback" not in result.output
            if verb == "ignition":  # the installer's kubeconfig names the site's API: here the fake
                _point_kubeconfig(home / "assets", peers.kube.kubeconfig)
        emulated = lab.inside(lambda: peers.emulator.get(f"/redfish/v1/Systems/{UUID}"))

    out = home / "out/dgxpod"
    # push put the rendered files where the services read them, and they served every check.
    assert "FAIL" not in outputs["check all"], outputs["check all"]
    # wait booted each DGX once over Redfish, flipped both PXE files to disk, retired the bootstrap.
    assert peers.ami.state.resets == ["On"]
    assert emulated["PowerState"] == "On" and emulated["Boot"]["BootSourceOverrideTarget"] == "Pxe"
    for node in ("worker-0", "worker-1"):
        text = (site / "var/lib/tftpboot" / GRUB[node]).read_text()
        assert "coreos.inst" not in text, text
    assert "server bootstrap" not in (site / "etc/haproxy/haproxy.cfg").read_text()
    assert "server bootstrap" not in (out / "haproxy/haproxy.cfg").read_text()
    assert set(json.loads((out / "installed.json").read_text())["nodes"]) == {"worker-0", "worker-1"}
    wait = outputs["wait"]
    assert wait.count("booting worker-0, worker-1 over Redfish") == 1, wait
    assert re.search(r"worker-[01], worker-[01] joined: PXE file boots its disk from now on|"
                     r"worker-1 joined: PXE file boots its disk", wait), wait
    assert outputs["gpu"].rstrip().endswith("GPUs verified on every GPU node"), outputs["gpu"]


def _kill(pidfile: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


def _point_kubeconfig(assets: Path, source: Path) -> None:
    target = assets / "auth" / "kubeconfig"
    target.write_bytes(source.read_bytes())
    target.chmod(stat.S_IRUSR | stat.S_IWUSR)


def _mcs(tmp_path: Path, assets: Path) -> FakeMcs:
    """The machine config server on the control plane's addresses: reached through the real HAProxy."""
    return FakeMcs(tmp_path / "mcs", cluster_ca(assets), DOMAIN, host="0.0.0.0", port=22623)  # noqa: S104


def _play_cluster(peers: Peers, home: Path, stop: threading.Event) -> None:
    """The cluster's side: a DGX its BMC powered on installs and registers its Node; the
    installer's install-complete ends once both DGXs are recorded installed."""
    release = Path(os.environ["FAKE_OPENSHIFT_INSTALL_RELEASE"])
    installed = home / "out/dgxpod/installed.json"
    powered = {"worker-0": lambda: bool(peers.ami.state.resets),
               "worker-1": lambda: peers.emulator.get(f"/redfish/v1/Systems/{UUID}")["PowerState"] == "On"}

    def run() -> None:
        end = time.monotonic() + 120
        left = dict(powered)
        while not stop.is_set() and time.monotonic() < end:
            for name, is_on in list(left.items()):
                if is_on():
                    peers.kube.add_node(name, ready=True)
                    del left[name]
            text = installed.read_text() if installed.exists() else ""
            if not left and all(re.search(rf'"{n}"', text) for n in powered):
                release.touch()
            stop.wait(0.1)

    threading.Thread(target=run, daemon=True).start()
