"""`upi status`'s look at the nodes: the sources it reads, one snapshot of them, and a Looker.

A library step two flows share: `upi status` (upi.commands.status) and `upi
wait`'s status reader (upi.wait.run) both look through a Looker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from upi.errors import UpiError, UsageError
from upi.inventory import Inventory
from upi.remote import LocalTransport, Transport, is_local, open_host
from upi.status.follow import Follower, Kind
from upi.status.logs import Event
from upi.status.stages import Cluster, build_rows
from upi.status.view import Snapshot


@dataclass(frozen=True)
class Log:
    """A log file, and whether it is on the provisioner (read over its `ssh` section) or here."""

    path: str
    on_provisioner: bool = False
    from_inventory: bool = False  # the inventory's own log (not a copy named on the command line)


@dataclass(frozen=True)
class Sources:
    """Where `upi status` reads: the logs, the render dir, the assets, the kubeconfig."""

    dnsmasq_log: Log | None
    access_log: Log | None
    out: Path | None
    assets: Path | None
    kubeconfig: Path | None
    connect: str | None = None  # libvirt URI of every VM node (default: the inventory's hypervisors)


def _events(inv: Inventory, src: Sources, provisioner: Transport, now: datetime, unread: list[str],
            sizes: dict[str, int], followers: dict[str, Follower] | None = None) -> list[Event]:
    """Every log's events; with the inventory's access log, `sizes` gets the files as served.

    `followers`: each log's reader kept from the look before (by kind), so
    only what was appended since is read; filled in on the first look.
    """
    events: list[Event] = []
    down: str | None = None  # the provisioner could not be reached: once per look is enough
    followers = {} if followers is None else followers
    logs: tuple[tuple[Log | None, Kind], ...] = ((src.dnsmasq_log, "dnsmasq"), (src.access_log, "access"))
    for log, kind in logs:
        if log is None or log.path == os.devnull:  # /dev/null: no such log (only files are read)
            continue
        follower = followers.get(kind)
        if follower is None or follower.path != log.path:
            follower = followers[kind] = Follower(inv, kind, log.path)
        where = provisioner if log.on_provisioner else LocalTransport()
        shown = f"{where.name}:{log.path}" if log.on_provisioner else log.path
        if log.on_provisioner and down is not None:
            unread.append(f"{shown}: {down}")
            continue
        try:
            events += follower.look(where, now)
            # The server's files are asked of the host the log came from; a copy named on the
            # command line asks no host, unless the provisioner is this machine.
            if log is src.access_log and (log.from_inventory or is_local(inv, "provisioner")):
                sizes.update(_served_sizes(inv, where, _own_names(inv, src.out)))
        except OSError as exc:
            unread.append(f"{shown}: {exc.strerror or exc}")
        except UpiError as exc:  # the provisioner refused us, or did not answer
            down = str(exc)
            unread.append(f"{shown}: {down}")
    return events


def _installed(inv: Inventory, src: Sources, unread: list[str]) -> dict[str, datetime | None]:
    """Installed nodes: upi's record in the render dir (with its time), and VMs libvirt shows done."""
    found: dict[str, datetime | None] = {}
    if src.out is not None:
        from upi.installed import load_record
        from upi.status.cluster import parse_time

        macs = {n.name: n.mac.lower() for n in inv.nodes}
        for name, rec in load_record(src.out).items():
            if macs.get(name) == rec.mac.lower():  # another MAC is another machine
                found[name] = parse_time(rec.since)
    for name in _installed_vms(inv, src.connect, unread):
        found.setdefault(name, None)  # libvirt keeps no time of the power-off
    return found


def _installed_vms(inv: Inventory, connect: str | None, unread: list[str]) -> set[str]:
    """VMs libvirt shows installed.

    Without --connect, a hypervisor (or libvirt-python) that is not there is
    not consulted, silently: status is often run where libvirt is not.
    """
    from upi.vms.installed import installed_vms

    try:
        done, problems = installed_vms(inv, connect=connect)
    except UpiError as exc:  # libvirt-python is not installed
        done, problems = set(), [str(exc)]
    if connect is not None:
        unread += [f"libvirt: {p}" for p in problems]
    return done


