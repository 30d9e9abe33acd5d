"""boot-vms through the library against libvirt's test driver (shared connections per test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bootvms_support import domain_root, node_uri, require_libvirt, shut_off
from conftest import inventory_path

from upi.errors import VmError
from upi.facts import vm_specs
from upi.inventory import load_inventory
from upi.render import domain_xml
from upi.vms import Connections, VmEvent, boot_vms, destroy_vm
from upi.vms.plan import Action

VMS = ["bootstrap", "master-0", "master-1", "master-2"]


@pytest.fixture
def libvirt():
    return require_libvirt()


@pytest.fixture
def conns(libvirt):
    with Connections() as c:
        yield c


def test_every_vm_is_defined_from_its_spec_and_started(tmp_path: Path, conns, libvirt) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    result = boot_vms(inv, connect=uri, connections=conns)
    assert [p.action for p in result.plans] == [Action.create] * 4
    conn = conns.get(uri)
    assert sorted(d.name() for d in conn.listAllDomains()) == VMS
    dom = conn.lookupByName("bootstrap")
    assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
    root = domain_root(dom)
    assert [b.get("dev") for b in root.iterfind("os/boot")] == ["network", "hd"]
    assert root.find("devices/interface/mac").get("address") == "52:54:00:21:03:53"
    assert root.find("devices/interface/source").get("bridge") == "br0"
    assert root.find("os/loader") is None
    vol = conn.storageVolLookupByPath("/var/lib/libvirt/images/dgxpod-bootstrap.qcow2")
    assert vol.info()[1] == 100 * 1024**3  # capacity of the inventory size
    assert vol.info()[2] == 0  # sparse


def test_a_second_run_leaves_every_vm_alone(tmp_path: Path, conns) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    boot_vms(inv, connect=uri, connections=conns)
    events: list[VmEvent] = []
    result = boot_vms(inv, connect=uri, connections=conns, report=events.append)
    assert [p.action for p in result.plans] == [Action.keep] * 4
    assert [str(e) for e in events] == [
        f"{n}: exists (same name and MAC: left alone, running)" for n in VMS]


def test_uefi_vm_gets_the_pflash_loader(tmp_path: Path, conns, libvirt) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("compact"), check_files=False)
    boot_vms(inv, connect=uri, connections=conns)
    conn = conns.get(uri)
    uefi = domain_root(conn.lookupByName("cp-2"))
    loader = uefi.find("os/loader")
    assert loader is not None
    assert (loader.text, loader.get("type"), loader.get("readonly")) == (
        "/usr/share/OVMF/OVMF_CODE.fd", "pflash", "yes")
    bios = domain_root(conn.lookupByName("cp-0"))
    assert bios.find("os/loader") is None


def test_watch_boots_from_disk_each_vm_its_install_powered_off(tmp_path: Path, conns, libvirt) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    events: list[VmEvent] = []

    def simulate_install(event: VmEvent) -> None:
        events.append(event)
        if event.state == "installing":
            # RHCOS reboots at the end of its install; on_reboot=destroy powers the VM off.
            conns.get(uri).lookupByName(event.name).reboot()

    result = boot_vms(inv, connect=uri, watch=True, timeout=60, poll=0.05,
                      connections=conns, report=simulate_install)
    assert result.not_back == []
    for name in VMS:
        assert [e.state for e in events if e.name == name] == [
            "disk created", "defined", "started", "installing", "powered off", "switched",
            "started", "up"]
        dom = conns.get(uri).lookupByName(name)
        assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
        root = domain_root(dom)
        assert [b.get("dev") for b in root.iterfind("os/boot")] == ["hd"]
        assert root.findtext("on_reboot") == "restart"


def test_vms_on_different_hypervisors_each_land_on_their_own(tmp_path: Path, conns) -> None:
    src = inventory_path("dgxpod").read_text()
    kvm1, kvm2 = node_uri(tmp_path, name="kvm1"), node_uri(tmp_path, name="kvm2")
    text = src.replace("uri: qemu:///system", f"uri: {kvm1}").replace(
        'mac: "52:54:00:21:03:52", ip: 10.33.3.52',
        f'mac: "52:54:00:21:03:52", ip: 10.33.3.52, hypervisor: {{uri: "{kvm2}", bridge: br1}}')
    path = tmp_path / "split.yaml"
    path.write_text(text)
    result = boot_vms(load_inventory(path, check_files=False), connections=conns)
    assert {p.spec.name: p.spec.uri for p in result.plans}["master-2"] == kvm2
    assert sorted(d.name() for d in conns.get(kvm1).listAllDomains()) == VMS[:3]
    assert [d.name() for d in conns.get(kvm2).listAllDomains()] == ["master-2"]


def test_replace_redefines_a_differing_vm_on_a_fresh_disk(tmp_path: Path, conns, libvirt) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    boot_vms(inv, connect=uri, connections=conns)
    conn = conns.get(uri)
    old = conn.lookupByName("master-1")
    old.destroy()
    conn.defineXML(old.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).replace("br0", "br9"))
    with pytest.raises(VmError, match="master-1 on .*: domain exists but differs: bridge br9"):
        boot_vms(inv, connect=uri, connections=conns)
    result = boot_vms(inv, connect=uri, replace=True, connections=conns)
    assert {p.spec.name: p.action for p in result.plans}["master-1"] is Action.recreate
    root = domain_root(conn.lookupByName("master-1"))
    assert root.find("devices/interface/source").get("bridge") == "br0"


def test_destroy_removes_the_vm_and_its_disk(tmp_path: Path, conns, libvirt) -> None:
    uri = node_uri(tmp_path)
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    boot_vms(inv, connect=uri, connections=conns)
    gone = destroy_vm(inv, inv.bootstrap.name, connect=uri, connections=conns)
    assert (gone.domain_removed, gone.disk_removed) == (True, True)
    conn = conns.get(uri)
    assert sorted(d.name() for d in conn.listAllDomains()) == VMS[1:]
    with pytest.raises(libvirt.libvirtError):
        conn.storageVolLookupByPath("/var/lib/libvirt/images/dgxpod-bootstrap.qcow2")
    again = destroy_vm(inv, "bootstrap", connect=uri, connections=conns)
    assert (again.domain_removed, again.disk_removed) == (False, False)


def test_a_conflict_changes_nothing_on_any_vm(tmp_path: Path, conns) -> None:
    inv = load_inventory(inventory_path("dgxpod"), check_files=False)
    other = shut_off(domain_xml(vm_specs(inv)[0]).replace("52:54:00:21:03:53", "52:54:00:99:99:99"))
    uri = node_uri(tmp_path, other)
    with pytest.raises(VmError) as err:
        boot_vms(inv, connect=uri, connections=conns)
    assert str(err.value) == (
        f"nothing changed:\n  bootstrap on {uri}: domain exists but differs: MAC 52:54:00:99:99:99 "
        "(inventory 52:54:00:21:03:53) (--replace redefines it)")
    conn = conns.get(uri)
    assert [d.name() for d in conn.listAllDomains()] == ["bootstrap"]
    assert conn.storagePoolLookupByName("default").listVolumes() == []
