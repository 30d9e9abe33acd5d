"""One row per node: when it reached each install stage, where it is now, and why it may be stuck.

A stage is reached when a log or the API shows it: the node's MAC got its
DHCP lease; its IP fetched its per-MAC PXE file, then the kernel and
initramfs over TFTP; its ignition file and the rootfs over HTTP; upi
recorded it installed; its client and serving CSRs exist; its Node is Ready;
its GPUs are allocatable. The current stage is the last one reached.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from upi.facts.boot import BootEntry, boot_entries, tftp_path
from upi.inventory.model import Inventory, Node, Role
from upi.inventory.segments import segments
from upi.status.logs import Event

STAGES: tuple[tuple[str, str], ...] = (
    ("dhcp", "DHCP"), ("pxe", "PXE file"), ("kernel", "kernel+initrd"), ("ignition", "ignition"),
    ("rootfs", "rootfs"), ("installed", "installed"), ("client_csr", "client CSR"),
    ("serving_csr", "serving CSR"), ("ready", "Ready"), ("gpu", "GPU"),
)
STAGE_NAMES = dict(STAGES)
# What to look at when a node has been stuck before a stage (the next one it lacks).
CAUSES: dict[str, tuple[str, ...]] = {
    "dhcp": ("no DHCP lease: is the node's `mac` in the inventory right, and is its NIC cabled "
             "to the provisioner's network (VLAN, switch port)?",),
    "pxe": ("a lease but no PXE file: the firmware boots in the other mode (`firmware`: bios or "
            "uefi) or TFTP (UDP 69) is blocked; upi check tftp",),
    "kernel": ("the boot loader ran but fetched no kernel and initramfs: are they under the TFTP "
               "root (upi images; upi check tftp)?",),
    "ignition": ("no ignition fetched: is http_base_url reachable from the node (upi check http)?",),
    "rootfs": ("no rootfs fetched: is rhcos.rootfs on the HTTP server (upi images; upi check http)?",),
    "installed": ("the installer is writing the disk, or failed: watch the node's console",),
    "client_csr": ("no client CSR: can the node reach api-int:6443 and the machine-config server "
                   "(22623) through the load balancer (upi check lb)?",),
    "serving_csr": ("client CSR not approved yet: upi approve-csr",),
    "ready": ("serving CSR not approved yet (upi approve-csr), or the node's network is not up",),
    "gpu": ("GPUs not verified: upi gpu",),
}
IGNITION_404 = "its ignition file was not found on the HTTP server (HTTP 404): run upi push"
IGNITION_OLD = ("the ignition files are older than 24 h: their certificates have expired; "
                "create them again (upi ignition) and push them (upi push)")


@dataclass
class Row:
    """One node's stages (name -> time, None when the time is unknown), current stage and causes."""

    name: str
    role: str
    mac: str
    ip: str
    stages: dict[str, datetime | None] = field(default_factory=dict)
    applicable: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    current: str = "-"
    since: datetime | None = None
    stuck: bool = False
    causes: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """The node reached its last stage (Ready; GPU on a GPU node; installed for the bootstrap)."""
        return bool(self.applicable) and self.applicable[-1] in self.stages


@dataclass(frozen=True)
class Stranger:
    """A MAC or IP in the logs that no inventory node has."""

    what: str  # "mac" | "ip"
    value: str
    first: datetime
    seen: str  # what it did: "DHCP refused", "TFTP pxelinux.0", "HTTP /ignition/worker.ign 200"


@dataclass(frozen=True)
class Cluster:
    """What the API says, by node name: CSR creation times, Ready since, GPUs verified."""

    client_csr: Mapping[str, datetime | None] = field(default_factory=dict)
    serving_csr: Mapping[str, datetime | None] = field(default_factory=dict)
    ready: Mapping[str, datetime | None] = field(default_factory=dict)
    gpu: Mapping[str, datetime | None] = field(default_factory=dict)


def applicable_stages(inv: Inventory, node: Node) -> tuple[str, ...]:
    """The node's stages: rootfs only with a live rootfs (4.6+), GPU only on GPU nodes.

    The bootstrap ends at installed: it runs bootkube from its disk and never
    joins the cluster it starts (no CSR, no Node).
    """
    skip = set()
    if not inv.live_rootfs:
        skip.add("rootfs")
    if not node.gpu:
        skip.add("gpu")
    if node.role is Role.bootstrap:
        skip |= {"client_csr", "serving_csr", "ready"}
    return tuple(key for key, _ in STAGES if key not in skip)


def keep_first(stages: dict[str, datetime | None], key: str, when: datetime | None) -> None:
    """Record `key` at `when` unless it is recorded at an earlier (known) time already."""
    old = stages.get(key)
    if key not in stages or (when is not None and (old is None or when < old)):
        stages[key] = when