def _cluster(inv: Inventory, src: Sources, unread: list[str]) -> Cluster:
    from upi.csr.connect import find_kubeconfig
    from upi.status.cluster import read_cluster

    if src.kubeconfig is None and src.assets is None:
        try:
            kubeconfig = find_kubeconfig(None)
        except UpiError:
            return Cluster()  # no cluster named: the boot stages only
    else:
        kubeconfig = find_kubeconfig(src.kubeconfig, src.assets)
    if kubeconfig is not None and not kubeconfig.exists():
        # Before `upi ignition` (or the installer) wrote it: the boot stages only, no error.
        unread.append(f"the API: no kubeconfig at {kubeconfig} yet")
        return Cluster()
    try:
        cluster, problems = read_cluster(inv, kubeconfig)
        unread += [f"the API: {p}" for p in problems]
        return cluster
    except UsageError:
        raise  # an unusable kubeconfig is bad input (exit 2), as for every command that reads one
    except UpiError as exc:
        unread.append(f"the API: {exc}")
    except Exception as exc:  # noqa: BLE001 - the client's connection errors: status goes on without
        unread.append(f"the API: {type(exc).__name__}: {exc}")
    return Cluster()


def _ignition_age(assets: Path | None, now: float) -> float | None:
    """Seconds since the newest ignition file in ASSETS was written (None: no such file).

    None too once the cluster is installed: its day-1 ignition is never renewed (a new
    cluster identity); a node added later boots what the cluster serves (upi nodes add).
    """
    from upi.wait.state import install_completed

    if assets is None or install_completed(assets):
        return None
    times = [p.stat().st_mtime for p in assets.glob("*.ign") if p.is_file()]
    return now - max(times) if times else None


def _served_sizes(inv: Inventory, where: Transport, own: frozenset[str] = frozenset()) -> dict[str, int]:
    """The size of each file a node fetches as the HTTP server holds it (under `http_root`), by name.

    One `stat` on the host whose access log was read; what it cannot tell
    (a missing file, not a regular file, an old stat) stays unknown. `own`:
    the day-2 nodes whose own ignition (ignition/nodes/NAME.ign) upi published
    (_own_names), judged like a day-1 node's role file.
    """
    import stat

    from upi.facts.boot import own_ignition_path
    from upi.status.stages import http_files

    root = inv.provisioner.http_root.rstrip("/")
    paths = {f"{root}/ignition/{role}.ign" for role in sorted({n.role.value for n in inv.nodes})}
    paths |= {f"{root}/{own_ignition_path(name)}" for name in own}
    image = inv.rhcos.rootfs if inv.live_rootfs else inv.rhcos.image
    if image and "://" not in image and http_files(inv):
        paths.add(f"{root}/{image.lstrip('/')}")
    try:
        result = where.run(["stat", "-L", "-c", "%s %f %n", "--", *sorted(paths)])
    except (UpiError, OSError):
        return {}
    sizes: dict[str, int] = {}
    for line in result.stdout.splitlines():
        size, mode, path = (line.split(" ", 2) + ["", ""])[:3]
        try:
            if path in paths and stat.S_ISREG(int(mode, 16)):
                sizes[path.rsplit("/", 1)[-1]] = int(size)
        except ValueError:
            continue
    return sizes


def _sizes(inv: Inventory, src: Sources) -> dict[str, int]:
    """The size of each file a node fetches over HTTP, by name, where upi keeps a copy.

    The render dir's `http/` is what `upi push` published (the ignition files,
    the RHCOS image `upi images` staged); the assets' ignition files come
    next. Only regular files count (a FIFO planted there is never opened).
    """
    import stat

    from upi.status.stages import http_files

    places: list[Path] = []
    if src.out is not None:
        places += sorted((src.out / "http" / "ignition").glob("*.ign"))
        places += _own_copies(inv, src.out)
        image = inv.rhcos.rootfs if inv.live_rootfs else inv.rhcos.image
        if image and "://" not in image and http_files(inv):
            places.append(src.out / "http" / image.lstrip("/"))
    if src.assets is not None:
        places += sorted(src.assets.glob("*.ign"))
    sizes: dict[str, int] = {}
    for path in places:
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            sizes.setdefault(path.name, st.st_size)
    return sizes


