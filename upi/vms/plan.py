"""What boot-vms would do to each VM: pure decisions over libvirt facts (no libvirt here)."""

from __future__ import annotations

import dataclasses
import posixpath
import xml.etree.ElementTree as ET  # noqa: S405 - parses libvirt's own XML, never user input
from dataclasses import dataclass, field
from enum import StrEnum

from upi.facts import VmSpec, vm_specs
from upi.inventory import Firmware, Inventory


class Action(StrEnum):
    """What happens to one VM."""

    create = "create"
    keep = "keep"
    recreate = "recreate"
    conflict = "conflict"


@dataclass(frozen=True)
class DomainFacts:
    """The parts of a defined libvirt domain that boot-vms compares and acts on."""

    name: str
    macs: tuple[str, ...]
    bridge: str | None
    disks: tuple[str, ...]
    vcpus: int
    memory_mib: int
    boot: tuple[str, ...]
    uefi: bool
    running: bool = False

    @property
    def install_phase(self) -> bool:
        """Network boot comes first: the VM has not yet been switched to its disk."""
        return bool(self.boot) and self.boot[0] == "network"


@dataclass(frozen=True)
class DiskFacts:
    """Where a VM's disk lives: the pool holding its directory, and whether it exists."""

    pool: str | None
    exists: bool


@dataclass(frozen=True)
class VmPlan:
    """One VM's decision, with the reasons a user reads."""

    spec: VmSpec
    action: Action
    existing: DomainFacts | None = None
    disk: DiskFacts | None = None
    problems: list[str] = field(default_factory=list)
    unchecked: str | None = None  # dry run only: why the hypervisor could not be asked

    @property
    def summary(self) -> str:
        """One line: what happens and why."""
        if self.problems:
            return "; ".join(self.problems)
        if self.unchecked:
            return (f"create a {self.spec.disk_gib} GiB disk, define, start (not checked against "
                    f"the hypervisor: {self.unchecked})")
        if self.action is Action.keep and self.existing:
            state = "running" if self.existing.running else "shut off"
            return f"same name and MAC: left alone, {state}"
        if self.action is Action.recreate:
            return f"remove the differing domain, create a fresh {self.spec.disk_gib} GiB disk, define, start"
        disk = "disk exists" if self.disk and self.disk.exists else (
            f"create {self.spec.disk_gib} GiB disk in pool {self.disk.pool}" if self.disk else "")
        return f"{disk}, define, start" if disk else "define, start"


def targets(inv: Inventory, connect: str | None = None) -> list[VmSpec]:
    """The VM specs of the inventory, every one on `connect` if given."""
    specs = vm_specs(inv)
    return [dataclasses.replace(s, uri=connect) for s in specs] if connect else specs


def parse_domain(xml: str, running: bool = False) -> DomainFacts:
    """DomainFacts from a domain's XML (libvirt's XMLDesc)."""
    root = ET.fromstring(xml)  # noqa: S314 - libvirt's own XML
    mem = root.find("memory")
    unit = (mem.get("unit", "KiB") if mem is not None else "KiB").lower()
    size = int(mem.text or 0) if mem is not None else 0
    factor = {"b": 1 / 1024**2, "bytes": 1 / 1024**2, "kib": 1 / 1024, "k": 1 / 1024,
              "mib": 1, "m": 1, "gib": 1024, "g": 1024}.get(unit, 1 / 1024)
    return DomainFacts(
        name=root.findtext("name", ""),
        macs=tuple(m.get("address", "").lower() for m in root.iterfind("devices/interface/mac")),
        bridge=next((s.get("bridge") for s in root.iterfind("devices/interface/source")
                     if s.get("bridge")), None),
        disks=tuple(s.get("file", "") for s in root.iterfind("devices/disk[@device='disk']/source")),
        vcpus=int(root.findtext("vcpu", "0")),
        memory_mib=int(size * factor),
        boot=tuple(b.get("dev", "") for b in root.iterfind("os/boot")),
        uefi=root.find("os/loader") is not None or root.find("os[@firmware='efi']") is not None,
        running=running,
    )


def differences(spec: VmSpec, dom: DomainFacts) -> list[str]:
    """How a defined domain differs from the inventory's spec (empty: it is the same VM)."""
    out = []
    if spec.mac.lower() not in dom.macs:
        out.append(f"MAC {', '.join(dom.macs) or 'none'} (inventory {spec.mac.lower()})")
    if dom.bridge != spec.bridge:
        out.append(f"bridge {dom.bridge} (inventory {spec.bridge})")
    if spec.disk_path not in dom.disks:
        out.append(f"disk {', '.join(dom.disks) or 'none'} (inventory {spec.disk_path})")
    if dom.vcpus != spec.vcpus:
        out.append(f"vcpus {dom.vcpus} (inventory {spec.vcpus})")
    if dom.memory_mib != spec.memory_mib:
        out.append(f"memory {dom.memory_mib} MiB (inventory {spec.memory_mib})")
    if dom.uefi != (spec.firmware is Firmware.uefi):
        out.append(f"firmware {'uefi' if dom.uefi else 'bios'} (inventory {spec.firmware.value})")
    return out


def decide(spec: VmSpec, existing: DomainFacts | None, disk: DiskFacts,
           mac_owner: str | None, *, replace: bool) -> VmPlan:
    """The plan for one VM, given what its hypervisor holds (`mac_owner`: another domain with its MAC)."""
    problems = []
    if mac_owner:
        problems.append(f"MAC {spec.mac} is already used by domain {mac_owner}")
    diff = differences(spec, existing) if existing else []
    if existing is not None and not diff:
        action = Action.keep
    elif existing is not None and not replace:
        action = Action.conflict
        problems.append("domain exists but differs: " + "; ".join(diff) + " (--replace redefines it)")
    else:
        action = Action.create if existing is None else Action.recreate
        if disk.pool is None and not disk.exists:
            directory = posixpath.dirname(spec.disk_path)
            problems.append(f"no active storage pool holds {directory} (define one: virsh "
                            f"pool-define-as NAME dir --target {directory}; virsh pool-start NAME)")
    return VmPlan(spec, Action.conflict if problems else action, existing, disk, problems)
