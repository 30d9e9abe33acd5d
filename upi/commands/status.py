"""`upi status`: one row per node, the time it reached each stage, and why one is stuck (docs/status.md)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from upi import console
from upi.errors import UpiError, UsageError
from upi.inventory import Inventory, load_inventory
from upi.remote import LocalTransport, Transport, open_transport
from upi.status.logs import Event, access_events, dnsmasq_events, read_tail
from upi.status.stages import Cluster, build_rows
from upi.status.view import Snapshot, StatusView, show, to_json


@dataclass(frozen=True)
class Log:
    """A log file, and whether it is on the provisioner (read over its `ssh` section) or here."""

    path: str
    on_provisioner: bool = False


@dataclass(frozen=True)
class Sources:
    """Where `upi status` reads: the logs, the render dir, the assets, the kubeconfig."""

    dnsmasq_log: Log | None
    access_log: Log | None
    out: Path | None
    assets: Path | None
    kubeconfig: Path | None
    connect: str | None = None  # libvirt URI of every VM node (default: the inventory's hypervisors)


def _events(src: Sources, provisioner: Transport, now: datetime, unread: list[str]) -> list[Event]:
    events: list[Event] = []
    down: str | None = None  # the provisioner could not be reached: once per look is enough
    for log, parse in ((src.dnsmasq_log, lambda lines: dnsmasq_events(lines, now)),
                       (src.access_log, access_events)):
        if log is None or log.path == os.devnull:  # /dev/null: no such log (only files are read)
            continue
        where = provisioner if log.on_provisioner else LocalTransport()
        shown = f"{where.name}:{log.path}" if log.on_provisioner else log.path
        if log.on_provisioner and down is not None:
            unread.append(f"{shown}: {down}")
            continue
        try:
            events += parse(read_tail(where, log.path).splitlines())
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
    """Seconds since the newest ignition file in ASSETS was written (None: no such file)."""
    if assets is None:
        return None
    times = [p.stat().st_mtime for p in assets.glob("*.ign") if p.is_file()]
    return now - max(times) if times else None


def snapshot(inv: Inventory, src: Sources, *, threshold: float,
             provisioner: Transport | None = None) -> Snapshot:
    """Read every source once and place every node (the provisioner's logs through `provisioner`)."""
    now = datetime.now().astimezone()
    unread: list[str] = []
    events = _events(src, provisioner or LocalTransport(), now, unread)
    rows, strangers = build_rows(inv, events, installed=_installed(inv, src, unread),
                                 cluster=_cluster(inv, src, unread), now=now, threshold=threshold,
                                 ignition_age=_ignition_age(src.assets, time.time()))
    return Snapshot(rows, strangers, unread, now)


def sources(inv: Inventory, *, dnsmasq_log: Path | None, access_log: Path | None, out: Path | None,
            assets: Path | None, kubeconfig: Path | None, connect: str | None = None) -> Sources:
    """The inventory's log paths unless overridden on the command line (files here).

    The inventory's are on the provisioner when it has an `ssh` section that is not `local`.
    """
    prov = inv.provisioner
    remote = prov.ssh is not None and not prov.ssh.local

    def pick(given: Path | None, default: str | None) -> Log | None:
        if given is not None:
            return Log(str(given))
        return Log(default, remote) if default else None

    return Sources(pick(dnsmasq_log, prov.dnsmasq_log), pick(access_log, prov.http_access_log),
                   out, assets, kubeconfig, connect)


STUCK_AFTER = 1200.0  # seconds at one stage before a node is stuck (--stuck-after's default)
INTERRUPTED = 130  # the exit status of a watch stopped by Ctrl-C before its first look ended


class Looker:
    """Every source of one inventory, looked at again and again over one way to the provisioner.

    `upi push`'s way: an SSH one connects on the first read and stays open
    until close(). A context manager.
    """

    def __init__(self, inv: Inventory, src: Sources, *, threshold: float = STUCK_AFTER) -> None:
        self.inv, self.src, self.threshold = inv, src, threshold
        prov = inv.provisioner
        self.provisioner = open_transport(inv, prov.ssh, str(prov.ip)) if prov.ssh else LocalTransport()

    def look(self) -> Snapshot:
        """Read every source once and place every node."""
        return snapshot(self.inv, self.src, threshold=self.threshold, provisioner=self.provisioner)

    def close(self) -> None:
        """Close the way to the provisioner."""
        self.provisioner.close()

    def __enter__(self) -> Looker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _verdict(snap: Snapshot) -> int:
    return 1 if any(r.stuck for r in snap.rows) else 0


def _watch(looker: Looker, interval: float, as_json: bool) -> int:
    """Look every `interval` until every node is done; Ctrl-C ends the watch like that, cleanly.

    The exit status is the last look's; 130 when Ctrl-C came before any look ended.
    """
    import contextlib
    import json

    last: Snapshot | None = None
    try:
        with contextlib.nullcontext() if as_json else StatusView() as view:
            while True:
                last = looker.look()
                if view is None:
                    console.print_json_line(json.dumps(to_json(last), separators=(",", ":")))
                else:
                    view.update(last)
                if all(r.done for r in last.rows):
                    return _verdict(last)
                time.sleep(interval)
    except KeyboardInterrupt:
        console.progress("upi status: stopped (Ctrl-C)")
        return INTERRUPTED if last is None else _verdict(last)


def status_command(inventory: Path, src_args: dict[str, Path | None], *, threshold: float, watch: bool,
                   interval: float, as_json: bool, connect: str | None = None) -> int:
    """Print the status once, or with `watch` every `interval` until every node is done.

    The exit status: 0, or 1 when a node is stuck (130: see _watch).
    """
    inv = load_inventory(inventory, check_files=False)
    with Looker(inv, sources(inv, **src_args, connect=connect), threshold=threshold) as looker:
        if watch:
            return _watch(looker, interval, as_json)
        snap = looker.look()
        if as_json:
            console.print_json(to_json(snap))
        else:
            show(snap)
        return _verdict(snap)
