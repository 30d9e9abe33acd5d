"""VM specs of the control-plane VMs: rendered as domain XML and virt-install lines."""

from __future__ import annotations

from dataclasses import dataclass

from upi.inventory.model import Firmware, Inventory, Machine


@dataclass(frozen=True)
class VmSpec:
    """Everything libvirt needs to create one VM node."""

    name: str
    role: str
    uri: str
    bridge: str
    mac: str
    vcpus: int
    memory_mib: int
    disk_gib: int
    disk_path: str
    firmware: Firmware
    uefi_loader: str
    os_variant: str


def os_variant(inv: Inventory) -> str:
    """The osinfo name closest to RHCOS (osinfo-db has no rhcos): RHEL 9 from 4.13."""
    return "rhel9.0" if inv.cluster.version >= (4, 13) else "rhel8.0"


def vm_specs(inv: Inventory) -> list[VmSpec]:
    """One spec per `machine: vm` node, in inventory order."""
    out = []
    for node in inv.nodes:
        hv = inv.hypervisor_of(node)
        if node.machine_kind is not Machine.vm or hv is None:
            continue
        size = node.size
        out.append(
            VmSpec(
                name=node.name,
                role=node.role.value,
                uri=hv.uri,
                bridge=hv.bridge,
                mac=node.mac,
                vcpus=size.vcpus,
                memory_mib=size.memory_mib,
                disk_gib=size.disk_gib,
                disk_path=f"{hv.image_dir}/{inv.cluster.name}-{node.name}.qcow2",
                firmware=node.boot_firmware,
                uefi_loader=hv.uefi_loader,
                os_variant=os_variant(inv),
            )
        )
    return out
