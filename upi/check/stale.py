"""Files upi placed on the provisioner that the render no longer has, still served: a removed node's.

`upi push` records what it placed in each provisioner root (upi.push.owned),
world-readable, so the TFTP and HTTP servers serve their root's record too.
The check fetches it, and every recorded file the inventory no longer
renders is fetched in turn: still served is a failure naming it; gone is as
it should be. Over TFTP: a per-MAC boot file whose MAC no node has, an old
kernel. Over HTTP: a day-2 node's own ignition (ignition/nodes/NAME.ign)
whose node the inventory no longer has (other files under the HTTP root
come from DIR/http/, which only `upi push` reads).
"""

from __future__ import annotations

import re

from upi.check.report import CheckResult
from upi.check.tftpclient import TftpError, tftp_get
from upi.facts.boot import GRUB_IMAGE, OWN_IGNITION_DIR, PXELINUX_IMAGE, SHIM_IMAGE
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


def check_stale_http(inv: Inventory, base: str, *, timeout: float, retries: int) -> list[CheckResult]:
    """One row per recorded own ignition of a node the inventory no longer has, still served.

    `base`: the HTTP root's URL (http_base_url, or --server/--port's). No
    rows when the server has no record: nothing there is known to be upi's.
    """
    from upi.check.httpget import fetch
    from upi.push.owned import LEDGER_LIMIT

    name = ledger_name(inv.cluster.domain)
    base = base.rstrip("/")
    got = fetch(f"{base}/{name}", timeout=timeout, retries=retries, keep=LEDGER_LIMIT,
                read=LEDGER_LIMIT + 1)
    if got.status != 200 or not got.complete:
        return []
    workers = {n.name for n in inv.workers}
    recorded = sorted(rel for rel, e in parse(got.body).items() if e.kind == "http"
                      and rel.startswith(f"{OWN_IGNITION_DIR}/") and rel.endswith(".ign"))
    rows = []
    for rel in recorded:
        node = rel.removeprefix(f"{OWN_IGNITION_DIR}/").removesuffix(".ign")
        if node in workers:
            continue
        f = fetch(f"{base}/{rel}", timeout=timeout, retries=retries, keep=0, read=1)
        if f.status != 404:
            rows.append(CheckResult(
                "http", f"GET {rel}", "gone: no inventory node has it",
                f"HTTP {f.status}" if f.status else f.error, "fail",
                f"{rel}: the own ignition of {node}, which is not a node of {inv.source.name}; "
                "`upi push INVENTORY -o DIR` (after `upi render`) removes the files upi placed that "
                "the render no longer has"))
    if not rows:
        rows.append(CheckResult("http", f"GET {name}", "no stale file upi placed",
                                f"{len(recorded)} own ignition file(s) recorded, none stale", "pass"))
    return rows