def _own_copies(inv: Inventory, out: Path) -> list[Path]:
    """The own ignition files of the nodes DIR/own-ignition.json records (upi nodes add), never others.

    A file copied into http/ignition/nodes/ by hand is not published (upi
    push), so its size says nothing about what the nodes fetch.
    """
    from upi.facts.boot import own_ignition_path

    return [out / "http" / own_ignition_path(name) for name in sorted(_own_names(inv, out))]


def _own_names(inv: Inventory, out: Path | None) -> frozenset[str]:
    """The inventory's workers DIR/own-ignition.json records (upi nodes add); none without DIR."""
    from upi.ownignition import load_record, own_nodes

    if out is None:
        return frozenset()
    try:
        return own_nodes(inv, load_record(out))
    except UpiError:
        return frozenset()  # a damaged record: sizes stay unknown, as without a render dir


def snapshot(inv: Inventory, src: Sources, *, threshold: float, provisioner: Transport | None = None,
             followers: dict[str, Follower] | None = None) -> Snapshot:
    """Read every source once and place every node (the provisioner's logs through `provisioner`).

    `followers`: the logs' readers of the look before (Looker keeps them).
    """
    now = datetime.now().astimezone()
    unread: list[str] = []
    sizes: dict[str, int] = {}
    events = _events(inv, src, provisioner or LocalTransport(), now, unread, sizes, followers)
    for name, size in _sizes(inv, src).items():
        sizes.setdefault(name, size)  # what the server holds comes first
    rows, strangers = build_rows(inv, events, installed=_installed(inv, src, unread),
                                 cluster=_cluster(inv, src, unread), now=now, threshold=threshold,
                                 ignition_age=_ignition_age(src.assets, time.time()),
                                 sizes=sizes)
    return Snapshot(rows, strangers, unread, now)


def sources(inv: Inventory, *, dnsmasq_log: Path | None, access_log: Path | None, out: Path | None,
            assets: Path | None, kubeconfig: Path | None, connect: str | None = None) -> Sources:
    """The inventory's log paths unless overridden on the command line (files here).

    The inventory's are on the provisioner, reached as `upi push` reaches it
    (remote.host_access): here only when its `ssh` section says `local: true`.
    """
    prov = inv.provisioner
    remote = not is_local(inv, "provisioner")

    def pick(given: Path | None, default: str | None) -> Log | None:
        if given is not None:
            return Log(str(given))
        return Log(default, remote, from_inventory=True) if default else None

    return Sources(pick(dnsmasq_log, prov.dnsmasq_log), pick(access_log, prov.http_access_log),
                   out, assets, kubeconfig, connect)


STUCK_AFTER = 1200.0  # seconds at one stage before a node is stuck (--stuck-after's default)


class Looker:
    """Every source of one inventory, looked at again and again over one way to the provisioner.

    `upi push`'s way: an SSH one connects on the first read and stays open
    until close(). Each log is followed (status.follow): a look reads what
    was appended since the one before. A context manager.
    """

    def __init__(self, inv: Inventory, src: Sources, *, threshold: float = STUCK_AFTER) -> None:
        self.inv, self.src, self.threshold = inv, src, threshold
        self.provisioner = open_host(inv, "provisioner")
        self.followers: dict[str, Follower] = {}

    def look(self) -> Snapshot:
        """Read every source once (each log from where the last look stopped) and place every node."""
        return snapshot(self.inv, self.src, threshold=self.threshold, provisioner=self.provisioner,
                        followers=self.followers)

    def close(self) -> None:
        """Close the way to the provisioner."""
        self.provisioner.close()

    def __enter__(self) -> Looker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
