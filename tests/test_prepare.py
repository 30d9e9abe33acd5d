"""provisioner/prepare.sh: shellcheck, then run as written against FAKE RHEL 9 tools, twice.

dnf, rpm, systemctl, nmcli and semanage cannot act on this Debian host: the
FAKEs of tests/fakes/rhel.py (each names the upstream behaviour it follows)
record every command and keep the host's state, so the script's own checks
(rpm -q, systemctl is-enabled, nmcli -g, semanage port -l) see what its
earlier changes did. The web server's files go under PREPARE_ROOT, a scratch
root holding RHEL 9's stock httpd.conf (its Listen and include lines).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import EXAMPLES, INVENTORIES, inventory_path, require

from upi.cli import app

FAKE = Path(__file__).resolve().parent / "fakes" / "rhel.py"
TOOLS = ("dnf", "rpm", "systemctl", "nmcli", "semanage", "selinuxenabled")
# The lines of RHEL 9's /etc/httpd/conf/httpd.conf (httpd package, from Fedora's
# rpms/httpd httpd.conf) that matter here: one Listen, the conf.d include, the docroot.
RHEL_HTTPD_CONF = """\
ServerRoot "/etc/httpd"
#Listen 12.34.56.78:80
Listen 80
Include conf.modules.d/*.conf
User apache
Group apache
DocumentRoot "/var/www/html"
<Directory "/var/www/html">
    Options Indexes FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
IncludeOptional conf.d/*.conf
"""
# Commands that change the host; a second run must record none of them.
CHANGING = {("dnf", "install"), ("systemctl", "enable"), ("systemctl", "start"),
            ("systemctl", "restart"), ("nmcli", "connection add"), ("nmcli", "connection modify"),
            ("nmcli", "connection up"), ("semanage", "port -a"), ("semanage", "port -m")}


@dataclass
class Host:
    """A FAKE RHEL 9 provisioner: tools on `bin`, state in `state`, files under `root`."""

    bin: Path
    state: Path
    root: Path
    log: Path

    def run(self, script: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
        """Run the script with bash exactly as written; its output and the commands it ran."""
        self.log.write_text("")
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "PREPARE_ROOT": str(self.root),
               "FAKE_RHEL_STATE": str(self.state), "FAKE_RHEL_LOG": str(self.log)}
        done = subprocess.run(["bash", str(script), *argv], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        return done, [shlex.split(line) for line in self.log.read_text().splitlines()]

    def data(self) -> dict:
        return json.loads((self.state / "state.json").read_text())

    def nmcli(self, *args: str) -> str:
        env = {**os.environ, "FAKE_RHEL_STATE": str(self.state), "FAKE_RHEL_LOG": os.devnull}
        return subprocess.run([str(self.bin / "nmcli"), *args], env=env, capture_output=True,
                              text=True, check=True).stdout.strip()


def _host(tmp_path: Path, nic: str, address: str, *, devices: dict | None = None) -> Host:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        # -S: the FAKE needs only the standard library; skipping site makes each call faster.
        (bin_dir / tool).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S '
                                    f'{shlex.quote(str(FAKE))} {tool} "$@"\n')
        (bin_dir / tool).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    # A fresh RHEL 9 server: nothing of ours installed, SELinux on, the NIC up with its address.
    nm = {"profiles": {nic: {"connection.type": "802-3-ethernet", "connection.id": nic,
                             "connection.interface-name": nic, "ipv4.method": "manual",
                             "ipv4.addresses": address}},
          "devices": {nic: {"type": "ethernet", "connection": nic},
                      "lo": {"type": "loopback", "connection": "lo"}, **(devices or {})}}
    (state / "state.json").write_text(json.dumps(
        {"installed": ["NetworkManager"], "units": {}, "semanage": [], "selinux": True, "nm": nm}))
    root = tmp_path / "root"
    (root / "etc/httpd/conf").mkdir(parents=True)
    (root / "etc/httpd/conf/httpd.conf").write_text(RHEL_HTTPD_CONF)
    return Host(bin_dir, state, root, tmp_path / "commands.log")


def _render(runner, inventory: Path, out: Path) -> Path:
    result = runner.invoke(app, ["render", str(inventory), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out / "provisioner" / "prepare.sh"


def _variant(tmp_path: Path, base: str, **replace: str) -> Path:
    """inventories/BASE.yaml with text replaced (each old text must be there), beside its files."""
    work = tmp_path / "inv"
    shutil.copytree(INVENTORIES, work, dirs_exist_ok=True)
    text = (work / f"{base}.yaml").read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = work / f"variant-{base}.yaml"
    path.write_text(text)
    return path


def _changing(commands: list[list[str]]) -> list[list[str]]:
    return [c for c in commands if any((c[0], " ".join(c[1:1 + n])) in CHANGING for n in (1, 2))]


def _shellcheck(script: Path) -> None:
    done = subprocess.run([require("shellcheck"), "--shell=bash", str(script)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", EXAMPLES)
def test_prepare_script_passes_shellcheck_and_is_listed_0755(runner, tmp_path: Path, name: str) -> None:
    script = _render(runner, inventory_path(name), tmp_path / "out")
    _shellcheck(script)
    assert script.stat().st_mode & 0o777 == 0o755
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["files"]["provisioner/prepare.sh"]["mode"] == "0755"
    assert script.read_text().startswith("#!/bin/bash\n")


@dataclass(frozen=True)
class Expect:
    """What prepare.sh must do on the provisioner of one example inventory (read off the YAML)."""

    nic: str
    address: str
    gateway: str
    dns: str
    bridge: str
    port: int
    label: str | None  # semanage -a / -m for the HTTP port, None: already http_port_t
    haproxy: bool  # the load balancer is this host
    uefi_vm: bool


EXPECT = {
    "dgxpod": Expect("eno1", "10.33.3.18/24", "10.33.3.1", "10.33.0.10", "br0", 8080, "-m",
                     haproxy=False, uefi_vm=False),
    "compact": Expect("enp1s0", "192.168.122.10/24", "192.168.122.1", "192.168.122.1", "virbr1",
                      8080, "-m", haproxy=True, uefi_vm=True),
    "legacy-4.3": Expect("eno1", "10.33.3.18/24", "10.33.3.1", "10.33.0.10", "virbr0", 80, None,
                         haproxy=False, uefi_vm=False),
    "racks": Expect("eno1", "10.40.0.10/24", "10.40.0.1", "10.40.255.53", "br0", 8080, "-m",
                    haproxy=False, uefi_vm=False),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_prepare_script_sets_up_the_provisioner_then_changes_nothing(runner, tmp_path: Path,
                                                                     name: str) -> None:
    want = EXPECT[name]
    script = _render(runner, inventory_path(name), tmp_path / "out")
    host = _host(tmp_path, want.nic, want.address)

    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    installs = [c for c in commands if c[:2] == ["dnf", "install"]]
    assert len(installs) == 1, installs
    packages = set(installs[0][3:])
    assert {"dnsmasq", "httpd", "policycoreutils-python-utils", "firewalld", "libvirt", "qemu-kvm",
            "virt-install"} <= packages
    assert ("haproxy" in packages) is want.haproxy
    assert ("edk2-ovmf" in packages) is want.uefi_vm
    enabled = {c[-1]: "--now" in c for c in commands if c[:2] == ["systemctl", "enable"]}
    assert enabled == {"firewalld.service": True, "httpd.service": True, "dnsmasq.service": False,
                       "virtqemud.socket": True, "virtstoraged.socket": True,
                       **({"haproxy.service": True} if want.haproxy else {})}
    labels = [c for c in commands if c[:2] == ["semanage", "port"] and c[2] != "-l"]
    if want.label is None:
        assert labels == []
    else:
        assert labels == [["semanage", "port", want.label, "-t", "http_port_t", "-p", "tcp", str(want.port)]]

    # The web server: one Listen, in upi's drop-in, on the port of http_base_url.
    drop_in = (host.root / "etc/httpd/conf.d/upi.conf").read_text()
    assert f"\nListen {want.port}\n" in drop_in
    assert 'DocumentRoot "/var/www/html"' in drop_in
    main = (host.root / "etc/httpd/conf/httpd.conf").read_text()
    assert [ln for ln in main.splitlines() if ln.lstrip().startswith("Listen")] == []
    assert "#Listen 80" in main and "IncludeOptional conf.d/*.conf" in main

    # The bridge took over the NIC and its address, in one activation.
    adds = [c for c in commands if c[:3] == ["nmcli", "connection", "add"]]
    bridge_add, port_add = adds
    assert bridge_add[bridge_add.index("con-name") + 1] == want.bridge
    assert bridge_add[bridge_add.index("ipv4.addresses") + 1] == want.address
    assert bridge_add[bridge_add.index("ipv4.gateway") + 1] == want.gateway
    assert bridge_add[bridge_add.index("ipv4.dns") + 1] == want.dns
    assert port_add[port_add.index("ifname") + 1] == want.nic
    assert port_add[port_add.index("master") + 1] == want.bridge
    assert [c for c in commands if c[:3] == ["nmcli", "connection", "up"]] == [
        ["nmcli", "connection", "up", want.bridge]]
    assert host.nmcli("-g", "IP4.ADDRESS[1]", "device", "show", want.bridge) == want.address
    port_profile = f"{want.bridge}-port-{want.nic}"
    assert host.nmcli("-g", "GENERAL.CONNECTION", "device", "show", want.nic) == port_profile
    assert host.nmcli("-g", "connection.autoconnect", "connection", "show", want.nic) == "no"
    # dnsmasq serves provisioner.interface, now a bridge port: the script says what to change.
    assert (f"warning: dnsmasq serves {want.nic} (provisioner.interface), now a port of {want.bridge}: "
            f"set provisioner.interface: {want.bridge}") in done.stderr

    files = {p: p.read_bytes() for p in host.root.rglob("*") if p.is_file()}
    state = host.data()
    again, commands = host.run(script)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _changing(commands) == []
    assert again.stdout.splitlines() == ["prepare.sh: done; next: firewall/provisioner.sh, then upi push"]
    assert {p: p.read_bytes() for p in host.root.rglob("*") if p.is_file()} == files
    assert host.data() == state


@pytest.mark.parametrize(("port", "label"), [(8081, "-a"), (8443, None), (10005, "-m")])
def test_prepare_labels_the_http_port_by_what_selinux_already_says(runner, tmp_path: Path, port: int,
                                                                   label: str | None) -> None:
    # 8081: no type has it (-a); 8443: already http_port_t; 10005: in http_cache_port_t's range (-m).
    inv = _variant(tmp_path, "dgxpod", **{"http://10.33.3.18:8080": f"http://10.33.3.18:{port}"})
    script = _render(runner, inv, tmp_path / "out")
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    labels = [c[2] for c in commands if c[:2] == ["semanage", "port"] and c[2] != "-l"]
    assert labels == ([label] if label else [])
    assert f"\nListen {port}\n" in (host.root / "etc/httpd/conf.d/upi.conf").read_text()
    again, commands = host.run(script)
    assert again.returncode == 0 and _changing(commands) == []


def test_prepare_leaves_a_bridge_networkmanager_does_not_own_alone(runner, tmp_path: Path) -> None:
    # legacy-4.3 names virbr0: on a host where libvirt's default network made it, it is not taken over.
    script = _render(runner, inventory_path("legacy-4.3"), tmp_path / "out")
    host = _host(tmp_path, "eno1", "10.33.3.18/24",
                 devices={"virbr0": {"type": "bridge", "connection": "virbr0"}})
    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c for c in commands if c[:2] == ["nmcli", "connection"] and c[2] != "show"] == []
    assert "virbr0 exists and is not a NetworkManager profile: left alone" in done.stdout
    assert host.nmcli("-g", "GENERAL.CONNECTION", "device", "show", "eno1") == "eno1"


def test_prepare_corrects_a_bridge_with_another_address(runner, tmp_path: Path) -> None:
    script = _render(runner, inventory_path("dgxpod"), tmp_path / "out")
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    done, _ = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    data = host.data()
    data["nm"]["profiles"]["br0"]["ipv4.addresses"] = "10.33.3.99/24"
    (host.state / "state.json").write_text(json.dumps(data))
    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c[:4] for c in _changing(commands)] == [["nmcli", "connection", "modify", "br0"],
                                                     ["nmcli", "connection", "up", "br0"]]
    assert host.nmcli("-g", "IP4.ADDRESS[1]", "device", "show", "br0") == "10.33.3.18/24"


def test_prepare_without_upstream_dns_sets_no_dns_server_and_says_so(runner, tmp_path: Path) -> None:
    inv = _variant(tmp_path, "dgxpod", **{"  upstream_dns: [10.33.0.10]\n": ""})
    script = _render(runner, inv, tmp_path / "out")
    _shellcheck(script)
    assert "network.upstream_dns is empty: the bridge gets no DNS server" in script.read_text()
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    bridge_add = next(c for c in commands if c[:3] == ["nmcli", "connection", "add"])
    assert "ipv4.dns" not in bridge_add
    again, commands = host.run(script)
    assert again.returncode == 0 and _changing(commands) == []


def test_prepare_leaves_remote_vms_and_load_balancer_to_their_hosts(runner, tmp_path: Path) -> None:
    # The VMs on another KVM host: no libvirt here and no bridge; HAProxy is on 10.33.3.54.
    inv = _variant(tmp_path, "dgxpod", **{"uri: qemu:///system": "uri: qemu+ssh://root@kvm1/system"})
    script = _render(runner, inv, tmp_path / "out")
    _shellcheck(script)
    text = script.read_text()
    assert "# Not here: the VMs on kvm1: install libvirt" in text
    assert "# Not here: HAProxy runs on the load balancer 10.33.3.54" in text
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    done, commands = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    install = next(c for c in commands if c[:2] == ["dnf", "install"])
    assert not {"libvirt", "qemu-kvm", "virt-install", "haproxy"} & set(install)
    assert [c for c in commands if c[0] == "nmcli"] == []


def test_prepare_with_the_bridge_as_provisioner_interface_takes_the_nic_from_its_argument(
        runner, tmp_path: Path) -> None:
    # dnsmasq serves the bridge (provisioner.interface: br0); the NIC is this host's to name.
    inv = _variant(tmp_path, "dgxpod", **{"interface: eno1": "interface: br0"})
    script = _render(runner, inv, tmp_path / "out")
    _shellcheck(script)
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    refused, commands = host.run(script)
    assert refused.returncode == 2
    assert ("provisioner.interface is the bridge br0, which does not exist yet: name the NIC it takes "
            "over (the one that has 10.33.3.18 now)") in refused.stderr
    assert _changing(commands) == [] and not (host.root / "etc/httpd/conf.d").exists()

    done, commands = host.run(script, "eno1")
    assert done.returncode == 0, done.stdout + done.stderr
    port_add = [c for c in commands if c[:3] == ["nmcli", "connection", "add"]][1]
    assert port_add[port_add.index("ifname") + 1] == "eno1"
    assert host.nmcli("-g", "IP4.ADDRESS[1]", "device", "show", "br0") == "10.33.3.18/24"
    assert "warning" not in done.stderr
    # Once the bridge exists, a run without the NIC changes nothing.
    again, commands = host.run(script)
    assert again.returncode == 0 and _changing(commands) == [], again.stderr


@pytest.mark.parametrize(("replace", "haproxy"), [
    # Another address, no ssh sections: HAProxy is on its own host.
    ({}, False),
    # upi runs on both (ssh local): one host, whatever the addresses.
    ({"  ip: 10.33.3.54\n": "  ip: 10.33.3.54\n  ssh: {local: true}\n",
      "  tftp_root: /var/lib/tftpboot\n": "  tftp_root: /var/lib/tftpboot\n  ssh: {local: true}\n"}, True),
    # Reached over SSH at the provisioner's address: the same host.
    ({"  ip: 10.33.3.54\n": "  ip: 10.33.3.54\n  ssh: {host: 10.33.3.18}\n"}, True),
], ids=["own-host", "both-local", "ssh-to-provisioner"])
def test_prepare_plan_puts_haproxy_where_upi_push_puts_its_config(tmp_path: Path, replace: dict[str, str],
                                                                   haproxy: bool) -> None:
    from upi.facts.provisioner import prepare_plan
    from upi.inventory import load_inventory

    plan = prepare_plan(load_inventory(_variant(tmp_path, "dgxpod", **replace)))
    assert ("haproxy" in plan.packages) is haproxy
    assert any(s.unit == "haproxy.service" for s in plan.services) is haproxy
    assert any(line.startswith("HAProxy runs on the load balancer") for line in plan.elsewhere) is not haproxy


def test_prepare_plan_counts_a_hypervisor_uri_naming_the_provisioner_as_here(tmp_path: Path) -> None:
    from upi.facts.provisioner import prepare_plan
    from upi.inventory import load_inventory

    inv = _variant(tmp_path, "dgxpod", **{"uri: qemu:///system": "uri: qemu+ssh://root@10.33.3.18/system"})
    plan = prepare_plan(load_inventory(inv))
    assert {"libvirt", "qemu-kvm", "virt-install"} <= set(plan.packages)
    assert plan.bridge is not None and plan.bridge.name == "br0" and plan.bridge.port == "eno1"


def test_prepare_serves_http_root_below_the_path_of_http_base_url(runner, tmp_path: Path) -> None:
    # Boot files fetch http_base_url + /ignition/...: with a path, httpd maps it to http_root.
    inv = _variant(tmp_path, "dgxpod", **{"http://10.33.3.18:8080": "http://10.33.3.18:8080/ocp"})
    script = _render(runner, inv, tmp_path / "out")
    _shellcheck(script)
    host = _host(tmp_path, "eno1", "10.33.3.18/24")
    done, _ = host.run(script)
    assert done.returncode == 0, done.stdout + done.stderr
    drop_in = (host.root / "etc/httpd/conf.d/upi.conf").read_text()
    assert '\n    Alias "/ocp" "/var/www/html"\n' in drop_in and "\nListen 8080\n" in drop_in
    again, commands = host.run(script)
    assert again.returncode == 0 and _changing(commands) == []
