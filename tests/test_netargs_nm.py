"""Every rendered network argument set, parsed by NetworkManager's own nm-initrd-generator.

RHCOS's initramfs runs nm-initrd-generator over the kernel command line
(NetworkManager's src/nm-initrd-generator/nmi-cmdline-reader.c reads ip=,
bond=, vlan=, nameserver=); Debian's network-manager ships the same program.
`-s` prints the keyfiles to stdout instead of writing them ("*** Connection
'<id>' ***" then the keyfile), and an option it does not take is dropped with
a `<warn>` line on stderr. The tests read the command line from the rendered
GRUB files exactly as written and check each keyfile against the inventory.
"""

from __future__ import annotations

import configparser
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path, require_path

from upi.cli import app
from upi.inventory import load_inventory
from upi.inventory.model import Inventory, Node
from upi.inventory.nodenet import AddressMethod
from upi.inventory.segments import segment_of, segments
from upi.runner import run

NM_INITRD_GENERATOR = "/usr/lib/NetworkManager/nm-initrd-generator"
_HEADER = re.compile(r"^\*\*\* Connection '([^']+)' \*\*\*$", re.MULTILINE)
# Variants beyond the example inventory's: one NIC, VLAN over DHCP, no LACP, 3 DNS servers.
VARIANTS: dict[str, dict[str, object]] = {
    "dgx-r1-0": {"interface": "enp41s0f1np1", "mtu": 1500},
    "dgx-r2-0": {"interface": "eno1", "vlan": 4094, "address": "dhcp", "mtu": 9000},
    "dgx-r3-0": {"bond": {"name": "bond7", "members": ["ens1f0", "ens1f1", "ens2f0"],
                          "mode": "balance-alb", "miimon": 0},
                 "dns": ["10.40.0.10", "10.40.255.53", "10.40.255.54"]},
    "dgx-r4-0": {"bond": {"members": ["ens1f0", "ens2f0"], "mode": "802.3ad", "lacp_rate": "slow"},
                 "vlan": 7, "address": "static"},
}


def generator() -> str:
    return str(require_path(NM_INITRD_GENERATOR, "NetworkManager's nm-initrd-generator"))


def keyfiles(args: list[str]) -> tuple[dict[str, configparser.ConfigParser], str]:
    """Connection id -> its keyfile, and the generator's stderr."""
    done = run([generator(), "-s", "--", *args], timeout=30)
    parts = _HEADER.split(done.stdout)
    out = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        keyfile = configparser.ConfigParser(interpolation=None)
        keyfile.read_string(body.split("\n*** ", 1)[0])
        out[name] = keyfile
    return out, done.stderr


def _rendered_args(out: Path, node: Node) -> list[str]:
    """The kernel command line of the node's rendered GRUB file, as GRUB would pass it."""
    text = (out / "tftp" / f"grub.cfg-01-{node.mac.replace(':', '-')}").read_text()
    line = next(ln.split() for ln in text.splitlines() if ln.strip().startswith("linux "))
    return line[2:]  # past `linux <kernel>`


def _expect(inv: Inventory, node: Node, nm: dict[str, configparser.ConfigParser]) -> None:
    net = node.network
    assert net is not None
    top = net.bond.name if net.bond else net.interface
    assert top is not None
    device = f"{top}.{net.vlan}" if net.vlan is not None else top
    if net.bond is not None:
        bond = nm[net.bond.name]
        assert bond["connection"]["type"] == "bond"
        assert bond["bond"]["mode"] == net.bond.mode.value
        assert bond["bond"]["miimon"] == str(net.bond.miimon)
        if net.bond.lacp_rate is not None:
            assert bond["bond"]["lacp_rate"] == net.bond.lacp_rate.value
        members = {n for n, k in nm.items() if k["connection"].get("slave-type") == "bond"
                   and k["connection"]["master"] == bond["connection"]["uuid"]}
        assert members == set(net.bond.members)
        if net.mtu:
            assert bond["ethernet"]["mtu"] == str(net.mtu)
    if net.vlan is not None:
        vlan = nm[device]
        assert vlan["connection"]["type"] == "vlan"
        assert (vlan["vlan"]["id"], vlan["vlan"]["parent"]) == (str(net.vlan), top)
    carrier = nm[device]
    assert carrier["connection"]["interface-name"] == device
    if net.mtu:
        assert carrier["ethernet"]["mtu"] == str(net.mtu)
    ipv4 = carrier["ipv4"]
    if net.address is AddressMethod.dhcp:
        assert ipv4["method"] == "auto"
    else:
        seg = segment_of(segments(inv), node.ip)
        assert seg is not None
        assert ipv4["method"] == "manual"
        assert ipv4["address1"] == f"{node.ip}/{seg.cidr.prefixlen},{seg.gateway}"
        assert ipv4["dhcp-hostname"] == node.name  # the name its DHCP lease hands out too
    dns = [str(s) for s in net.dns] or [str(inv.provisioner.ip)]
    assert ipv4["dns"] == "".join(f"{s};" for s in dns)


def _render(runner, path: Path, out: Path) -> Inventory:
    result = runner.invoke(app, ["render", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return load_inventory(path)


def _variant_inventory(tmp_path: Path) -> Path:
    base = inventory_path("racks")
    doc = yaml.safe_load(base.read_text())
    for node in doc["nodes"]:
        if node["name"] in VARIANTS:
            node["network"] = VARIANTS[node["name"]]
    for name in ("pull-secret.json", "id_rsa.pub"):
        shutil.copyfile(base.parent / name, tmp_path / name)
    path = tmp_path / "variants.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("source", ["racks", "variants"])
def test_nm_initrd_generator_builds_what_the_inventory_asked(runner, tmp_path: Path, source: str) -> None:
    generator()
    path = inventory_path("racks") if source == "racks" else _variant_inventory(tmp_path)
    inv = _render(runner, path, tmp_path / "out")
    checked = 0
    for node in inv.nodes:
        if node.network is None:
            continue
        nm, stderr = keyfiles(_rendered_args(tmp_path / "out", node))
        assert "<warn>" not in stderr, f"{node.name}: NetworkManager dropped part of it:\n{stderr}"
        _expect(inv, node, nm)
        checked += 1
    assert checked == 4


def test_nm_initrd_generator_warns_about_a_mangled_bond() -> None:
    """The `<warn>` check above has teeth: a bond= typo is dropped with a warning, not an error."""
    _, stderr = keyfiles(["bond=bond0:eno1,eno2:mode=802.3ab,lacp_rat=fast"])
    assert "invalid value '802.3ab' for option 'mode'" in stderr
    assert "invalid option 'lacp_rat'" in stderr
