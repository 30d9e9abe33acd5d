"""One row per node: when it reached each install stage, where it is now, and why it may be stuck.

A stage is reached when a log or the API shows it: the node's MAC got its
DHCP lease; its IP fetched its per-MAC PXE file, then the kernel and
initramfs over TFTP; then the files it fetches over HTTP, in the order a
real node asks for them; upi recorded it installed; its client and serving
CSRs exist; its Node is Ready; its GPUs are allocatable. The current stage
is the last one reached; the causes shown for a stuck node are those of
the first stage after it.

The HTTP order (each step checked against the upstream source):

- 4.6 and later (live PXE): the live initramfs fetches the rootfs
  (`coreos.live.rootfs_url`, curl in fedora-coreos-config's dracut module
  35coreos-live/coreos-livepxe-rootfs.sh) before it switches to it; only
  then does coreos-installer.service run in the live system and fetch
  the ignition file (coreos-installer's scripts/coreos-installer-service
  passes `coreos.inst.ignition_url` as `--ignition-url`; the installed image
  comes from the live system, no HTTP). So: rootfs, then ignition.
- Before 4.6 (`coreos.inst.image_url`): the installer fetches the ignition
  file first, then the metal image. The legacy script of RHCOS <= 4.4
  (coreos-installer's `legacy` branch, `main`: get_img_url, a HEAD of the
  image for its size, then get_ignition_url, then download_image); the Rust
  coreos-installer downloads the ignition before it opens the image
  (src/install.rs). So: ignition, then image.

Only a complete GET counts as a fetch: 2xx (not 206, a range), and, when the
file's size is known, every byte of it (the access log's body size: nginx's
$body_bytes_sent, httpd's %b, count what was sent before the client or the
link gave up). A HEAD fetches nothing (the legacy installer sends one before
the ignition). A 404, a 403 or a cut download is a note, shown with the
causes when the node is stuck before that file's stage.
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
    ("dhcp", "DHCP"), ("pxe", "PXE file"), ("kernel", "kernel+initrd"), ("rootfs", "rootfs"),
    ("ignition", "ignition"), ("image", "metal image"), ("installed", "installed"),
    ("client_csr", "client CSR"), ("serving_csr", "serving CSR"), ("ready", "Ready"), ("tuned", "tuned"),
    ("gpu", "GPU"), ("diagnosed", "diagnosed"),
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
    "rootfs": ("no rootfs fetched: the live initramfs fetches rhcos.rootfs first over HTTP: is it on "
               "the HTTP server (upi images; upi push) and http_base_url reachable from the node "
               "(upi check http)?",),
    "ignition": ("no ignition fetched: is it on the HTTP server (upi ignition; upi push) and "
                 "http_base_url reachable from the node (upi check http)?",),
    "image": ("no metal image fetched after the ignition: is rhcos.image on the HTTP server "
              "(upi images; upi push; upi check http)?",),
    "installed": ("the installer is writing the disk, or failed: watch the node's console",),
    "client_csr": ("no client CSR: can the node reach api-int:6443 and the machine-config server "
                   "(22623) through the load balancer (upi check lb)?",),
    "serving_csr": ("client CSR not approved yet: upi approve-csr",),
    "ready": ("serving CSR not approved yet (upi approve-csr), or the node's network is not up",),
    "tuned": ("not running the GPU pool's rendered config yet: upi gpu puts it in the pool, whose "
              "rollout reboots one node at a time (oc get mcp; the node's "
              "machineconfiguration.openshift.io/state annotation)",),
    "gpu": ("GPUs not verified: upi gpu",),
    "diagnosed": ("no passing DCGM diagnosis recorded: upi gpu runs it after verifying the GPUs",),
}
IGNITION_404 = "its ignition file was not found on the HTTP server (HTTP 404): run upi push"
IGNITION_403 = ("the HTTP server refused its ignition file (HTTP 403): the server may not read it "
                "(file mode, or SELinux label httpd_sys_content_t): run upi push, which sets both")
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
    notes: list[str] = field(default_factory=list)  # every note, in the order found
    stage_notes: dict[str, list[str]] = field(default_factory=dict)  # the same, by the stage they block
    current: str = "-"
    since: datetime | None = None
    stuck: bool = False
    causes: list[str] = field(default_factory=list)

    def note(self, stage: str, text: str) -> None:
        """Keep `text` (once) as a likely cause of a node stuck before `stage`."""
        if text not in self.notes:
            self.notes.append(text)
            self.stage_notes.setdefault(stage, []).append(text)

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
    tuned: Mapping[str, datetime | None] = field(default_factory=dict)  # on the GPU pool's rendered config
    diagnosed: Mapping[str, datetime | None] = field(default_factory=dict)  # last DCGM diagnosis passed
    notes: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # node -> (stage, note)


def applicable_stages(inv: Inventory, node: Node) -> tuple[str, ...]:
    """The node's stages: rootfs with a live rootfs (4.6+), else the metal image; GPU only on GPU nodes.

    The bootstrap ends at installed: it runs bootkube from its disk and never
    joins the cluster it starts (no CSR, no Node).
    """
    skip = {"image"} if inv.live_rootfs else {"rootfs"}
    if not node.gpu:
        skip |= {"tuned", "gpu", "diagnosed"}
    elif not diagnosed_here(inv, node):
        skip.add("diagnosed")
    if node.role is Role.bootstrap:
        skip |= {"client_csr", "serving_csr", "ready"}
    return tuple(key for key, _ in STAGES if key not in skip)


def diagnosed_here(inv: Inventory, node: Node) -> bool:
    """Whether upi gpu diagnoses the node: a diagnosis level is set and its GPUs are not in MIG mode."""
    from upi.inventory.gpupool import pool_settings

    mig = bool(node.mig_config) and node.mig_config != "all-disabled"
    return pool_settings(inv).diagnosis_level > 0 and not mig


def keep_first(stages: dict[str, datetime | None], key: str, when: datetime | None) -> None:
    """Record `key` at `when` unless it is recorded at an earlier (known) time already."""
    old = stages.get(key)
    if key not in stages or (when is not None and (old is None or when < old)):
        stages[key] = when


def build_rows(inv: Inventory, events: Iterable[Event], *, installed: Mapping[str, datetime | None],
               cluster: Cluster, now: datetime, threshold: float, ignition_age: float | None = None,
               sizes: Mapping[str, int] | None = None) -> tuple[list[Row], list[Stranger]]:
    """Rows in inventory order, and the strangers the logs show.

    `threshold`: seconds at one stage before a node counts as stuck;
    `ignition_age`: seconds since the ignition files were made, when known;
    `sizes`: the size of a file the nodes fetch over HTTP, by its name
    (`worker.ign`, the rootfs's), when known: a GET that sent fewer bytes was cut.
    """
    entries = {e.node.name: e for e in boot_entries(inv)}
    rows = {n.name: Row(n.name, n.role.value, n.mac, str(n.ip), applicable=applicable_stages(inv, n))
            for n in inv.nodes}
    by_mac = {n.mac.lower(): n.name for n in inv.nodes}
    by_ip = {str(n.ip): n.name for n in inv.nodes}
    ours = machine_ip(inv)
    events = list(events)
    files = http_files(inv)
    expected = _expected_sizes(events, files, sizes or {})
    strangers: dict[tuple[str, str], Stranger] = {}
    loaded: dict[str, dict[str, datetime]] = {}  # node -> kernel/initrd -> when
    earliest: datetime | None = None
    for ev in events:
        earliest = ev.time if earliest is None or ev.time < earliest else earliest
        name = by_mac.get((ev.mac or "").lower()) if ev.mac else by_ip.get(ev.ip or "")
        if name is None:
            _stranger(strangers, ev, ours)
            continue
        _apply(rows[name], entries[name], ev, loaded.setdefault(name, {}), (files, expected))
    for name, parts in loaded.items():
        if len(parts) == 2:
            keep_first(rows[name].stages, "kernel", max(parts.values()))
    for name, row in rows.items():
        for key, source in (("installed", installed), ("client_csr", cluster.client_csr),
                            ("serving_csr", cluster.serving_csr), ("ready", cluster.ready),
                            ("tuned", cluster.tuned), ("gpu", cluster.gpu), ("diagnosed", cluster.diagnosed)):
            if name in source and key in row.applicable:
                keep_first(row.stages, key, source[name])
        for stage, text in cluster.notes.get(name, ()):
            row.note(stage, text)
        _place(row, now, threshold, earliest, ignition_age)
    return list(rows.values()), sorted(strangers.values(), key=lambda s: (s.first, s.value))


def http_files(inv: Inventory) -> dict[str, str]:
    """The stage each file a node fetches over HTTP belongs to, by name (the ignition files: any `.ign`)."""
    image = inv.rhcos.rootfs if inv.live_rootfs else inv.rhcos.image
    return {tftp_path(image).rsplit("/", 1)[-1]: "rootfs" if inv.live_rootfs else "image"} if image else {}


def _expected_sizes(events: list[Event], files: Mapping[str, str],
                    sizes: Mapping[str, int]) -> dict[str, int]:
    """The known sizes, and for the RHCOS image with none known, the largest body a 200 sent of it.

    The image's name carries its version, so every whole GET of it sent the
    same bytes; an ignition file is made again (another size) by each
    `upi ignition`, so only a known size judges it.
    """
    out = dict(sizes)
    for ev in events:
        name = (ev.path or "").rsplit("/", 1)[-1]
        if ev.kind == "http" and ev.status == 200 and ev.size is not None and name in files \
                and name not in sizes and ev.method in ("GET", None):
            out[name] = max(out.get(name, 0), ev.size)
    return out


Http = tuple[Mapping[str, str], Mapping[str, int]]  # http_files(), and the expected sizes by name


def _apply(row: Row, entry: BootEntry, ev: Event, loaded: dict[str, datetime], http: Http) -> None:
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
        # The kernel or initrd missing blocks that stage; a boot loader missing, the PXE file.
        wanted = any(ev.path.endswith("/" + rel) or ev.path == rel for rel in (entry.kernel, entry.initrd))
        row.note("kernel" if wanted else "pxe", f"TFTP: {ev.path} not found")
    elif ev.kind == "http" and ev.path and ev.status is not None:
        _apply_http(row, ev, http)


def _probe(path: str) -> bool:
    """A name a loader looks for that may well be missing (not a problem).

    pxelinux's per-UUID and hex-IP files, GRUB's per-IP files and its module
    lists (x86_64-efi/command.lst).
    """
    parts = path.rsplit("/", 2)
    return (len(parts) > 1 and parts[-2] in ("pxelinux.cfg", "x86_64-efi", "i386-pc")) or \
        parts[-1].startswith("grub.cfg")


def _apply_http(row: Row, ev: Event, http: Http) -> None:
    """A request for a file of a stage: a whole GET reaches it; a refusal or a cut body is a note."""
    files, expected = http
    name = (ev.path or "").rsplit("/", 1)[-1]
    stage = "ignition" if name.endswith(".ign") else files.get(name)
    status = ev.status or 0
    if stage is None:
        return
    what = {"ignition": "its ignition file", "rootfs": f"the rootfs {name}"}.get(
        stage, f"the metal image {name}")
    if status in (403, 404) or status >= 500:
        row.note(stage, _refused(stage, what, status))
    elif ev.method not in ("GET", None) or not 200 <= status < 300 or status == 206:
        return  # a HEAD, a range, a redirect: nothing fetched, nothing refused
    elif ev.size is not None and ev.size < expected.get(name, 0):
        row.note(stage, f"{what} was cut after {ev.size} of {expected[name]} bytes (HTTP {status}): "
                        "the node gave up or the link dropped mid-way (watch the node's console), "
                        "or the server holds another copy than upi's (upi push)")
    else:
        keep_first(row.stages, stage, ev.time)


def _refused(stage: str, what: str, status: int) -> str:
    if stage == "ignition" and status in (403, 404):
        return IGNITION_404 if status == 404 else IGNITION_403
    if status == 404:
        return f"{what} was not found on the HTTP server (HTTP 404): run upi images, then upi push"
    if status == 403:
        return (f"the HTTP server refused {what} (HTTP 403): the server may not read it (file mode, "
                "or SELinux label httpd_sys_content_t): run upi push, which sets both")
    return f"the HTTP server failed on {what} (HTTP {status}): see the server's error log"


def machine_ip(inv: Inventory) -> Callable[[str], bool]:
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
    # A stage reached at a time no source keeps (tuned): the node has been there at least since
    # the last stage whose time is known.
    known = [when for key in reached if (when := row.stages[key]) is not None]
    start = row.since or (max(known) if known else None) or (earliest if not reached else None)
    if start is None or (now - start).total_seconds() <= threshold:
        return
    row.stuck = True
    after = row.applicable.index(reached[-1]) + 1 if reached else 0
    missing = row.applicable[after]
    # The notes of the stage it lacks, then those of later files it asked for (the legacy
    # installer's HEAD of the image comes before the ignition), then the usual suspects.
    later = [note for stage in row.applicable[after:] for note in row.stage_notes.get(stage, [])]
    row.causes = [*later, *CAUSES[missing]]
    if missing == "client_csr" and ignition_age is not None and ignition_age > 86400:
        row.causes.insert(0, IGNITION_OLD)
