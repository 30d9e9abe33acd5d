"""Which nodes are installed: recorded next to the render (DIR/installed.json), so their PXE files boot disk.

A DGX whose firmware boot order puts the network first PXE-boots at every
reboot, the machine-config reboots included; a per-MAC file that still
offers the RHCOS installer would wipe it every time. Once a node is
installed (its Node registered, or an admin says so) its per-MAC file boots
the local disk instead (pxelinux `LOCALBOOT 0`, GRUB `exit`). The record
survives re-renders: `upi render` reads it, `--reinstall NODE` takes a node
out. Each entry keeps the node's MAC: a node given another MAC in the
inventory is another machine, and installs again.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from upi import dirrecord
from upi.errors import RenderError, UsageError
from upi.inventory.model import Inventory
from upi.render import RenderedFile
from upi.safefs import Tree, shown

RECORD = "installed.json"
WHAT = "upi's installed-nodes record"


@dataclass(frozen=True)
class Installed:
    """One installed node: the MAC it was installed with, when, and how upi learnt it."""

    mac: str
    since: str
    how: str


def parse_record(raw: bytes, where: Path) -> dict[str, Installed]:
    """installed.json's nodes; malformed (or nested past json's recursion limit) is an error."""
    try:
        doc = json.loads(raw)
        nodes = doc["nodes"]
        return {str(name): Installed(str(v["mac"]), str(v["since"]), str(v["how"]))
                for name, v in nodes.items()}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        # Guessing "none installed" would put the installer back on every node.
        raise RenderError(f"{shown(where)} is not {WHAT}; fix or remove it "
                          "(removing it puts every node back to installing)") from None


def read_record(tree: Tree | None) -> dict[str, Installed]:
    """DIR/installed.json read through `tree` ({} when absent), never through a link (upi.dirrecord)."""
    if tree is None or (raw := dirrecord.read(tree, RECORD, WHAT)) is None:
        return {}
    return parse_record(raw, tree.root / RECORD)


def load_record(out: Path) -> dict[str, Installed]:
    """DIR/installed.json for a reader (status, wait): read_record without DIR's lock.

    A writer reads it under the lock instead (upi.renderdir.transaction).
    """
    raw = dirrecord.load(out, RECORD, WHAT)
    return {} if raw is None else parse_record(raw, out / RECORD)


def record_file(record: dict[str, Installed]) -> RenderedFile:
    """installed.json as a file of the render dir's commit (written with the files it describes)."""
    return dirrecord.record_file(RECORD, {"nodes": {name: {"mac": i.mac, "since": i.since, "how": i.how}
                                                    for name, i in sorted(record.items())}})


def save_record(out: Path, record: dict[str, Installed]) -> None:
    """Write the record alone, under DIR's lock, atomically (a crash leaves the old one or the new one)."""
    from upi.renderdir import transaction

    with transaction(out) as txn:
        txn.commit(None, record=record)  # None: the rendered files stay as they are


def installed_nodes(inv: Inventory, record: dict[str, Installed]) -> tuple[frozenset[str], list[str]]:
    """The inventory's nodes the record says are installed (same MAC), and notes on entries ignored."""
    macs = {n.name: n.mac for n in inv.nodes}
    names, notes = set(), []
    for name, entry in record.items():
        if name not in macs:
            notes.append(f"{RECORD} names {name}, which is not in the inventory: ignored")
        elif entry.mac != macs[name]:
            notes.append(f"{RECORD}: {name} was installed with MAC {entry.mac}, the inventory now "
                         f"says {macs[name]}: it installs again")
        else:
            names.add(name)
    return frozenset(names), notes


def _check_names(inv: Inventory, names: Iterable[str], flag: str) -> list[str]:
    known = {n.name for n in inv.nodes}
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UsageError(f"{flag} {', '.join(unknown)}: not a node of {inv.source}")
    return wanted


def updated(inv: Inventory, record: dict[str, Installed], *, add: Iterable[str] = (),
            remove: Iterable[str] = (), how: str = "marked by hand") -> dict[str, Installed]:
    """The record with `add` marked installed (now, `how`) and `remove` put back to installing."""
    add_names = _check_names(inv, add, "--installed")
    remove_names = _check_names(inv, remove, "--reinstall")
    both = set(add_names) & set(remove_names)
    if both:
        raise UsageError(f"{', '.join(sorted(both))}: both installed and to reinstall")
    macs = {n.name: n.mac for n in inv.nodes}
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {k: v for k, v in record.items() if k not in remove_names}
    for name in add_names:
        if name not in out or out[name].mac != macs[name]:
            out[name] = Installed(macs[name], now, how)
    return out
