"""Which day-2 workers boot their own ignition file: recorded next to the render (DIR/own-ignition.json).

`upi nodes add` publishes the worker ignition the cluster serves now as
each new node's own file (DIR/http/ignition/nodes/NAME.ign) and records
the node here, in the same commit of DIR (upi.renderdir.transaction).
Render (the node's PXE file names its own file), push (only recorded
nodes' files are published) and `nodes add` itself (a Node it joined
earlier is resumed, not refused) decide from this record, never from
the files present: a file deleted by hand does not send the node back to
day 1's expired worker.ign, and one copied in by hand is not published
nor makes a foreign Node look like one upi joined.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from upi import dirrecord
from upi.errors import RenderError
from upi.inventory.model import Inventory, Role
from upi.render import RenderedFile
from upi.safefs import Tree, shown

RECORD = "own-ignition.json"
WHAT = "upi's record of the nodes that boot their own ignition"


def parse_record(raw: bytes, where: Path) -> dict[str, str]:
    """The record's nodes (name -> when it was published); malformed is an error, never "none"."""
    try:
        doc: Any = json.loads(raw)
        return {str(name): str(v["since"]) for name, v in doc["nodes"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise RenderError(f"{shown(where)} is not {WHAT} (upi nodes add); fix or remove it "
                          "(then run `upi nodes add` for those nodes again)") from None


def read_record(tree: Tree | None) -> dict[str, str]:
    """DIR/own-ignition.json read through `tree` ({} when absent), never through a link (upi.dirrecord)."""
    if tree is None or (raw := dirrecord.read(tree, RECORD, WHAT)) is None:
        return {}
    return parse_record(raw, tree.root / RECORD)


def load_record(out: Path) -> dict[str, str]:
    """The record for a reader without DIR's lock ({} when DIR does not exist)."""
    raw = dirrecord.load(out, RECORD, WHAT)
    return {} if raw is None else parse_record(raw, out / RECORD)


def record_file(record: dict[str, str]) -> RenderedFile:
    """own-ignition.json as a file of the render dir's commit."""
    return dirrecord.record_file(RECORD, {"nodes": {name: {"since": since}
                                                    for name, since in sorted(record.items())}})


def with_nodes(record: dict[str, str], names: Iterable[str]) -> dict[str, str]:
    """The record with `names` added (a node already in it keeps its first date)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**{name: now for name in names}, **record}


def own_nodes(inv: Inventory, record: dict[str, str]) -> frozenset[str]:
    """The inventory's workers the record names: those whose PXE file names their own ignition."""
    return frozenset(n.name for n in inv.nodes if n.role is Role.worker and n.name in record)
