"""Derived facts, each computed once from the inventory.

`render` formats them, `check` verifies them, `boot-vms`, `approve-csr` and
`push` act on them: never a second copy of a record list.
"""

from upi.facts.boot import BootEntry, artifact_url, boot_entries, ignition_url
from upi.facts.dns import DnsRecord, HostEntry, dns_records, host_entries
from upi.facts.identity import NodeIdentity, node_identities
from upi.facts.lb import Backend, Pool, lb_pools
from upi.facts.vm import VmSpec, vm_specs

__all__ = [
    "Backend",
    "BootEntry",
    "DnsRecord",
    "HostEntry",
    "NodeIdentity",
    "Pool",
    "VmSpec",
    "artifact_url",
    "boot_entries",
    "dns_records",
    "host_entries",
    "ignition_url",
    "lb_pools",
    "node_identities",
    "vm_specs",
]
