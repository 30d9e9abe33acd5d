"""`upi approve-csr`: load the inventory, connect, approve once or keep watching."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from upi.csr.client import Approver, Record, run_once
from upi.csr.connect import connect, find_kubeconfig
from upi.facts.identity import node_identities
from upi.inventory import load_inventory

Mode = Literal["once", "watch"]


def approve_csr(inventory: Path, *, kubeconfig: Path | None, assets: Path | None, mode: Mode,
                dry_run: bool, log: Callable[[Record], None],
                stop: threading.Event | None = None) -> list[Record]:
    """Run the approver for the inventory's nodes; returns the records of a --once pass."""
    identities = node_identities(load_inventory(inventory, check_files=False))
    conn = connect(find_kubeconfig(kubeconfig, assets))
    try:
        if mode == "once":
            return run_once(conn, identities, dry_run=dry_run, log=log)
        Approver(conn, identities, dry_run=dry_run, log=log).watch(stop)
        return []
    finally:
        conn.close()
