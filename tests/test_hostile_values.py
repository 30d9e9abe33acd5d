"""Hostile inventory values: every class is refused by `upi validate` with exit 2 and FILE:LINE: field.

Each case edits one line of a copy of dgxpod.yaml (so line numbers are those
of the example) and expects one exact `FILE:LINE: field.path:` with a message
fragment, no traceback. docs/security.md lists the classes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from certs import issue, make_ca, node_key
from conftest import inventory_path
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from upi.cli import app

LB = "  ip: 10.33.3.54"
PROV = "  ip: 10.33.3.18"
KERNEL = "  kernel: rhcos/rhcos-4.16.3-x86_64-live-kernel-x86_64"
INITRAMFS = "  initramfs: rhcos/rhcos-4.16.3-x86_64-live-initramfs.x86_64.img"
ROOTFS = "  rootfs: rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"
URL = "  http_base_url: http://10.33.3.18:8080"
TFTP = "  tftp_root: /var/lib/tftpboot"
URI = "  uri: qemu:///system"
BRIDGE = "  bridge: br0"
W0 = "     install_disk: /dev/nvme0n1, gpu: true}\n  - {name: worker-1"
M0 = '  - {name: master-0, role: master, mac: "52:54:00:21:03:50", ip: 10.33.3.50}'
HOST_PREFIX = "  host_prefix: 23"


def q(value: str) -> str:
    """`value` as a double-quoted YAML scalar (JSON strings are YAML)."""
    return json.dumps(value)


def disk(value: str) -> str:
    return f"     install_disk: {q(value)}, gpu: true}}\n  - {{name: worker-1"


def args(*values: str) -> str:
    return f"     install_disk: /dev/nvme0n1, gpu: true, kernel_args: [{', '.join(map(q, values))}]}}\n" \
           "  - {name: worker-1"


def m0(extra: str) -> str:
    return M0[:-1] + f", {extra}}}"


@dataclass(frozen=True)
class Case:
    """Replace `old` by `new` in dgxpod.yaml; expect `line`, `field` and `fragment`."""

    id: str
    old: str
    new: str
    line: int
    field: str | None
    fragment: str
    files: dict[str, str] = field(default_factory=dict)


BOOT_INJECTION = [
    Case("kernel-newline-append", KERNEL, f"  kernel: {q('rhcos/k' + chr(10) + '    APPEND init=/bin/sh')}",
         22, "rhcos.kernel", "is not a path under http_base_url"),
    Case("kernel-newline-menuentry", KERNEL,
         f"  kernel: {q('k' + chr(10) + '}' + chr(10) + 'menuentry x {')}",
         22, "rhcos.kernel", "no spaces, quotes, ; & $"),
    Case("kernel-space-second-ignition", KERNEL,
         f"  kernel: {q('rhcos/k coreos.inst.ignition_url=http://evil/x.ign')}", 22, "rhcos.kernel",
         "is not a path under http_base_url"),
    Case("kernel-carriage-return", KERNEL, f"  kernel: {q('rhcos/k' + chr(13) + 'APPEND x')}", 22,
         "rhcos.kernel", "line breaks"),
    Case("kernel-root-only", KERNEL, "  kernel: /", 22, "rhcos.kernel", "names no file (the path ends in /)"),
    Case("initramfs-directory", INITRAMFS, "  initramfs: rhcos/", 23, "rhcos.initramfs",
         "names no file (the path ends in /)"),
    Case("initramfs-grub-command", INITRAMFS, f"  initramfs: {q('rhcos/i.img;reboot')}", 23,
         "rhcos.initramfs",
         "is not a path under http_base_url"),
    Case("initramfs-grub-variable", INITRAMFS, f"  initramfs: {q('rhcos/${prefix}/i.img')}", 23,
         "rhcos.initramfs", "is not a path under http_base_url"),
    Case("rootfs-url-with-space", ROOTFS, f"  rootfs: {q('http://10.33.3.18:8080/r.img ip=dhcp')}", 24,
         "rhcos.rootfs", "is not an http:// or https:// URL"),
    Case("rootfs-url-with-quote", ROOTFS, f"  rootfs: {q(chr(39) + 'http://10.33.3.18/r.img')}", 24,
         "rhcos.rootfs", "is not a path under http_base_url"),
    Case("rootfs-dotdot", ROOTFS, "  rootfs: rhcos/../../etc/shadow", 24, "rhcos.rootfs", "no spaces"),
    Case("disk-space-second-ignition", W0, disk("/dev/sda coreos.inst.ignition_url=http://evil/x"), 36,
         "nodes[4].install_disk", "is not a disk device"),
    Case("disk-newline", W0, disk("/dev/sda\nAPPEND init=/bin/sh"), 36, "nodes[4].install_disk",
         "is not a disk device"),
    Case("disk-semicolon", W0, disk("/dev/sda;reboot"), 36, "nodes[4].install_disk", "is not a disk device"),
    Case("disk-not-a-device", W0, disk("/etc/passwd"), 36, "nodes[4].install_disk", "is not a disk device"),
    Case("disk-trailing-newline", W0, disk("/dev/sda\n"), 36, "nodes[4].install_disk",
         "is not a disk device"),
    Case("kernel-arg-newline", W0, args("rd.break\nAPPEND init=/bin/sh"), 36, "nodes[4].kernel_args[0]",
         "must be one argument, no spaces"),
    Case("kernel-arg-semicolon", W0, args("quiet", "a;reboot"), 36, "nodes[4].kernel_args[1]",
         "is not a plain kernel argument"),
    Case("kernel-arg-quote", W0, args("a='b'"), 36, "nodes[4].kernel_args[0]",
         "is not a plain kernel argument"),
    Case("kernel-arg-brace", W0, args("}"), 36, "nodes[4].kernel_args[0]", "is not a plain kernel argument"),
    Case("kernel-arg-second-ignition", W0, args("coreos.inst.ignition_url=http://evil/x.ign"), 36,
         "nodes[4].kernel_args[0]", "upi sets coreos.inst.ignition_url itself"),
    Case("kernel-arg-second-disk", W0, args("coreos.inst.install_dev=/dev/sdb"), 36,
         "nodes[4].kernel_args[0]", "upi sets coreos.inst.install_dev itself"),
    Case("kernel-arg-second-initrd", W0, args("initrd=evil.img"), 36, "nodes[4].kernel_args[0]",
         "upi sets initrd itself"),
]

TRAILING_NEWLINE = [
    Case("name-newline", "  name: dgxpod", f"  name: {q('dgxpod' + chr(10))}", 4, "cluster.name",
         "is not a DNS label"),
    Case("domain-newline", "  base_domain: nvidia.com", f"  base_domain: {q('nvidia.com' + chr(10))}", 5,
         "cluster.base_domain", "is not a DNS domain name"),
    Case("url-newline", URL, f"  http_base_url: {q('http://10.33.3.18:8080' + chr(10))}", 19,
         "provisioner.http_base_url", "is not an http:// or https:// URL"),
    Case("node-name-newline", "{name: master-0,", f"{{name: {q('master-0' + chr(10))},", 32, "nodes[1].name",
         "is not a DNS label"),
    Case("interface-newline", "  interface: eno1", f"  interface: {q('eno1' + chr(10))}", 18,
         "provisioner.interface", "is not a network interface name"),
    Case("bridge-newline", BRIDGE, f"  bridge: {q('br0' + chr(10))}", 29, "hypervisor.bridge",
         "is not a network interface name"),
    Case("uri-newline", URI, f"  uri: {q('qemu:///system' + chr(10))}", 28, "hypervisor.uri",
         "is not a libvirt URI"),
    Case("lb-hostname-newline", LB, LB + f"\n  hostname: {q('lb' + chr(10))}", 27, "load_balancer.hostname",
         "is not a DNS label"),
]

TRACEBACKS = [
    Case("complex-key-list", HOST_PREFIX, HOST_PREFIX + "\n  ? [a, b]\n  : 1", 14, None,
         "a key must be a plain name, not a sequence"),
    Case("complex-key-mapping", HOST_PREFIX, HOST_PREFIX + "\n  ? {a: 1}\n  : 1", 14, None,
         "a key must be a plain name, not a mapping"),
    Case("number-key", HOST_PREFIX, HOST_PREFIX + "\n  7: 1", 14, None,
         "a key must be a plain name, not '7'"),
    Case("huge-integer", HOST_PREFIX, "  host_prefix: " + "9" * 5000, 13, None, "is too long"),
    Case("huge-integer-in-vm", M0, m0("vm: {vcpus: " + "1" * 4400 + "}"), 32, None, "is too long"),
    Case("huge-integer-in-range", M0, m0("vm: {memory_mib: " + "1" * 40 + "}"), 32, "nodes[1].vm.memory_mib",
         "is out of range: it must be at most 16777216"),
    Case("ipv6-url-unclosed", URL, f"  http_base_url: {q('http://[::1')}", 19, "provisioner.http_base_url",
         "is not an http:// or https:// URL"),
    Case("ipv6-url-unclosed-kernel", KERNEL, f"  kernel: {q('http://[::1/k')}", 22, "rhcos.kernel",
         "is not an http:// or https:// URL"),
    Case("url-bad-port", URL, "  http_base_url: http://10.33.3.18:99999", 19, "provisioner.http_base_url",
         "Port out of range"),
    Case("fqdn-over-253", "  base_domain: nvidia.com",
         "  base_domain: " + ".".join(["a" * 60] * 3) + ".example.com." + "a" * 30, 5, "cluster.base_domain",
         "longer than 253 characters"),
    Case("fqdn-over-253-with-long-cluster-name", "  name: dgxpod\n  base_domain: nvidia.com",
         "  name: " + "c" * 63 + "\n  base_domain: " + ".".join(["b" * 50] * 3) + ".example.com", 5,
         "cluster.base_domain", "shorten cluster.name or base_domain"),
]

ADDRESSES = [
    Case("lb-is-gateway", LB, "  ip: 10.33.3.1", 26, "load_balancer.ip",
         "10.33.3.1 is the gateway's address"),
    Case("lb-is-network", LB, "  ip: 10.33.3.0", 26, "load_balancer.ip",
         "is the network address of 10.33.3.0/24"),
    Case("lb-is-broadcast", LB, "  ip: 10.33.3.255", 26, "load_balancer.ip", "is the broadcast address"),
    Case("lb-outside", LB, "  ip: 10.99.3.54", 26, "load_balancer.ip", "10.99.3.54 is outside machine_cidr"),
    Case("provisioner-is-gateway", PROV, "  ip: 10.33.3.1", 17, "provisioner.ip", "is the gateway's address"),
    Case("provisioner-is-network", PROV, "  ip: 10.33.3.0", 17, "provisioner.ip", "is the network address"),
    Case("provisioner-is-broadcast", PROV, "  ip: 10.33.3.255", 17, "provisioner.ip",
         "is the broadcast address"),
    Case("dhcp-range-holds-gateway", TFTP, TFTP + "\n  dhcp_range: {start: 10.33.3.1, end: 10.33.3.9}", 21,
         "provisioner.dhcp_range", "holds the gateway 10.33.3.1"),
    Case("dhcp-range-holds-provisioner", TFTP, TFTP + "\n  dhcp_range: {start: 10.33.3.10, end: 10.33.3.20}",
         21, "provisioner.dhcp_range", "holds the provisioner 10.33.3.18"),
    Case("dhcp-range-holds-lb", TFTP, TFTP + "\n  dhcp_range: {start: 10.33.3.54, end: 10.33.3.60}", 21,
         "provisioner.dhcp_range", "holds the load balancer 10.33.3.54"),
    Case("dhcp-range-holds-broadcast", TFTP, TFTP + "\n  dhcp_range: {start: 10.33.3.200, end: 10.33.3.255}",
         21, "provisioner.dhcp_range", "holds the broadcast address"),
    Case("upstream-dns-localhost", "[10.33.0.10]", "[10.33.0.10, 127.0.0.1]", 15, "network.upstream_dns[1]",
         "127.0.0.1 is a loopback address"),
    Case("upstream-dns-resolved-stub", "[10.33.0.10]", "[127.0.0.53]", 15, "network.upstream_dns[0]",
         "loopback"),
    Case("upstream-dns-unspecified", "[10.33.0.10]", "[0.0.0.0]", 15, "network.upstream_dns[0]",
         "not the address of a host"),
    Case("upstream-dns-multicast", "[10.33.0.10]", "[224.0.0.251]", 15, "network.upstream_dns[0]",
         "multicast"),
    Case("mac-all-zeros", '"52:54:00:21:03:50"', '"00:00:00:00:00:00"', 32, "nodes[1].mac", "all-zeros MAC"),
    Case("mac-broadcast", '"52:54:00:21:03:50"', '"ff:ff:ff:ff:ff:ff"', 32, "nodes[1].mac", "multicast MAC"),
    Case("mac-multicast", '"52:54:00:21:03:50"', '"33:33:00:00:00:01"', 32, "nodes[1].mac", "multicast MAC"),
    Case("lb-hostname-api", LB, LB + "\n  hostname: api", 27, "load_balancer.hostname",
         "'api' is a name the cluster's DNS records use"),
    Case("lb-hostname-apps", LB, LB + "\n  hostname: apps", 27, "load_balancer.hostname", "'apps' is a name"),
    Case("lb-hostname-api-int", LB, LB + "\n  hostname: api-int", 27, "load_balancer.hostname", "is a name"),
]

CREDENTIALS = [
    Case("base-url-user-password", URL, "  http_base_url: http://admin:s3cret@10.33.3.18:8080", 19,
         "provisioner.http_base_url", "a user or password in the URL would be copied into world-readable"),
    Case("base-url-user", URL, "  http_base_url: https://admin@10.33.3.18", 19, "provisioner.http_base_url",
         "a user or password in the URL"),
    Case("rootfs-url-password", ROOTFS, "  rootfs: https://u:p@mirror.example.com/rootfs.img", 24,
         "rhcos.rootfs",
         "a user or password in the URL"),
    Case("kernel-url-user", KERNEL, "  kernel: http://deploy@10.33.3.18/k", 22, "rhcos.kernel",
         "a user or password in the URL"),
]

DIGITS_AND_INTS = [
    Case("arabic-indic-ip", LB, "  ip: \u0661\u0660.33.3.54", 26, "load_balancer.ip",
         "is not an IPv4 address"),
    Case("fullwidth-gateway", "  gateway: 10.33.3.1", "  gateway: \uff11\uff10.33.3.1", 11, "network.gateway",
         "is not an IPv4 address"),
    Case("arabic-indic-cidr", "  machine_cidr: 10.33.3.0/24", "  machine_cidr: 10.33.3.0/\u0662\u0664", 10,
         "network.machine_cidr", "is not an IPv4 network"),
    Case("arabic-indic-version", '"4.16"', '"4.\u0661\u0666"', 6, "cluster.openshift_version",
         "is not an OpenShift 4 version"),
    Case("arabic-indic-vcpus", M0, m0('vm: {vcpus: "\u0664"}'), 32, "nodes[1].vm.vcpus",
         "must be a whole number"),
    Case("devanagari-host-prefix", HOST_PREFIX, '  host_prefix: "\u0968\u0969"', 13, "network.host_prefix",
         "must be a whole number"),
    Case("host-prefix-true", HOST_PREFIX, "  host_prefix: true", 13, "network.host_prefix",
         "must be a whole number"),
    Case("vcpus-true", M0, m0("vm: {vcpus: true}"), 32, "nodes[1].vm.vcpus", "must be a whole number"),
    Case("memory-as-string", M0, m0('vm: {memory_mib: "32768"}'), 32, "nodes[1].vm.memory_mib",
         "'32768' is quoted, so it is text; write the number without quotes: memory_mib: 32768"),
    Case("disk-as-float", M0, m0("vm: {disk_gib: 120.0}"), 32, "nodes[1].vm.disk_gib",
         "must be a whole number"),
    Case("gpus-true", W0, "     install_disk: /dev/nvme0n1, gpu: true, gpus: true}\n  - {name: worker-1", 36,
         "nodes[4].gpus", "must be a whole number"),
]

COMMAS = [
    Case("tftp-root-comma", TFTP, "  tftp_root: /srv/tftp,eth1", 20, "provisioner.tftp_root",
         "is not an absolute path without spaces, line breaks or ,"),
    Case("http-root-comma", TFTP, TFTP + "\n  http_root: /srv/www,x", 21, "provisioner.http_root",
         "refused: ','"),
    Case("image-dir-comma", BRIDGE, BRIDGE + "\n  image_dir: /var/lib/libvirt/images,size=1", 30,
         "hypervisor.image_dir", "refused: ','"),
    Case("uefi-loader-comma", BRIDGE,
         BRIDGE + "\n  uefi_loader: /usr/share/OVMF/CODE.fd,loader.secure=no", 30,
         "hypervisor.uefi_loader", "refused: ','"),
    Case("dnsmasq-dir-quote", TFTP, TFTP + f"\n  dnsmasq_dir: {q('/etc/dnsmasq.d/a' + chr(34))}", 21,
         "provisioner.dnsmasq_dir", "is not an absolute path"),
    Case("image-dir-newline", BRIDGE, BRIDGE + f"\n  image_dir: {q('/srv/a' + chr(10) + 'b')}", 30,
         "hypervisor.image_dir", "line breaks"),
]

HYPERVISOR_URI = [
    Case("uri-ext-command", URI, "  uri: qemu+ext:///system?command=/tmp/evil", 28, "hypervisor.uri",
         "only qemu or test with transport"),
    Case("uri-ssh-netcat", URI, "  uri: qemu+ssh://root@kvm1/system?netcat=/tmp/evil", 28, "hypervisor.uri",
         "the URI parameter 'netcat' is refused"),
    Case("uri-ssh-no-verify", URI, "  uri: qemu+ssh://root@kvm1/system?no_verify=1", 28, "hypervisor.uri",
         "the URI parameter 'no_verify' is refused"),
    Case("uri-ssh-socket", URI, "  uri: qemu+ssh://kvm1/system?socket=/x&keyfile=/k", 28, "hypervisor.uri",
         "'socket' is refused"),
    Case("uri-tcp", URI, "  uri: qemu+tcp://kvm1/system", 28, "hypervisor.uri", "only qemu or test"),
    Case("uri-other-driver", URI, "  uri: xen:///system", 28, "hypervisor.uri", "only qemu or test"),
    Case("uri-ssh-option-host", URI, "  uri: qemu+ssh://-oProxyCommand=evil/system", 28, "hypervisor.uri",
         "is not a libvirt URI"),
    Case("uri-with-space", URI, f"  uri: {q('qemu:///system ?command=x')}", 28, "hypervisor.uri",
         "is not a libvirt URI"),
]

CASES = [*BOOT_INJECTION, *TRAILING_NEWLINE, *TRACEBACKS, *ADDRESSES, *CREDENTIALS, *DIGITS_AND_INTS,
         *COMMAS, *HYPERVISOR_URI]


def _write(tmp: Path, text: str, files: dict[str, str] | None = None) -> Path:
    base = inventory_path("dgxpod")
    for name in ("pull-secret.json", "id_rsa.pub"):
        (tmp / name).write_bytes((base.parent / name).read_bytes())
    for name, content in (files or {}).items():
        (tmp / name).write_text(content)
    path = tmp / "dgxpod.yaml"
    path.write_text(text)
    return path


def _edited(tmp: Path, case: Case) -> Path:
    text = inventory_path("dgxpod").read_text()
    assert text.count(case.old) == 1, f"{case.id}: the edit must match exactly once"
    return _write(tmp, text.replace(case.old, case.new), case.files)


def _expect(result, path: Path, line: int, field_: str | None, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    where = f"{path}:{line}: " + (f"{field_}: " if field_ else "")
    lines = [ln for ln in result.output.splitlines() if where in ln]
    assert lines, f"no problem at {where!r} in:\n{result.output}"
    assert any(fragment in ln for ln in lines), result.output


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_value_exits_2_naming_file_line_and_field(runner, tmp_path: Path, case: Case) -> None:
    path = _edited(tmp_path, case)
    _expect(runner.invoke(app, ["validate", str(path)]), path, case.line, case.field, case.fragment)


def test_every_class_has_several_variants() -> None:
    for group in (BOOT_INJECTION, TRAILING_NEWLINE, TRACEBACKS, ADDRESSES, CREDENTIALS, DIGITS_AND_INTS,
                  COMMAS, HYPERVISOR_URI):
        assert len(group) >= 4
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("value", [
    "/dev/disk/by-path/pci-0000:00:1f.2-ata-1", "/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GX",
    "/dev/sdb",
])
def test_real_device_names_stay_valid(runner, tmp_path: Path, value: str) -> None:
    text = inventory_path("dgxpod").read_text().replace(W0, disk(value))
    path = _write(tmp_path, text.replace(W0, args("console=ttyS0,115200n8", "rd.driver.blacklist=nouveau")))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("uri", [
    "qemu+ssh://root@kvm1.example.com/system", "qemu+ssh://kvm1:2222/system?keyfile=/root/.ssh/id_ed25519",
    "qemu+tls://kvm1/system", "qemu:///session", "qemu+unix:///system", "test:///default",
])
def test_safe_hypervisor_uris_stay_valid(runner, tmp_path: Path, uri: str) -> None:
    path = _write(tmp_path, inventory_path("dgxpod").read_text().replace(URI, f"  uri: {uri}"))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


# --- the trust bundle is published in bootstrap.ign: PEM certificates only ------------------

def _key_pem(kind: str) -> str:
    key = node_key("rsa" if kind == "rsa" else "ec")
    fmt = {"pkcs8": serialization.PrivateFormat.PKCS8, "rsa": serialization.PrivateFormat.TraditionalOpenSSL,
           "ec": serialization.PrivateFormat.TraditionalOpenSSL,
           "openssh": serialization.PrivateFormat.OpenSSH}[kind]
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


CA = make_ca("Site Root CA")
CERT = CA.cert_pem.decode()
LEAF = issue(CA, "proxy.example.com", server=True)
AFTER_CERT = CERT.count("\n") + 1  # the first line after one certificate
BUNDLES = {
    "pkcs8-key-after-cert": (CERT + _key_pem("pkcs8"), f"ca.pem line {AFTER_CERT} holds a PRIVATE KEY block"),
    "rsa-key-alone": (_key_pem("rsa"), "ca.pem line 1 holds a RSA PRIVATE KEY block"),
    "ec-key-before-cert": (_key_pem("ec") + CERT, "ca.pem line 1 holds a EC PRIVATE KEY block"),
    "openssh-key-between-certs": (CERT + _key_pem("openssh") + LEAF.cert_pem.decode(),
                                  f"ca.pem line {AFTER_CERT} holds a OPENSSH PRIVATE KEY block"),
    "cert-and-its-key": (LEAF.cert_pem.decode() + LEAF.key_pem.decode(), "holds a PRIVATE KEY block"),
    "key-without-pem-armour": (CERT + "PRIVATE KEY: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n",
                               f"ca.pem line {AFTER_CERT} holds a PRIVATE KEY"),
    "loose-text": (CERT + "password=hunter2\n", f"ca.pem line {AFTER_CERT} holds text that is not a PEM"),
    "csr-block": (CERT + "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n",
                  f"ca.pem line {AFTER_CERT} holds a CERTIFICATE REQUEST block"),
    "broken-certificate": ("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
                           "ca.pem: the certificate at line 1 does not parse"),
    "empty": ("\n", "ca.pem holds no PEM certificate"),
}


def _with_bundle() -> str:
    key = "  ssh_key_file: id_rsa.pub\n"
    return inventory_path("dgxpod").read_text().replace(key, key + "  additional_trust_bundle_file: ca.pem\n")


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_a_trust_bundle_with_anything_but_certificates_exits_2(runner, tmp_path: Path, name: str) -> None:
    content, fragment = BUNDLES[name]
    text = _with_bundle()
    path = _write(tmp_path, text, {"ca.pem": content})
    for argv in (["validate", str(path)], ["render", str(path), "-o", str(tmp_path / "out")]):
        result = runner.invoke(app, argv)
        _expect(result, path, 9, "cluster.additional_trust_bundle_file", fragment)
        assert "BEGIN" not in result.output and "hunter2" not in result.output  # never echoed
    assert not (tmp_path / "out").exists()


def test_a_bundle_of_certificates_and_comments_is_accepted(runner, tmp_path: Path) -> None:
    bundle = f"# Site Root CA\n{CERT}\n# proxy\r\n{LEAF.cert_pem.decode()}".replace("\n", "\r\n")
    text = _with_bundle()
    path = _write(tmp_path, text, {"ca.pem": bundle})
    result = runner.invoke(app, ["render", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "BEGIN CERTIFICATE" in (tmp_path / "out" / "install-config.yaml").read_text()


# --- YAML alias bombs and deep nesting: bounded before anything walks them ---------------------

def _bomb(levels: int, width: int = 9, letter: str = "a") -> str:
    rows = [f"{letter}0: &{letter}0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        rows.append(f"{letter}{i}: &{letter}{i} [" + ", ".join([f"*{letter}{i - 1}"] * width) + "]")
    return "\n".join(rows) + "\n"


def _placed(where: str, bomb: str, levels: int) -> tuple[str, int, str]:
    """dgxpod with the bomb placed `where`; the line and field of the error it brings."""
    text = inventory_path("dgxpod").read_text()
    top = f"*{bomb[0]}{levels - 1}"
    if where == "top-level":
        return bomb + text, 1, "a0"
    if where == "unknown-key":
        flow = "{" + bomb.replace("\n", ", ").rstrip(", ") + "}"
        return text.replace("network:\n", f"network:\n  bomb: {flow}\n"), 10, "network.bomb"
    if where == "kernel-args":
        text = text.replace(W0, args("x").replace('["x"]', top))
        return bomb + text, 36 + levels, "nodes[4].kernel_args[0]"
    return bomb + text.replace("[10.33.0.10]", top), 15 + levels, "network.upstream_dns[0]"


WHERE = ["top-level", "unknown-key", "kernel-args", "upstream-dns"]


@pytest.mark.parametrize("where", WHERE)
def test_an_alias_bomb_is_refused_at_its_line_not_expanded(runner, tmp_path: Path, where: str) -> None:
    # 9 levels of 9 aliases: 9**9 (387 million) values from about 600 bytes.
    bomb = _bomb(9, letter="c" if where == "upstream-dns" else "a")
    assert len(bomb) < 700
    text, _, _ = _placed(where, bomb, 9)
    path = _write(tmp_path, text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "YAML aliases here expand to more than 1,000,000 values (an alias bomb?)" in result.output


@pytest.mark.parametrize("where", WHERE)
def test_aliases_under_the_bound_with_an_error_are_reported_at_the_field(runner, tmp_path: Path,
                                                                         where: str) -> None:
    # 8**6 = 262,144 values (twice, where the bomb is also used): allowed, and the line walk
    # still visits each node only once.
    text, line, field_ = _placed(where, _bomb(6, 8, letter="c" if where == "upstream-dns" else "a"), 6)
    path = _write(tmp_path, text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{path}:{line}: {field_}: " in result.output, result.output


@pytest.mark.parametrize(("text", "line"), [
    ("cluster: " + "[" * 3000 + "]" * 3000 + "\n", 1),
    ("cluster: " + "{a: " * 200 + "1" + "}" * 200 + "\n", 1),
    ("cluster: " + "- " * 5000 + "x\n", 1),
    ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", 1),  # libyaml's composer would crash the process
    ("cluster:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 400)) + " " * 400 + "x\n", 101),
], ids=["flow-lists", "flow-maps", "block-dashes", "crashing-depth", "indentation"])
def test_deep_nesting_exits_2_naming_the_line(runner, tmp_path: Path, text: str, line: int) -> None:
    path = _write(tmp_path, text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{path}:{line}: YAML nested more than 100 levels deep" in result.output, result.output


# --- values are printed as text: never Rich markup, never raw terminal escapes -------------

def test_inventory_values_in_errors_are_printed_without_terminal_escapes(runner, tmp_path: Path) -> None:
    hostile = q("ps\x1b[2J\r.json")
    text = inventory_path("dgxpod").read_text().replace("pull_secret_file: pull-secret.json",
                                                        f"pull_secret_file: {hostile}")
    path = _write(tmp_path, text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert "\x1b" not in result.output and "\r" not in result.output
    assert "cannot read ps\\x1b[2J\\r.json" in result.output


def test_tables_show_markup_and_escapes_as_text(capsys) -> None:
    from upi.console import print_table

    print_table("[red]t[/red]", ["[b]col[/b]"], [["[bold]x[/bold]\x1b[31m\x9b2J"]])
    out = capsys.readouterr().out
    assert "[red]t[/red]" in out and "[b]col[/b]" in out and "[bold]x[/bold]" in out
    assert "\x1b" not in out and "\x9b" not in out
    assert "\\x1b[31m" in out and "\\x9b2J" in out


@pytest.mark.parametrize(("extra", "field_", "fragment"), [
    ('gpu:\n  operator_channel: "v26.3\\n"\n', "gpu.operator_channel", "is not a Kubernetes name"),
    ('gpu:\n  operator_namespace: "nvidia\\n"\n', "gpu.operator_namespace", "is not a Kubernetes name"),
    ('gpu:\n  nfd_image: "quay.io/nfd:v1\\n"\n', "gpu.nfd_image", "is not a container image reference"),
], ids=["channel", "namespace", "image"])
def test_a_trailing_newline_fails_the_gpu_names_too(runner, tmp_path: Path, extra: str, field_: str,
                                                    fragment: str) -> None:
    path = _write(tmp_path, inventory_path("dgxpod").read_text() + extra)
    _expect(runner.invoke(app, ["validate", str(path)]), path, 40, field_, fragment)


def test_the_gpu_panel_shows_messages_as_text() -> None:
    import io

    from rich.console import Console

    from upi.gpu.display import GpuDisplay

    display = GpuDisplay(live=False, out=io.StringIO())
    display.note("pod log: [/bold] [red]x\x1b[2J")
    out = io.StringIO()
    Console(file=out, width=200).print(display._panel())  # a closing tag with no opening one raised
    assert "[/bold] [red]x\\x1b[2J" in out.getvalue() and "\x1b[2J" not in out.getvalue()


# --- hostile YAML text anywhere: exit 0 or 2, never a traceback -----------------------------

SNIPPETS = ["? [a, b]\n: 1", "? {a: 1}\n: 1", "1: x", "yes: x", "&a [x]", "*a", "*nope",
            "!!python/object:os.system x", "!!binary aGk=", "1e999", "9" * 5000, "[" * 500, "{" * 200,
            "- " * 300, "\x00", "\x1b[2J", "\ufeff", "\t", "<<: *a", "x: &a {y: 1}", "\"unterminated", "'",
            "%YAML 1.1", "---", "...", "\u2028", "@x"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(SNIPPETS), st.booleans()), min_size=1,
                     max_size=3))
def test_hostile_yaml_text_exits_0_or_2_without_a_traceback(runner, tmp_path_factory, cuts) -> None:
    lines = inventory_path("dgxpod").read_text().split("\n")
    for at, snippet, replace in cuts:
        at = min(at, len(lines) - 1)
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        if replace:
            lines[at] = indent + lines[at].strip().split(":")[0] + ": " + snippet
        else:
            lines.insert(at, indent + snippet)
    path = _write(tmp_path_factory.mktemp("yaml"), "\n".join(lines))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code in (0, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
