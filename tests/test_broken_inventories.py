"""One broken inventory per rule: `upi validate` exits 2 and names FILE:LINE: field.

Each case edits a copy of an example inventory (line numbers below are those
of the edited file) and expects one exact `FILE:LINE: field.path: message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import inventory_path

from upi.cli import app

W0 = '  - {name: worker-0, role: worker, mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44,'
W0_TAIL = "     install_disk: /dev/nvme0n1, gpu: true}\n  - {name: worker-1"
W1 = ('  - {name: worker-1, role: worker, mac: "b8:ce:f6:10:33:46", ip: 10.33.3.46,\n'
      "     install_disk: /dev/nvme0n1, gpu: true}\n")
M1 = '  - {name: master-1, role: master, mac: "52:54:00:21:03:51", ip: 10.33.3.51}'
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyx1iXxoJ3I8iH2eD3jE1C/H1ZN7xUf0Xc1xEVt3K8m me@host\n"
PRIVATE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
               "-----END OPENSSH PRIVATE KEY-----\n")


@dataclass(frozen=True)
class Case:
    """Replace `old` by `new` (and write `files`), expect `line`, `field`, `fragment`."""

    id: str
    old: str
    new: str
    line: int
    field: str | None
    fragment: str
    base: str = "dgxpod"
    files: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("yaml-syntax", "  gateway: 10.33.3.1", "  gateway: [10.33.3.1", 12, None, "YAML syntax error"),
    Case("duplicate-key", "  gateway: 10.33.3.1\n", "  gateway: 10.33.3.1\n  gateway: 10.33.3.2\n",
         12, "network.gateway", "duplicate key (YAML keeps only the last one)"),
    Case("unknown-key", "  tftp_root:", "  tftp_rot:", 20, "provisioner.tftp_rot",
         "unknown key 'tftp_rot': did you mean 'tftp_root'?"),
    Case("missing-key", "  interface: eno1\n", "", 16, "provisioner.interface", "required key is missing"),
    Case("float-version", '"4.16"', "4.10", 6, "cluster.openshift_version",
         '4.10 must be quoted: written without quotes, YAML reads it as the number 4.1'),
    Case("not-openshift-4", '"4.16"', '"5.1"', 6, "cluster.openshift_version",
         "is not an OpenShift 4 version"),
    Case("cluster-name-uppercase", "  name: dgxpod", "  name: DGXPod", 4, "cluster.name",
         "'DGXPod' is not a DNS label"),
    Case("bad-base-domain", "base_domain: nvidia.com", "base_domain: nvidia..com", 5,
         "cluster.base_domain", "is not a DNS domain name"),
    Case("bad-mac", '"52:54:00:21:03:50"', '"52:54:00:21:03:zz"', 32, "nodes[1].mac",
         "'52:54:00:21:03:zz' is not a MAC address"),
    Case("multicast-mac", '"b8:ce:f6:10:33:44"', '"01:00:5e:10:33:44"', 35, "nodes[4].mac",
         "is a multicast MAC address"),
    Case("duplicate-mac", '"52:54:00:21:03:51"', '"52:54:00:21:03:50"', 33, "nodes[2].mac",
         "52:54:00:21:03:50 is already the MAC of master-0"),
    Case("duplicate-ip", "ip: 10.33.3.51}", "ip: 10.33.3.50}", 33, "nodes[2].ip",
         "10.33.3.50 is already the address of master-0"),
    Case("duplicate-name", "name: master-1,", "name: master-0,", 33, "nodes[2].name",
         "'master-0' is already the name of nodes[1]"),
    Case("bad-node-name", "name: worker-0,", "name: Worker_0,", 35, "nodes[4].name", "is not a DNS label"),
    Case("reserved-node-name", "name: worker-0,", "name: api-int,", 35, "nodes[4].name",
         "'api-int' is a name the cluster's DNS records use"),
    Case("ip-outside-machine-cidr", "ip: 10.33.3.44,", "ip: 10.33.4.44,", 35, "nodes[4].ip",
         "10.33.4.44 is outside machine_cidr 10.33.3.0/24"),
    Case("ip-is-gateway", "ip: 10.33.3.44,", "ip: 10.33.3.1,", 35, "nodes[4].ip",
         "10.33.3.1 is the address of the gateway"),
    Case("ip-is-network-address", "ip: 10.33.3.44,", "ip: 10.33.3.0,", 35, "nodes[4].ip",
         "10.33.3.0 is the network or broadcast address of 10.33.3.0/24"),
    Case("ip-is-broadcast-address", "ip: 10.33.3.44,", "ip: 10.33.3.255,", 35, "nodes[4].ip",
         "10.33.3.255 is the network or broadcast address"),
    Case("ip-is-load-balancer", "ip: 10.33.3.44,", "ip: 10.33.3.54,", 35, "nodes[4].ip",
         "10.33.3.54 is the address of the load balancer"),
    Case("bad-ip", "  ip: 10.33.3.18", "  ip: 10.33.3.318", 17, "provisioner.ip",
         "'10.33.3.318' is not an IPv4 address"),
    Case("no-bootstrap", "name: bootstrap, role: bootstrap", "name: bootstrap, role: worker", 30, "nodes",
         "exactly one bootstrap node is needed; found 0"),
    Case("two-bootstraps", W1, W1 + '  - {name: boot-2, role: bootstrap, mac: "52:54:00:21:03:55", '
         "ip: 10.33.3.55}\n", 30, "nodes", "exactly one bootstrap node is needed; found 2"),
    Case("two-masters", "name: master-2, role: master", "name: master-2, role: worker", 30, "nodes",
         "exactly 3 master nodes are needed; found 2"),
    Case("bad-role", "role: worker, mac: \"b8:ce:f6:10:33:44\"", "role: infra, mac: \"b8:ce:f6:10:33:44\"",
         35, "nodes[4].role", "'infra' is not one of 'bootstrap', 'master' or 'worker'"),
    Case("bad-machine", W0, W0 + " machine: cloud,", 35, "nodes[4].machine",
         "'cloud' is not one of 'vm' or 'metal'"),
    Case("bad-firmware", W0, W0 + " firmware: efi,", 35, "nodes[4].firmware",
         "'efi' is not one of 'bios' or 'uefi'"),
    Case("cluster-overlaps-machine-network", "cluster_network: 10.128.0.0/14",
         "cluster_network: 10.32.0.0/14", 12, "network.cluster_network",
         "10.32.0.0/14 overlaps machine_cidr 10.33.3.0/24"),
    Case("service-overlaps-cluster-network", "service_network: 172.30.0.0/16",
         "service_network: 10.130.0.0/16", 14, "network.service_network",
         "10.130.0.0/16 overlaps cluster_network 10.128.0.0/14"),
    Case("bad-cidr", "machine_cidr: 10.33.3.0/24", "machine_cidr: 10.33.3.0/33", 10, "network.machine_cidr",
         "is not an IPv4 network in CIDR form"),
    Case("host-prefix-below-cluster-prefix", "host_prefix: 23", "host_prefix: 12", 13, "network.host_prefix",
         "/12 must be between the cluster_network prefix /14 and /30"),
    Case("host-prefix-above-30", "host_prefix: 23", "host_prefix: 31", 13, "network.host_prefix",
         "/31 must be between the cluster_network prefix /14 and /30"),
    Case("pod-subnets-too-few-for-the-nodes", "cluster_network: 10.128.0.0/14",
         "cluster_network: 10.128.0.0/22", 13, "network.host_prefix",
         "cluster_network 10.128.0.0/22 cut into /23 pod subnets has room for 2 nodes; "
         "the inventory has 5: widen cluster_network or raise host_prefix"),
    Case("ovn-internal-overlap", "service_network: 172.30.0.0/16", "service_network: 100.64.0.0/16", 14,
         "network.service_network", "100.64.0.0/16 overlaps OVN-Kubernetes' internal 100.64.0.0/16"),
    Case("sdn-on-4.16", "  upstream_dns: [10.33.0.10]\n",
         "  upstream_dns: [10.33.0.10]\n  network_type: OpenShiftSDN\n", 16, "network.network_type",
         "OpenShiftSDN is not supported for new installs of 4.16; use OVNKubernetes"),
    Case("ovn-on-4.3", "  upstream_dns: [10.33.0.10]\n",
         "  upstream_dns: [10.33.0.10]\n  network_type: OVNKubernetes\n", 13, "network.network_type",
         "OVNKubernetes needs OpenShift 4.6 or later (this is 4.3)", base="legacy-4.3"),
    Case("gateway-outside-machine-cidr", "gateway: 10.33.3.1", "gateway: 10.33.4.1", 11, "network.gateway",
         "10.33.4.1 is not a host address of machine_cidr 10.33.3.0/24"),
    Case("upstream-dns-is-provisioner", "upstream_dns: [10.33.0.10]", "upstream_dns: [10.33.3.18]", 15,
         "network.upstream_dns", "must not name the provisioner itself (a DNS loop)"),
    Case("provisioner-outside-machine-cidr", "  ip: 10.33.3.18", "  ip: 10.33.9.18", 17, "provisioner.ip",
         "10.33.9.18 is outside machine_cidr"),
    Case("bad-http-url", "http_base_url: http://10.33.3.18:8080", "http_base_url: ftp://10.33.3.18", 19,
         "provisioner.http_base_url", "is not an http:// or https:// URL"),
    Case("relative-tftp-root", "tftp_root: /var/lib/tftpboot", "tftp_root: tftpboot", 20,
         "provisioner.tftp_root", "'tftpboot' is not an absolute path without spaces"),
    Case("dhcp-range-reversed", "  tftp_root: /var/lib/tftpboot\n",
         "  tftp_root: /var/lib/tftpboot\n  dhcp_range: {start: 10.33.3.200, end: 10.33.3.100}\n", 21,
         "provisioner.dhcp_range", "start 10.33.3.200 is after end 10.33.3.100"),
    Case("dhcp-range-holds-nodes", "  tftp_root: /var/lib/tftpboot\n",
         "  tftp_root: /var/lib/tftpboot\n  dhcp_range: {start: 10.33.3.40, end: 10.33.3.49}\n", 21,
         "provisioner.dhcp_range", "the dynamic range holds node addresses (worker-0, worker-1)"),
    Case("dhcp-range-outside", "  tftp_root: /var/lib/tftpboot\n",
         "  tftp_root: /var/lib/tftpboot\n  dhcp_range: {start: 10.33.4.1, end: 10.33.4.9}\n", 21,
         "provisioner.dhcp_range", "is not inside machine_cidr 10.33.3.0/24"),
    Case("missing-rootfs-on-4.16", "  rootfs: rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img\n", "", 21,
         "rhcos.rootfs", "OpenShift 4.16 boots the live rootfs: name rhcos.rootfs"),
    Case("image-on-4.16", "  rootfs: rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img\n",
         "  rootfs: rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img\n  image: rhcos/metal.raw.gz\n", 25,
         "rhcos.image", "image is for 4.1-4.5"),
    Case("missing-image-on-4.3", "  image: rhcos/rhcos-4.3.8-x86_64-metal.x86_64.raw.gz\n", "", 17,
         "rhcos.image", "OpenShift 4.3 installs a metal image: name rhcos.image", base="legacy-4.3"),
    Case("rootfs-on-4.3", "  image: rhcos/rhcos-4.3.8-x86_64-metal.x86_64.raw.gz\n",
         "  image: rhcos/rhcos-4.3.8-x86_64-metal.x86_64.raw.gz\n  rootfs: rhcos/live-rootfs.img\n", 21,
         "rhcos.rootfs", "has no live rootfs (from 4.6): use image", base="legacy-4.3"),
    Case("missing-pull-secret", "pull_secret_file: pull-secret.json", "pull_secret_file: nope.json", 7,
         "cluster.pull_secret_file", "cannot read nope.json"),
    Case("pull-secret-not-json", "", "", 7, "cluster.pull_secret_file",
         "pull-secret.json is not JSON (line 1)",
         files={"pull-secret.json": "auths: this is not json\n"}),
    Case("pull-secret-without-auths", "", "", 7, "cluster.pull_secret_file",
         'pull-secret.json has no "auths" registry credentials', files={"pull-secret.json": '{"auth": {}}'}),
    Case("ssh-key-invalid", "", "", 8, "cluster.ssh_key_file", "id_rsa.pub is not an OpenSSH public key",
         files={"id_rsa.pub": "ssh-rsa not-base64!!! me@host\n"}),
    Case("ssh-key-is-private", "", "", 8, "cluster.ssh_key_file",
         "id_rsa.pub is a private key: name the .pub file", files={"id_rsa.pub": PRIVATE_KEY}),
    Case("vm-without-hypervisor", "hypervisor:\n  uri: qemu:///system\n  bridge: br0\n", "", 28,
         "nodes[0].machine", "bootstrap is a VM but there is no hypervisor"),
    Case("gpu-worker-with-bios", W0, W0 + " firmware: bios,", 35, "nodes[4].firmware",
         "worker-0 is a DGX (gpu: true): DGX systems network-boot only with UEFI"),
    Case("vm-size-on-metal", W0, W0 + " vm: {vcpus: 8},", 35, "nodes[4].vm",
         "worker-0 is bare metal: vm sizes apply only to VMs"),
    Case("vm-too-small", M1, M1[:-1] + ", vm: {memory_mib: 512}}", 33, "nodes[2].vm.memory_mib",
         "512 is out of range: it must be at least 1024"),
    Case("kernel-arg-with-space", W0, W0 + ' kernel_args: ["ip=dhcp rd.neednet=1"],', 35,
         "nodes[4].kernel_args[0]", "'ip=dhcp rd.neednet=1' must be one argument, no spaces"),
    Case("lb-hostname-is-node-name", "  ip: 10.33.3.54\n", "  ip: 10.33.3.54\n  hostname: master-0\n", 27,
         "load_balancer.hostname", "'master-0' is also a node name"),
    # What openshift-install refuses (tests/test_installer_rules.py holds every variant).
    Case("cluster-name-over-54", "  name: dgxpod", "  name: " + "d" * 55, 4, "cluster.name",
         "must be no more than 54 characters"),
    Case("fips-with-ed25519", "  ssh_key_file: id_rsa.pub\n", "  ssh_key_file: id_rsa.pub\n  fips: true\n", 8,
         "cluster.ssh_key_file", "SSH key type ssh-ed25519 unavailable when FIPS is enabled",
         files={"id_rsa.pub": ED25519}),
    Case("http-proxy-https", "  ssh_key_file: id_rsa.pub\n",
         "  ssh_key_file: id_rsa.pub\n  proxy:\n    http_proxy: https://proxy.nvidia.com:3128\n", 10,
         "cluster.proxy.http_proxy", 'Unsupported value: "https": supported values: "http"'),
    Case("no-proxy-wildcard", "  ssh_key_file: id_rsa.pub\n",
         "  ssh_key_file: id_rsa.pub\n  proxy:\n    https_proxy: http://proxy.nvidia.com:3128\n"
         "    no_proxy: ['*.nvidia.com']\n", 11, "cluster.proxy.no_proxy[0]",
         "without wildcard characters"),
    Case("mirror-with-tag", "  ssh_key_file: id_rsa.pub\n",
         "  ssh_key_file: id_rsa.pub\n  mirrors:\n    - source: quay.io/openshift-release-dev/ocp-release\n"
         "      mirrors: [registry.nvidia.com:5000/ocp4/release:4.16.3]\n", 11,
         "cluster.mirrors[0].mirrors[0]", "must be repository--not reference"),
    Case("masquerade-overlap", "service_network: 172.30.0.0/16", "service_network: 169.254.32.0/19", 14,
         "network.service_network", "overlaps OVN-Kubernetes' masquerade subnet 169.254.0.0/17"),
    Case("network-host-bits", "cluster_network: 10.128.0.0/14", "cluster_network: 10.130.0.0/14", 12,
         "network.cluster_network", "'10.130.0.0/14' has host bits set: the network is 10.128.0.0/14"),
    Case("pull-secret-entry-without-auth", "", "", 7, "cluster.pull_secret_file",
         '"quay.io" requires either auth or credsStore',
         files={"pull-secret.json": '{"auths": {"quay.io": {"email": "me@example.com"}}}'}),
    Case("hypervisor-uri-without-scheme", "uri: qemu:///system", "uri: /system", 28, "hypervisor.uri",
         "'/system' is not a libvirt URI"),
]


def _broken(tmp: Path, case: Case) -> Path:
    base = inventory_path(case.base)
    text = base.read_text()
    if case.old:
        assert text.count(case.old) == 1, f"{case.id}: the edit must match exactly once"
        text = text.replace(case.old, case.new)
    for name, content in {"pull-secret.json": None, "id_rsa.pub": None, **case.files}.items():
        (tmp / name).write_text(content if content is not None else (base.parent / name).read_text())
    path = tmp / f"{case.base}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_inventory_exits_2_naming_file_line_and_field(runner, tmp_path: Path, case: Case) -> None:
    path = _broken(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    where = f"{path}:{case.line}: " + (f"{case.field}: " if case.field else "")
    lines = [ln for ln in result.output.splitlines() if where in ln]
    assert lines, f"no problem at {where!r} in:\n{result.output}"
    assert any(case.fragment in ln for ln in lines), result.output


def test_there_are_at_least_30_broken_inventories() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_field_error_is_reported_in_one_run(runner, tmp_path: Path) -> None:
    text = inventory_path("dgxpod").read_text()
    text = text.replace('"52:54:00:21:03:50"', '"nope"').replace("ip: 10.33.3.44,", "ip: 300.1.1.1,")
    text = text.replace("tftp_root:", "tftp_rot:").replace("host_prefix: 23", "host_prefix: 40")
    path = _broken(tmp_path, Case("many", "", "", 0, None, ""))
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert "the inventory has 4 problems:" in result.output
    for where in (f"{path}:13: network.host_prefix: ", f"{path}:20: provisioner.tftp_rot: ",
                  f"{path}:32: nodes[1].mac: ", f"{path}:35: nodes[4].ip: "):
        assert where in result.output, where


def test_every_cross_field_error_is_reported_in_one_run(runner, tmp_path: Path) -> None:
    text = inventory_path("dgxpod").read_text()
    text = text.replace("ip: 10.33.3.51}", "ip: 10.33.3.50}")
    text = text.replace("gateway: 10.33.3.1", "gateway: 10.33.4.1")
    path = _broken(tmp_path, Case("many", "", "", 0, None, ""))
    path.write_text(text)
    (tmp_path / "id_rsa.pub").write_text(PRIVATE_KEY)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    for where in (f"{path}:11: network.gateway: ", f"{path}:33: nodes[2].ip: ",
                  f"{path}:8: cluster.ssh_key_file: "):
        assert where in result.output, where


@pytest.mark.parametrize("text", ["", "- just\n- a list\n"], ids=["empty", "top-level-list"])
def test_an_inventory_that_is_not_a_mapping_exits_2(runner, tmp_path: Path, text: str) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.output and "Traceback" not in result.output


def test_a_missing_inventory_file_exits_2(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'nope.yaml'}: no such inventory file" in result.output


def _snapshot(out: Path) -> dict[str, bytes | None]:
    return {p.relative_to(out).as_posix(): (p.read_bytes() if p.is_file() else None) for p in out.rglob("*")}


def test_render_of_a_broken_inventory_leaves_the_output_dir_untouched(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ok = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    before = _snapshot(out)
    path = _broken(tmp_path, CASES[[c.id for c in CASES].index("duplicate-ip")])
    result = runner.invoke(app, ["render", str(path), "-o", str(out), "--force"])
    assert result.exit_code == 2
    assert _snapshot(out) == before  # no file changed, none added (not even a staging dir)
