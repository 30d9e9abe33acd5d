"""`upi status`: one row per node, the time it reached each stage, and why one is stuck (docs/status.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from upi import console
from upi.errors import UpiError
from upi.inventory import Inventory, load_inventory
from upi.remote import LocalTransport, Transport, open_transport
from upi.status.logs import Event, access_events, dnsmasq_events, read_tail
from upi.status.stages import STAGES, Cluster, Row, Stranger, build_rows


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


@dataclass
class Snapshot:
    """One look: the rows, the strangers, and what could not be read."""

    rows: list[Row]
    strangers: list[Stranger]
    unread: list[str]
    now: datetime


def _events(src: Sources, provisioner: Transport, now: datetime, unread: list[str]) -> list[Event]:
    events: list[Event] = []
    down: str | None = None  # the provisioner could not be reached: once per look is enough
    for log, parse in ((src.dnsmasq_log, lambda lines: dnsmasq_events(lines, now)),
                       (src.access_log, access_events)):
        if log is None:
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

        macs = {n.name: n.mac.lower() for n in inv.nodes}
        for name, rec in load_record(src.out).items():
            if macs.get(name) == rec.mac.lower():  # another MAC is another machine
                try:
                    found[name] = datetime.fromisoformat(rec.since.replace("Z", "+00:00"))
                except ValueError:
                    found[name] = None
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
    try:
        return read_cluster(inv, kubeconfig)
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


def _clock(when: datetime | None) -> str:
    return when.astimezone().strftime("%H:%M:%S") if when is not None else "?"


def _for(snap: Snapshot, row: Row) -> str:
    from upi.cli.base import duration_text

    if row.since is None:
        return "-"
    return duration_text(max(0, int((snap.now - row.since).total_seconds())))


def table_rows(snap: Snapshot) -> list[list[str]]:
    """The table's cells: a time per stage reached, `-` not yet, blank when it does not apply."""
    out = []
    for row in snap.rows:
        cells = [row.name, row.role]
        for key, _ in STAGES:
            if key not in row.applicable:
                cells.append("")
            else:
                cells.append(_clock(row.stages[key]) if key in row.stages else "-")
        cells += [row.current + (" (stuck)" if row.stuck else ""), _for(snap, row)]
        out.append(cells)
    return out


def to_json(snap: Snapshot) -> dict[str, Any]:
    """The document `--json` prints."""
    def iso(when: datetime | None) -> str | None:
        return when.isoformat() if when is not None else None

    return {
        "now": snap.now.isoformat(),
        "nodes": [{
            "name": r.name, "role": r.role, "mac": r.mac, "ip": r.ip,
            "stages": {k: ({"reached": k in r.stages, "time": iso(r.stages.get(k))}
                           if k in r.applicable else None) for k, _ in STAGES},
            "current": r.current, "since": iso(r.since),
            "seconds": int((snap.now - r.since).total_seconds()) if r.since else None,
            "stuck": r.stuck, "causes": r.causes, "done": r.done,
        } for r in snap.rows],
        "unknown": [{"kind": s.what, "value": s.value, "first_seen": iso(s.first), "seen": s.seen}
                    for s in snap.strangers],
        "unread": snap.unread,
    }


def show(snap: Snapshot) -> None:
    """The table on stdout; stuck nodes' likely causes and the strangers after it."""
    console.print_table(f"Nodes at {snap.now.strftime('%H:%M:%S')}",
                        ["NODE", "ROLE", *(name for _, name in STAGES), "NOW", "FOR"], table_rows(snap))
    for row in snap.rows:
        if row.stuck:
            console.say(f"{row.name}: stuck at {row.current} for {_for(snap, row)}; likely:")
            for cause in row.causes:
                console.say(f"  - {cause}")
    for s in snap.strangers:
        console.say(f"not in the inventory: {s.what.upper()} {s.value} "
                    f"({s.seen}, first at {_clock(s.first)})")
    for what in snap.unread:
        console.warn(f"cannot read {what}")


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


def status_command(inventory: Path, src_args: dict[str, Path | None], *, threshold: float, watch: bool,
                   interval: float, as_json: bool, connect: str | None = None) -> bool:
    """Print the status once (or every `interval` with `watch`, until every node is done).

    True when no node is stuck.
    """
    import json

    inv = load_inventory(inventory, check_files=False)
    src = sources(inv, **src_args, connect=connect)
    # `upi push`'s way to the provisioner; an SSH one connects on first read, once per run.
    prov = inv.provisioner
    provisioner = open_transport(inv, prov.ssh, str(prov.ip)) if prov.ssh else LocalTransport()
    try:
        while True:
            snap = snapshot(inv, src, threshold=threshold, provisioner=provisioner)
            if as_json and watch:
                console.print_json_line(json.dumps(to_json(snap), separators=(",", ":")))
            elif as_json:
                console.print_json(to_json(snap))
            else:
                show(snap)
            if not watch or all(r.done for r in snap.rows):
                return not any(r.stuck for r in snap.rows)
            time.sleep(interval)
    finally:
        provisioner.close()
