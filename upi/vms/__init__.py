"""boot-vms: the control-plane VMs through libvirt (define, start, shepherd, destroy).

`upi wait` retires the bootstrap with `destroy_vm(inv, inv.bootstrap.name)`.
"""

from upi.vms.boot import BootResult, DestroyResult, boot_vms, destroy_vm, watch_vms
from upi.vms.libvirt_ops import Connections
from upi.vms.plan import Action, VmPlan
from upi.vms.status import Report, StatusBoard, VmEvent

__all__ = [
    "Action",
    "BootResult",
    "Connections",
    "DestroyResult",
    "Report",
    "StatusBoard",
    "VmEvent",
    "VmPlan",
    "boot_vms",
    "destroy_vm",
    "watch_vms",
]
