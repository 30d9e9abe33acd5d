"""Generated logs of a busy provisioner for a 128-DGX inventory (bench/status.py's input).

Not a benchmark itself: bench/run.py skips names that start with `_`.

The dnsmasq log is what dnsmasq 2.90 writes with `log-dhcp` to its
log-facility file: each exchange is the 36 lines of DISCOVER, OFFER,
REQUEST and ACK with their tags, requested and sent options, as real dnsmasq
wrote them in the PXE tests on this machine (tests/pxe_harness.py's lab);
the TFTP lines are dnsmasq's `sent FILE to ADDR` (src/tftp.c). Most of it is
old: lease renewals of the 132 nodes over the days before, a few unknown
MACs refused; the install being watched is at the end. The access log is
nginx's combined format: a shared web server's site traffic (package
repositories, from clients outside the machine network) with the nodes'
ignition and rootfs fetches among it.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

DGX = 128
PROVISIONER = "10.40.0.2"
ROOTFS = "rhcos/rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"
ROOTFS_SIZE = 1_104_347_136
KERNEL = "rhcos/rhcos-4.16.3-x86_64-live-kernel-x86_64"
INITRD = "rhcos/rhcos-4.16.3-x86_64-live-initramfs.x86_64.img"

INVENTORY = f"""\
cluster:
  name: bench
  base_domain: example.com
  openshift_version: "4.16"
  pull_secret_file: pull-secret.json
  ssh_key_file: id_rsa.pub
network:
  machine_cidr: 10.40.0.0/16
  gateway: 10.40.0.1
  cluster_network: 10.128.0.0/14
  host_prefix: 23
  upstream_dns: [10.33.0.10]
provisioner:
  ip: {PROVISIONER}
  interface: eno1
  http_base_url: http://{PROVISIONER}:8080
  dnsmasq_log: {{dnsmasq_log}}
  http_access_log: {{access_log}}
  ssh: {{ssh}}
rhcos:
  kernel: {KERNEL}
  initramfs: {INITRD}
  rootfs: {ROOTFS}
load_balancer:
  ip: 10.40.0.3
hypervisor:
  uri: qemu:///system
  bridge: br0
nodes:
  - {{{{name: bootstrap, role: bootstrap, mac: "52:54:00:00:00:09", ip: 10.40.0.9}}}}
  - {{{{name: master-0, role: master, mac: "52:54:00:00:00:10", ip: 10.40.0.10}}}}
  - {{{{name: master-1, role: master, mac: "52:54:00:00:00:11", ip: 10.40.0.11}}}}
  - {{{{name: master-2, role: master, mac: "52:54:00:00:00:12", ip: 10.40.0.12}}}}
