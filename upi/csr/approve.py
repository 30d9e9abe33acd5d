"""The CSR approver for an inventory: connect, approve once or keep watching (approve-csr, wait)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from upi.csr.client import Approver, Record, run_once
from upi.csr.connect import connect, find_kubeconfig
from upi.errors import ClusterError
from upi.facts.identity import node_identities
from upi.inventory import load_inventory

Mode = Literal["once", "watch"]


def approve_csr(inventory: Path, *, kubeconfig: Path | None, assets: Path | None, mode: Mode,
                dry_run: bool, log: Callable[[Record], None],
                stop: threading.Event | None = None,
                release: frozenset[str] = frozenset()) -> list[Record]:
    """Run the approver for the inventory's nodes; returns the records of a --once pass.

    `release` names held client CSRs to approve (a --once pass over exactly those).
    """
    identities = node_identities(load_inventory(inventory, check_files=False))
    conn = connect(find_kubeconfig(kubeconfig, assets))
    try:
        if mode == "once":
            records = run_once(conn, identities, dry_run=dry_run, log=log, release=release)
            _check_released(release, records)
            return records
        Approver(conn, identities, dry_run=dry_run, log=log).watch(stop)
        return []
    finally:
        conn.close()


def _check_released(release: frozenset[str], records: list[Record]) -> None:
    """Every CSR named by --release was approved (or would be); else exit 1 saying which not."""
    done = {r.csr for r in records if r.action in ("approved", "would-approve")}
    missed = sorted(release - done)
    if missed:
        raise ClusterError(f"not released: {', '.join(missed)} (the lines above say why)")