def build_rows(inv: Inventory, events: Iterable[Event], *, installed: Mapping[str, datetime | None],
               cluster: Cluster, now: datetime, threshold: float, ignition_age: float | None = None,
               ) -> tuple[list[Row], list[Stranger]]:
    """Rows in inventory order, and the strangers the logs show.

    `threshold`: seconds at one stage before a node counts as stuck;
    `ignition_age`: seconds since the ignition files were made, when known.
    """
    entries = {e.node.name: e for e in boot_entries(inv)}
    rows = {n.name: Row(n.name, n.role.value, n.mac, str(n.ip), applicable=applicable_stages(inv, n))
            for n in inv.nodes}
    by_mac = {n.mac.lower(): n.name for n in inv.nodes}
    by_ip = {str(n.ip): n.name for n in inv.nodes}
    ours = _machine_ip(inv)
    rootfs = [tftp_path(a).rsplit("/", 1)[-1] for a in (inv.rhcos.rootfs, inv.rhcos.image) if a]
    strangers: dict[tuple[str, str], Stranger] = {}
    loaded: dict[str, dict[str, datetime]] = {}  # node -> kernel/initrd -> when
    earliest: datetime | None = None
    for ev in events:
        earliest = ev.time if earliest is None or ev.time < earliest else earliest
        name = by_mac.get((ev.mac or "").lower()) if ev.mac else by_ip.get(ev.ip or "")
        if name is None:
            _stranger(strangers, ev, ours)
            continue
        _apply(rows[name], entries[name], ev, loaded.setdefault(name, {}), rootfs)
    for name, parts in loaded.items():
        if len(parts) == 2:
            keep_first(rows[name].stages, "kernel", max(parts.values()))
    for name, row in rows.items():
        for key, source in (("installed", installed), ("client_csr", cluster.client_csr),
                            ("serving_csr", cluster.serving_csr), ("ready", cluster.ready),
                            ("gpu", cluster.gpu)):
            if name in source:
                keep_first(row.stages, key, source[name])
        _place(row, now, threshold, earliest, ignition_age)
    return list(rows.values()), sorted(strangers.values(), key=lambda s: (s.first, s.value))


def _apply(row: Row, entry: BootEntry, ev: Event, loaded: dict[str, datetime], rootfs: list[str]) -> None:
    """What one event of this node's says: a stage reached, or a note for the causes."""
    if ev.kind == "dhcp":
        keep_first(row.stages, "dhcp", ev.time)
    elif ev.kind == "tftp" and ev.path:
        if ev.path.endswith(entry.mac_name):
            keep_first(row.stages, "pxe", ev.time)
        for part, rel in (("kernel", entry.kernel), ("initrd", entry.initrd)):
            if ev.path.endswith("/" + rel) or ev.path == rel:
                loaded.setdefault(part, ev.time)
    elif ev.kind == "tftp-missing" and ev.path and not _probe(ev.path):
        if (note := f"TFTP: {ev.path} not found") not in row.notes:
            row.notes.append(note)
    elif ev.kind == "http" and ev.path and ev.status is not None:
        _apply_http(row, ev.path, ev.status, ev.time, rootfs)


def _probe(path: str) -> bool:
    """A name a loader looks for that may well be missing (not a problem).

    pxelinux's per-UUID and hex-IP files, GRUB's per-IP files and its module
    lists (x86_64-efi/command.lst).
    """
    parts = path.rsplit("/", 2)
    return (len(parts) > 1 and parts[-2] in ("pxelinux.cfg", "x86_64-efi", "i386-pc")) or \
        parts[-1].startswith("grub.cfg")


def _apply_http(row: Row, path: str, status: int, when: datetime, rootfs: list[str]) -> None:
    ok = 200 <= status < 300
    if path.endswith(".ign"):
        if ok:
            keep_first(row.stages, "ignition", when)
        elif status == 404 and IGNITION_404 not in row.notes:
            row.notes.append(IGNITION_404)
    elif ok and path.rsplit("/", 1)[-1] in rootfs:
        keep_first(row.stages, "rootfs", when)


def _machine_ip(inv: Inventory) -> Callable[[str], bool]:
    """Whether an address could be a node's: in the machine network, not the provisioner's or LB's.

    A client from elsewhere (the site's own users of a shared web server) is
    no misconfigured node: it is not reported.
    """
    nets = [s.cidr for s in segments(inv)]  # the racks behind relays too
    servers = {str(inv.provisioner.ip), str(inv.load_balancer.ip)}

    def could_be(ip: str) -> bool:
        try:
            address = ipaddress.ip_address(ip)
            return any(address in net for net in nets) and ip not in servers
        except ValueError:
            return False

    return could_be


def _stranger(strangers: dict[tuple[str, str], Stranger], ev: Event, ours: Callable[[str], bool]) -> None:
    if ev.mac:
        key = ("mac", ev.mac.lower())
        seen = {"dhcp-refused": "DHCP: no address for it", "dhcp-discover": "DHCP discover"}.get(
            ev.kind, f"DHCP lease {ev.ip}")
    elif ev.ip and ours(ev.ip):
        key = ("ip", ev.ip)
        seen = {"tftp": f"TFTP {ev.path}", "tftp-missing": f"TFTP {ev.path} (not found)"}.get(
            ev.kind, f"HTTP {ev.path} {ev.status}")
    else:
        return
    if key not in strangers:
        strangers[key] = Stranger(key[0], key[1], ev.time, seen)


def _place(row: Row, now: datetime, threshold: float, earliest: datetime | None,
           ignition_age: float | None) -> None:
    """Current stage, time there, and the likely causes when stuck past `threshold`."""
    reached = [k for k in row.applicable if k in row.stages]
    if reached:
        row.current = STAGE_NAMES[reached[-1]]
        row.since = row.stages[reached[-1]]
    else:
        row.current, row.since = "waiting", None
    if row.done:
        return
    start = row.since or (earliest if not reached else None)
    if start is None or (now - start).total_seconds() <= threshold:
        return
    row.stuck = True
    after = row.applicable.index(reached[-1]) + 1 if reached else 0
    missing = row.applicable[after]
    row.causes = [*row.notes, *CAUSES[missing]]
    if missing == "client_csr" and ignition_age is not None and ignition_age > 86400:
        row.causes.insert(0, IGNITION_OLD)
