"""Racks behind DHCP relays and per-node bonds/VLANs (issue 30; docs/networking.md).

What the inventory's machine networks and `network:` become (install-config,
dnsmasq, the PXE files), and every malformed layout refused by validate with
FILE:LINE: field, exit 2, before any file is written. The real programs that
read these outputs run in tests/test_netargs_nm.py (nm-initrd-generator) and
tests/test_relay.py (dnsmasq behind a relay, in network namespaces).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path
from test_broken_inventories import Case, _broken

from upi.cli import app
from upi.facts.boot import boot_entries
from upi.inventory import load_inventory

M0 = '  - {name: master-0, role: master, mac: "52:54:00:40:00:21", ip: 10.40.0.21}'
R1_BOND = "      bond: {members: [enp41s0f1np1, enp170s0f1np1], mode: 802.3ad, lacp_rate: fast, miimon: 100}"
R1_MTU = "      mtu: 9000\n  - name: dgx-r2-0"
R3_VLAN = "      vlan: 120\n"
R3_BOND = "      bond: {members: [enp41s0f1np1, enp170s0f1np1], mode: 802.3ad, lacp_rate: fast}"
R4_BOND = ("      bond: {name: bond1, members: [enp41s0f1np1, enp170s0f1np1], mode: active-backup, "
           "miimon: 50}")


def _rack(id: str, old: str, new: str, line: int, field: str, fragment: str) -> Case:
    return Case(id, old, new, line, field, fragment, base="racks")


CASES = [
    # Machine networks.
    _rack("node-outside-every-network", "    ip: 10.40.2.10", "    ip: 10.41.2.10", 52, "nodes[5].ip",
          "10.41.2.10 is outside every machine network (10.40.0.0/24, 10.40.1.0/24, 10.40.2.0/24, "
          "10.40.3.0/24, 10.40.4.0/24)"),
    _rack("rack-overlaps-rack", "cidr: 10.40.3.0/24", "cidr: 10.40.2.128/25", 19,
          "network.machine_networks[2].cidr", "10.40.2.128/25 overlaps machine_networks[1] 10.40.2.0/24"),
    _rack("rack-overlaps-machine-cidr", "cidr: 10.40.1.0/24, gateway: 10.40.1.1, relay: 10.40.1.2",
          "cidr: 10.40.0.0/23, gateway: 10.40.1.1, relay: 10.40.1.2", 17,
          "network.machine_networks[0].cidr", "10.40.0.0/23 overlaps machine_cidr 10.40.0.0/24"),
    _rack("rack-overlaps-cluster-network", "cidr: 10.40.4.0/24, gateway: 10.40.4.1}",
          "cidr: 10.128.4.0/24, gateway: 10.128.4.1}", 20, "network.machine_networks[3].cidr",
          "cluster network must not overlap with any of the machine networks"),
    _rack("relay-outside-its-network", "relay: 10.40.1.2}", "relay: 10.40.9.2}", 17,
          "network.machine_networks[0].relay", "10.40.9.2 is not a host address of 10.40.1.0/24"),
    _rack("relay-is-broadcast", "relay: 10.40.1.2}", "relay: 10.40.1.255}", 17,
          "network.machine_networks[0].relay", "10.40.1.255 is not a host address of 10.40.1.0/24"),
    _rack("rack-gateway-outside", "gateway: 10.40.2.1,", "gateway: 10.40.20.1,", 18,
          "network.machine_networks[1].gateway", "10.40.20.1 is not a host address of 10.40.2.0/24"),
    _rack("rack-names-twice", "{name: rack2,", "{name: rack1,", 18, "network.machine_networks[1].name",
          "'rack1' is already the name of machine_networks[0]"),
    _rack("node-on-relay-address", "    ip: 10.40.1.10", "    ip: 10.40.1.2", 43, "nodes[4].ip",
          "10.40.1.2 is the address of the relay of machine_networks[0]"),
    _rack("node-on-rack-gateway", "    ip: 10.40.4.10", "    ip: 10.40.4.1", 71, "nodes[7].ip",
          "10.40.4.1 is the address of the gateway of machine_networks[3]"),
    _rack("rack-cidr-not-a-network", "cidr: 10.40.2.0/24", "cidr: 10.40.2.0/33", 18,
          "network.machine_networks[1].cidr", "is not an IPv4 network"),
    _rack("rack-named-as-the-interface", "{name: rack3,", "{name: eno1,", 19,
          "network.machine_networks[2].name", "'eno1' is a tag dnsmasq sets itself"),
    _rack("rack-named-known", "{name: rack2,", "{name: known,", 18, "network.machine_networks[1].name",
          "'known' is a tag dnsmasq sets itself"),
    # Network arguments written by hand (no network:), read as dracut will.
    _rack("raw-bond-mode-typo", M0, M0[:-1] + ", kernel_args: ['bond=bond0:ens1f0,ens1f1:mode=802.3ab']}", 37,
          "nodes[1].kernel_args[0]", "mode '802.3ab' is not a bonding mode"),
    _rack("raw-bond-option-typo", M0, M0[:-1] + ", kernel_args: ['bond=bond0:ens1f0,ens1f1:lacp_rat=fast']}",
          37, "nodes[1].kernel_args[0]", "'lacp_rat' is not a bonding option"),
    _rack("raw-ip-method-typo", M0, M0[:-1] + ", kernel_args: ['ip=10.40.0.21::10.40.0.1:255.255.255.0:"
          "master-0:ens3:nonee']}", 37, "nodes[1].kernel_args[0]", "'nonee' is not an ip= method"),
    _rack("raw-ip-short-static", M0, M0[:-1] + ", kernel_args: ['ip=10.40.0.21::10.40.0.1:255.255.255.0']}",
          37, "nodes[1].kernel_args[0]", "the static form is ip=<ip>::<gateway>:<netmask>"),
    _rack("raw-vlan-without-parent", M0, M0[:-1] + ", kernel_args: ['vlan=ens3.120']}", 37,
          "nodes[1].kernel_args[0]", "vlan= is <vlan interface>:<parent interface>"),
    # A node's network: the typos admins make.
    _rack("bond-mode-typo", "mode: 802.3ad, lacp_rate: fast, miimon: 100",
          "mode: 802.3ab, lacp_rate: fast, miimon: 100", 47, "nodes[4].network.bond.mode",
          "'802.3ab' is not one of 'balance-rr', 'active-backup'"),
    _rack("lacp-rate-typo", "lacp_rate: fast, miimon: 100", "lacp_rate: quick, miimon: 100", 47,
          "nodes[4].network.bond.lacp_rate", "'quick' is not one of 'slow' or 'fast'"),
    _rack("lacp-rate-without-lacp", R4_BOND, R4_BOND.replace("miimon: 50", "miimon: 50, lacp_rate: fast"),
          75, "nodes[7].network.bond.lacp_rate", "lacp_rate applies only to mode 802.3ad (LACP)"),
    _rack("bond-key-typo", R1_BOND, R1_BOND.replace("lacp_rate", "lacp-rate"), 47,
          "nodes[4].network.bond.lacp-rate", "unknown key"),
    _rack("member-twice", R1_BOND, R1_BOND.replace("enp170s0f1np1", "enp41s0f1np1"), 47,
          "nodes[4].network.bond.members[1]", "enp41s0f1np1 is listed twice"),
    _rack("member-is-the-bond", R4_BOND, R4_BOND.replace("members: [enp41s0f1np1", "members: [bond1"),
          75, "nodes[7].network.bond.members[0]", "bond1 is the bond itself"),
    _rack("member-name-too-long", R1_BOND, R1_BOND.replace("enp170s0f1np1", "enp170s0f1np1xyz"), 47,
          "nodes[4].network.bond.members[1]", "is not a network interface name"),
    _rack("bond-without-members", R1_BOND, "      bond: {members: []}", 47,
          "nodes[4].network.bond.members", "must list at least 1 item"),
    _rack("miimon-negative", "miimon: 100}", "miimon: -1}", 47, "nodes[4].network.bond.miimon",
          "out of range: it must be at least 0"),
    _rack("vlan-out-of-range", R3_VLAN, "      vlan: 4095\n", 66, "nodes[6].network.vlan",
          "out of range: it must be at most 4094"),
    _rack("vlan-as-text", R3_VLAN, '      vlan: "120"\n', 66, "nodes[6].network.vlan",
          "is quoted, so it is text; write the number without quotes"),
    # A bond name so long that its VLAN interface passes Linux's 15 characters.
    _rack("vlan-name-too-long", R3_BOND + "\n      vlan",
          R3_BOND.replace("{members", "{name: bond-in-band0, members") + "\n      vlan", 66,
          "nodes[6].network.vlan",
          "the VLAN interface bond-in-band0.120 would be longer than 15 characters"),
    _rack("mtu-too-big", R1_MTU, "      mtu: 90000\n  - name: dgx-r2-0", 48, "nodes[4].network.mtu",
          "out of range: it must be at most 9216"),
    _rack("dns-not-an-address", "      dns: [10.40.0.10, 10.40.255.53]", "      dns: [10.40.0.10, ns1]", 57,
          "nodes[5].network.dns[1]", "is not an IPv4 address"),
    _rack("address-method-typo", "      address: dhcp", "      address: dchp", 76,
          "nodes[7].network.address", "'dchp' is not one of 'static' or 'dhcp'"),
    _rack("bond-and-interface", R1_MTU, "      mtu: 9000\n      interface: eno1\n  - name: dgx-r2-0", 46,
          "nodes[4].network", "name either a bond (bond: {members: [...]}) or one interface, not both"),
    _rack("neither-bond-nor-interface", R4_BOND + "\n", "", 74, "nodes[7].network",
          "name either a bond (bond: {members: [...]}) or one interface, not both"),
    _rack("kernel-arg-conflicts-with-network", f"    gpu: true\n    network:\n{R3_BOND}\n      vlan",
          f"    gpu: true\n    kernel_args: [console=ttyS1, bond=bond0:eno1]\n    network:\n{R3_BOND}\n"
          "      vlan", 64,
          "nodes[6].kernel_args[1]", "'bond=bond0:eno1' conflicts with network: (upi writes bond= from it)"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_rack_inventory_exits_2_naming_file_line_and_field(runner, tmp_path: Path, case: Case) -> None:
    path = _broken(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    where = f"{path}:{case.line}: {case.field}: "
    lines = [ln for ln in result.output.splitlines() if where in ln]
    assert lines, f"no problem at {where!r} in:\n{result.output}"
    assert any(case.fragment in ln for ln in lines), result.output


@pytest.mark.parametrize("case", [c for c in CASES if c.id in ("relay-outside-its-network", "bond-mode-typo",
                                                               "kernel-arg-conflicts-with-network")],
                         ids=lambda c: c.id)
def test_render_of_a_broken_rack_inventory_writes_nothing(runner, tmp_path: Path, case: Case) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(_broken(tmp_path, case)), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert not out.exists()


def test_install_config_lists_every_machine_network(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("racks")), "-o", str(out)]).exit_code == 0
    doc = yaml.safe_load((out / "install-config.yaml").read_text())
    assert doc["networking"]["machineNetwork"] == [
        {"cidr": c} for c in ("10.40.0.0/24", "10.40.1.0/24", "10.40.2.0/24", "10.40.3.0/24", "10.40.4.0/24")]


def test_dnsmasq_serves_each_rack_with_its_own_range_and_router(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("racks")), "-o", str(out)]).exit_code == 0
    lines = (out / "dnsmasq" / "dhcp-pxe.conf").read_text().splitlines()
    ranges = [ln for ln in lines if ln.startswith("dhcp-range=")]
    routers = [ln for ln in lines if "option:router" in ln]
    assert ranges == ["dhcp-range=set:machine,10.40.0.0,static,255.255.255.0,12h"] + [
        f"dhcp-range=set:rack{n},10.40.{n}.0,static,255.255.255.0,12h" for n in range(1, 5)]
    assert routers == ["dhcp-option=tag:machine,option:router,10.40.0.1"] + [
        f"dhcp-option=tag:rack{n},option:router,10.40.{n}.1" for n in range(1, 5)]
    # The boot files and the DNS server are the same for every rack: untagged.
    assert "dhcp-boot=tag:efi-x86_64,grubx64.efi" in lines
    assert "dhcp-option=option:dns-server,10.40.0.10" in lines


def test_one_network_renders_untagged_as_before(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)]).exit_code == 0
    text = (out / "dnsmasq" / "dhcp-pxe.conf").read_text()
    assert "dhcp-range=10.33.3.0,static,255.255.255.0,12h\ndhcp-option=option:router,10.33.3.1\n" in text
    assert "set:" not in text.replace("set:efi-x86_64", "")


def _args(name: str) -> dict[str, tuple[str, ...]]:
    return {e.node.name: e.args for e in boot_entries(load_inventory(inventory_path(name)))}


def test_network_becomes_bond_vlan_ip_and_nameserver_arguments() -> None:
    args = _args("racks")
    assert args["dgx-r1-0"][3:7] == (
        "bond=bond0:enp41s0f1np1,enp170s0f1np1:mode=802.3ad,lacp_rate=fast,miimon=100:9000",
        "ip=10.40.1.10::10.40.1.1:255.255.255.0:dgx-r1-0:bond0:none:9000",
        "nameserver=10.40.0.10", "console=tty0")
    assert "nameserver=10.40.255.53" in args["dgx-r2-0"]
    assert "vlan=bond0.120:bond0" in args["dgx-r3-0"]
    assert "ip=10.40.3.10::10.40.3.1:255.255.255.0:dgx-r3-0:bond0.120:none:9000" \
        in args["dgx-r3-0"]
    assert "ip=bond1:dhcp" in args["dgx-r4-0"]
    assert "bond=bond1:enp41s0f1np1,enp170s0f1np1:mode=active-backup,miimon=50" in args["dgx-r4-0"]
    # Nodes without network: are unchanged.
    assert not any(a.startswith(("ip=", "bond=", "nameserver=")) for a in args["master-0"])


def test_legacy_install_takes_network_instead_of_ip_dhcp(tmp_path: Path) -> None:
    text = inventory_path("legacy-4.3").read_text()
    old = 'ip: 10.33.3.44,'
    assert text.count(old) == 1
    text = text.replace(old, old + " network: {interface: enp1s0f0, vlan: 33},")
    path = _broken(tmp_path, Case("legacy", "", "", 0, None, "", base="legacy-4.3"))
    path.write_text(text)
    args = next(e.args for e in boot_entries(load_inventory(path)) if e.node.ip.packed[-1] == 44)
    assert "ip=dhcp" not in args
    assert "vlan=enp1s0f0.33:enp1s0f0" in args
    assert any(a.startswith("ip=10.33.3.44::10.33.3.1:255.255.255.0:") and a.endswith(":enp1s0f0.33:none")
               for a in args)


def test_raw_network_arguments_that_dracut_takes_pass(runner, tmp_path: Path) -> None:
    args = ("['ip=10.40.0.21::10.40.0.1:255.255.255.0:master-0:ens3:none:9000', 'nameserver=10.40.0.10', "
            "'bond=bond0:ens1f0,ens1f1:mode=4,xmit_hash_policy=layer3+4,miimon=100', "
            "'vlan=bond0.7:bond0', 'ip=ens4:dhcp:1500', 'rd.neednet=1']")
    path = _broken(tmp_path, _rack("fine", M0, M0[:-1] + f", kernel_args: {args}}}", 0, "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


def test_dns_without_the_provisioner_is_a_warning(runner, tmp_path: Path) -> None:
    case = _rack("dns", "      dns: [10.40.0.10, 10.40.255.53]", "      dns: [10.40.255.53]", 0, "", "")
    path = _broken(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "dgx-r2-0: network.dns does not list the provisioner 10.40.0.10" in result.output


def test_schema_shows_the_rack_and_node_network_keys(runner) -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    defs = json.loads(result.output)["$defs"]
    assert set(defs["MachineNetwork"]["properties"]) == {"cidr", "gateway", "relay", "name"}
    assert "machine_networks" in defs["Network"]["properties"]
    assert set(defs["NodeNetwork"]["properties"]) == {"interface", "bond", "vlan", "address", "dns", "mtu"}
    assert set(defs["Bond"]["properties"]) == {"name", "members", "mode", "lacp_rate", "miimon"}
    assert defs["Bond"]["properties"]["mode"]["description"].startswith("Bonding mode")


def test_status_takes_a_rack_address_for_a_machine_that_could_be_a_node() -> None:
    """`upi status` reports unknown clients of the machine networks: the racks are machine networks too."""
    from upi.status.stages import machine_ip

    ours = machine_ip(load_inventory(inventory_path("racks")))
    assert ours("10.40.3.99") and ours("10.40.0.99")
    assert not ours("10.41.0.5")  # a client from elsewhere
    assert not ours("10.40.0.10")  # the provisioner itself


def test_validate_names_each_nodes_machine_network(runner) -> None:
    result = runner.invoke(app, ["validate", str(inventory_path("racks")), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["machine_networks"][0] == {"name": "machine", "cidr": "10.40.0.0/24", "gateway": "10.40.0.1",
                                          "relay": None}
    assert doc["machine_networks"][4] == {"name": "rack4", "cidr": "10.40.4.0/24", "gateway": "10.40.4.1",
                                          "relay": "10.40.4.1"}
    assert {n["name"]: n["network"] for n in doc["nodes"]}["dgx-r3-0"] == "rack3"
    text = runner.invoke(app, ["validate", str(inventory_path("racks"))]).output
    assert "rack1 10.40.1.0/24 (relay 10.40.1.2)" in text
    one = json.loads(runner.invoke(app, ["validate", str(inventory_path("dgxpod")), "--json"]).output)
    assert "machine_networks" not in one and "network" not in one["nodes"][0]


def test_status_follows_a_stranger_on_a_rack_in_the_access_log(tmp_path: Path) -> None:
    """The status reader's fast search keys on every machine network, the racks' too: a machine
    on a rack that no node is (reported under the table) is found like one on machine_cidr."""
    from datetime import datetime

    from upi.remote import LocalTransport
    from upi.status.follow import Follower

    inv = load_inventory(inventory_path("racks"))
    log = tmp_path / "access.log"
    log.write_text("".join(
        f'{ip} - - [27/Nov/2026:08:00:0{i} +0000] "GET /index.html HTTP/1.1" 404 153 "-" "curl/8"\n'
        for i, ip in enumerate(("10.99.0.7", "10.40.0.99", "10.40.3.99", "10.41.3.99"))))
    events = Follower(inv, "access", str(log)).look(LocalTransport(), datetime.now().astimezone())
    assert [e.ip for e in events] == ["10.40.0.99", "10.40.3.99"]
