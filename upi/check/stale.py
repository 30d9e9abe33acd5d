"""Files upi placed in the TFTP root that the render no longer has, still served: a removed node's.

`upi push` records what it placed in each provisioner root (upi.push.owned),
world-readable, so the TFTP server serves the TFTP root's record too. The
check fetches it, and every recorded file the inventory no longer renders
(a per-MAC boot file whose MAC no node has, an old kernel) is fetched in
turn: still served is a failure naming it; gone is as it should be.
"""

from __future__ import annotations

import re

from upi.check.report import CheckResult
from upi.check.tftpclient import TftpError, tftp_get
from upi.facts.boot import GRUB_IMAGE, PXELINUX_IMAGE, SHIM_IMAGE
from upi.inventory import Inventory
from upi.push.owned import ledger_name, parse

AREA = "tftp"
PER_MAC = re.compile(r"(?:^|/)(?:pxelinux\.cfg/|grub\.cfg-)01-((?:[0-9a-f]{2}-){5}[0-9a-f]{2})$")
LOADERS = frozenset({PXELINUX_IMAGE, "ldlinux.c32", GRUB_IMAGE, SHIM_IMAGE})


def rendered_tftp(inv: Inventory, wanted_paths: set[str]) -> set[str]:
    """Every TFTP path the inventory's render has (per-MAC files, fallbacks, loaders, kernels)."""
    from upi.render import boot_files

    return wanted_paths | LOADERS | {f.path.removeprefix("tftp/") for f in boot_files(inv)}


def _fetch(host: str, port: int, path: str, timeout: float, retries: int) -> str | None:
    """None when the server no longer has `path` (TFTP error 1); what it answered otherwise."""
    try:
        size = tftp_get(host, port, path, lambda _b: None, timeout=timeout, retries=retries)
    except TftpError as exc:
        return None if str(exc).startswith("TFTP error 1:") else str(exc)
    return f"served ({size:,} bytes)"


def _whose(inv: Inventory, rel: str) -> str:
    match = PER_MAC.search(rel)
    if match:
        mac = match.group(1).replace("-", ":")
        return f"a per-MAC boot file for {mac}, which no node of {inv.source.name} has"
    return "placed by `upi push`, no longer rendered"


def check_stale(inv: Inventory, host: str, port: int, wanted_paths: set[str], *, timeout: float,
                retries: int) -> list[CheckResult]:
    """One row per recorded file still served that the render no longer has; one pass row if none.

    No rows when the server has no record (a host pushed by an older upi, or
    files copied by hand): nothing there is known to be upi's.
    """
    name = ledger_name(inv.cluster.domain)
    raw = bytearray()
    try:
        tftp_get(host, port, name, raw.extend, timeout=timeout, retries=retries)
    except TftpError:
        return []
    entries = {rel for rel, e in parse(bytes(raw)).items() if e.kind == "tftp"}
    known = rendered_tftp(inv, wanted_paths)
    rows = []
    for rel in sorted(entries - known):
        got = _fetch(host, port, rel, timeout, retries)
        if got is not None:
            rows.append(CheckResult(
                AREA, f"TFTP {rel}", "gone: no inventory node has it", got, "fail",
                f"{rel}: {_whose(inv, rel)}; `upi push INVENTORY -o DIR` (after `upi render`) removes "
                "the files upi placed that the render no longer has"))
    if not rows:
        rows.append(CheckResult(AREA, f"TFTP {name}", "no stale file upi placed",
                                f"{len(entries)} recorded, none stale", "pass"))
    return rows