"""


def nodes() -> list[tuple[str, str, str]]:
    """(name, MAC, IP) of every node: bootstrap, 3 masters, 128 DGX workers."""
    out = [("bootstrap", "52:54:00:00:00:09", "10.40.0.9")]
    out += [(f"master-{i}", f"52:54:00:00:00:1{i}", f"10.40.0.1{i}") for i in range(3)]
    first = int(ipaddress.IPv4Address("10.40.1.0"))
    out += [(f"dgx-{i:03d}", f"b8:ce:f6:00:{i >> 8:02x}:{i & 0xff:02x}",
             str(ipaddress.IPv4Address(first + i))) for i in range(DGX)]
    return out


def inventory(dnsmasq_log: str, access_log: str, ssh: str = "{local: true}") -> str:
    """The 128-DGX inventory, its logs at these paths on the provisioner (`ssh`: its section)."""
    text = INVENTORY.format(dnsmasq_log=dnsmasq_log, access_log=access_log, ssh=ssh)
    return text + "".join(f'  - {{name: {n}, role: worker, mac: "{m}", ip: {ip}, gpu: true}}\n'
                          for n, m, ip in nodes()[4:])


def _stamp(t: datetime) -> str:
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S}"


def exchange(t: datetime, xid: int, mac: str, ip: str, name: str, pid: int = 4242) -> str:
    """One DHCP exchange as dnsmasq logs it with log-dhcp (36 lines)."""
    head = f"{_stamp(t)} dnsmasq-dhcp[{pid}]: {xid} "
    sent = [" 1 option: 53 message-type  {mt}", " 4 option: 54 server-identifier  " + PROVISIONER,
            " 4 option: 51 lease-time  1h", " 4 option:  1 netmask  255.255.0.0",
            " 4 option: 28 broadcast  10.40.255.255", f"{len(name):2d} option: 12 hostname  {name}",
            "11 option: 15 domain-name  example.com", " 4 option:  6 dns-server  " + PROVISIONER,
            " 4 option:  3 router  10.40.0.1"]
    asked = ["requested options: 1:netmask, 2:time-offset, 3:router, 4, 5, 6:dns-server, ",
             "requested options: 12:hostname, 13:boot-file-size, 15:domain-name, 17:root-path, ",
             "requested options: 18:extension-path, 22:max-datagram-reassembly, 23:default-ttl, ",
             "requested options: 28:broadcast, 40:nis-domain, 41:nis-server, 42:ntp-server, "
             "43:vendor-encap, ",
             "requested options: 50:requested-address, 51:lease-time, 54:server-identifier, "
             "60:vendor-class, ",
             "requested options: 66:tftp-server, 67:bootfile-name, 97:client-machine-id, 128, 129, "
             "130, 131, 132, 133, 134, 135"]
    lines = ["available DHCP range: 10.40.0.10 -- 10.40.255.250",
             "vendor class: PXEClient:Arch:00007:UNDI:003016", f"DHCPDISCOVER(eno1) {mac} ",
             "tags: known, efi64, eno1", f"DHCPOFFER(eno1) {ip} {mac} ", *asked, "bootfile name: grubx64.efi",
             "next server: " + PROVISIONER, *(f"sent size: {s.format(mt=2)}" for s in sent),
             "available DHCP range: 10.40.0.10 -- 10.40.255.250",
             "vendor class: PXEClient:Arch:00007:UNDI:003016", f"DHCPREQUEST(eno1) {ip} {mac} ",
             "tags: known, efi64, eno1", f"DHCPACK(eno1) {ip} {mac} {name}", "bootfile name: grubx64.efi",
             "next server: " + PROVISIONER, *(f"sent size: {s.format(mt=5)}" for s in sent)]
    return "".join(f"{head}{line}\n" for line in lines)


def refused(t: datetime, xid: int, mac: str, pid: int = 4242) -> str:
    """An unknown MAC's DISCOVER with no address for it."""
    head = f"{_stamp(t)} dnsmasq-dhcp[{pid}]: {xid} "
    return (f"{head}available DHCP range: 10.40.0.10 -- 10.40.255.250\n{head}vendor class: MSFT 5.0\n"
            f"{head}DHCPDISCOVER(eno1) {mac} no address available\n")


def tftp(t: datetime, mac: str, ip: str, pid: int = 4242) -> str:
    """What a UEFI node fetches over TFTP: GRUB, its per-MAC config, the kernel and initramfs."""
    dashes = mac.replace(":", "-")
    return "".join(f"{_stamp(t)} dnsmasq-tftp[{pid}]: sent /var/lib/tftpboot/{f} to {ip}\n"
                   for f in ("grubx64.efi", f"grub.cfg-01-{dashes}", KERNEL, INITRD))


def install_dnsmasq(t: datetime, rng: random.Random) -> Iterator[str]:
    """The install being watched: each node's PXE exchange and TFTP files, a few seconds apart."""
    for name, mac, ip in nodes():
        yield exchange(t, rng.randrange(1 << 31), mac, ip, name)
        yield tftp(t + timedelta(seconds=2), mac, ip)
        t += timedelta(seconds=rng.randrange(1, 4))


