"""Which VM nodes libvirt shows installed: switched to their disk, or powered off by their installer.

For `upi status`: read-only, one look per call. A VM in its install phase
(network boot first) that is shut off because the guest powered itself off
(VIR_DOMAIN_SHUTOFF_SHUTDOWN) has finished its install; one never started,
destroyed or crashed has not. A VM that boots from its disk (boot-vms
switched it after its install) is installed, running or not.

Nothing here may prompt: `upi status` runs from cron, a pipe or `--watch`
with nobody to answer; its connections are opened in batch mode
(libvirt_ops.no_prompt).
"""

from __future__ import annotations

from upi.errors import UpiError
from upi.inventory import Inventory
from upi.vms import libvirt_ops as ops
from upi.vms.boot import by_hypervisor
from upi.vms.plan import targets


def installed_vms(inv: Inventory, *, connect: str | None = None,
                  connections: ops.Connections | None = None) -> tuple[set[str], list[str]]:
    """The VM nodes installed per libvirt, and the hypervisors that could not be read (why).

    A domain without the node's MAC is another machine of that name: not counted.
    `connections` shares the caller's (left open); otherwise they are opened
    here, never prompting (batch mode), and closed.
    """
    groups = by_hypervisor(targets(inv, connect))
    if not groups:
        return set(), []
    libvirt = ops.libvirt_module()
    done: set[str] = set()
    unread: list[str] = []
    conns = connections or ops.Connections(batch=True)
    try:
        for uri, specs in groups.items():
            try:
                conn = conns.get(uri)
                for spec in specs:
                    dom = ops.lookup(conn, spec.name)
                    if dom is None:
                        continue
                    facts = ops.facts_of(dom)
                    state, reason = dom.state()
                    powered_off = state == ops.SHUTOFF and reason == libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN
                    if spec.mac.lower() in facts.macs and (not facts.install_phase or powered_off):
                        done.add(spec.name)
            except UpiError as exc:
                unread.append(str(exc))
            except libvirt.libvirtError as exc:
                unread.append(str(ops.failed(uri, "read the domains", exc)))
    finally:
        if connections is None:
            conns.close()
    return done, unread