def dnsmasq_log(path: Path, size: int, now: datetime, seed: int = 29, install: bool = True) -> int:
    """Write about `size` bytes of dnsmasq log ending at `now`; the bytes written.

    `install`: the install being watched at the end (else only the days before).
    """
    rng = random.Random(seed)
    all_nodes = nodes()
    tail = "".join(install_dnsmasq(now - timedelta(minutes=10), rng)) if install else ""
    per = len(exchange(now, 1 << 30, *all_nodes[-1][1:], all_nodes[-1][0]))
    count = max(1, (size - len(tail)) // per)
    t = now - timedelta(days=3)
    step = timedelta(days=3) / count
    with path.open("w") as fh:
        i = written = 0
        while written < size - len(tail):
            name, mac, ip = all_nodes[i % len(all_nodes)]
            if i % 50 == 49:
                stranger = f"00:25:90:{i >> 16 & 0xff:02x}:{i >> 8 & 0xff:02x}:{i & 0xff:02x}"
                text = refused(t, rng.randrange(1 << 31), stranger)
            else:
                text = exchange(t, rng.randrange(1 << 31), mac, ip, name)
            fh.write(text)
            written += len(text)
            t = min(t + step, now - timedelta(minutes=11))
            i += 1
        fh.write(tail)
        return written + len(tail)


def _access(t: datetime, ip: str, path: str, status: int, size: int, agent: str) -> str:
    return (f'{ip} - - [{t:%d/%b/%Y:%H:%M:%S} +0000] "GET {path} HTTP/1.1" {status} {size} "-" '
            f'"{agent}"\n')


REPO = ["BaseOS/x86_64/os/Packages/{}-{}.el9.x86_64.rpm", "AppStream/x86_64/os/Packages/{}-{}.el9.noarch.rpm",
        "AppStream/x86_64/os/repodata/{}-{}-primary.xml.gz"]
PKGS = ["kernel-core", "glibc", "openssl-libs", "python3-libs", "systemd", "podman", "NetworkManager",
        "nvidia-driver", "cuda-toolkit", "dnf-data", "bash", "coreutils"]


DNF_AGENT = "libdnf (Red Hat Enterprise Linux 9.4; generic; Linux.x86_64)"


def fetches(t: datetime, name: str, ip: str) -> str:
    """A node's rootfs, then 30 s later its ignition file (4.6+ live PXE order)."""
    role = name.split("-")[0].replace("dgx", "worker")
    return (_access(t, ip, "/" + ROOTFS, 200, ROOTFS_SIZE, "curl/7.76.1")
            + _access(t + timedelta(seconds=30), ip, f"/ignition/{role}.ign", 200, 1721,
                      "coreos-installer/0.21.0"))


def install_access(t: datetime, rng: random.Random) -> Iterator[str]:
    """The install being watched: each node's fetches, a few seconds apart."""
    for name, _mac, ip in nodes():
        yield fetches(t, name, ip)
        t += timedelta(seconds=rng.randrange(1, 4))


def other_access(t: datetime, size: int, seed: int = 30, span: float = 15.0) -> str:
    """About `size` bytes of a shared server's other traffic from `t` on, over `span` seconds."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        client = f"10.50.{rng.randrange(256)}.{rng.randrange(1, 255)}"  # outside the machine network
        repo = rng.choice(REPO).format(rng.choice(PKGS),
                                       f"{rng.randrange(1, 9)}.{rng.randrange(40)}.{rng.randrange(9)}")
        line = _access(t + timedelta(seconds=span * total / size), client, f"/repos/rhel9/{repo}",
                       rng.choice((200, 200, 200, 304, 404)), rng.randrange(1000, 90_000_000), DNF_AGENT)
        lines.append(line)
        total += len(line)
    return "".join(lines)


def access_log(path: Path, size: int, now: datetime, seed: int = 30, install: bool = True) -> int:
    """Write about `size` bytes of nginx access log ending at `now`; the bytes written."""
    rng = random.Random(seed)
    tail = "".join(install_access(now - timedelta(minutes=9), rng)) if install else ""
    with path.open("w") as fh:
        fh.write(other_access(now - timedelta(days=3), size - len(tail), seed,
                              span=timedelta(days=3).total_seconds() - 660))
        fh.write(tail)
        return fh.tell()


def appended_dnsmasq(t: datetime, size: int, seed: int = 31) -> str:
    """About `size` bytes of dnsmasq log after `t`: renewals of the nodes (what a later look finds)."""
    rng = random.Random(seed)
    all_nodes = nodes()
    out: list[str] = []
    total, i = 0, 0
    while total < size:
        name, mac, ip = all_nodes[i % len(all_nodes)]
        out.append(exchange(t, rng.randrange(1 << 31), mac, ip, name))
        total += len(out[-1])
        i += 1
    return "".join(out)
