"""Files upi placed on the provisioner that the render no longer has, still served: a removed node's.

`upi push` records what it placed in each provisioner root (upi.push.owned),
world-readable, so the TFTP and HTTP servers serve their root's record too.
The check fetches it, and every recorded file the inventory no longer
renders is fetched in turn: still served is a failure naming it; gone is as
it should be. Over TFTP: a per-MAC boot file whose MAC no node has, an old
kernel. Over HTTP: any file the render no longer has (an RHCOS file of
another version, a day-2 node's own ignition whose node is gone), judged by
what DIR/http/ publishes when the render dir is given, by the inventory
otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

from upi.check.report import CheckResult
from upi.check.tftpclient import TftpError, tftp_get
from upi.errors import UpiError
from upi.facts.boot import GRUB_IMAGE, OWN_IGNITION_DIR, PXELINUX_IMAGE, SHIM_IMAGE
from upi.inventory import Inventory
from upi.push.owned import ledger_name, parse
from upi.safefs import shown

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


def check_stale_http(inv: Inventory, base: str, *, timeout: float, retries: int,
                     render_dir: Path | None = None) -> list[CheckResult]:
    """One row per file upi placed in the HTTP root that the render no longer has, still served.

    `base`: the HTTP root's URL (http_base_url, or --server/--port's). What
    the render has: with `render_dir`, what `upi push` would publish from its
    http/ now (upi.push.sources: dot files skipped, a node's own ignition only
    while own-ignition.json records it), so a row is exactly a file the next
    push removes. Without it, only what the inventory tells is judged: a
    node's own ignition (its node must be a worker), a file beside the
    inventory's RHCOS files (another version of them); the ignition files
    `upi ignition` stages stay, and any other file is left unjudged (counted
    in the passing row), since DIR/http/ may publish it on purpose.
    No rows when the server has no record: nothing there is known to be upi's.
    """
    from upi.check.httpget import fetch
    from upi.push.owned import LEDGER_LIMIT

    name = ledger_name(inv.cluster.domain)
    base = base.rstrip("/")
    got = fetch(f"{base}/{name}", timeout=timeout, retries=retries, keep=LEDGER_LIMIT,
                read=LEDGER_LIMIT + 1)
    if got.status != 200 or not got.complete:
        return []
    recorded = sorted(rel for rel, e in parse(got.body).items() if e.kind == "http")
    rows = []
    staged = None
    if render_dir is not None:
        try:
            staged = _staged_http(inv, render_dir)
        except (OSError, UpiError) as exc:
            said = getattr(exc, "strerror", None) or str(exc)
            rows.append(CheckResult("http", f"GET {name}", "judged by the render dir's http/",
                                    "judged by the inventory", "warn",
                                    f"cannot read {shown(render_dir / 'http')}: {said}"))
            render_dir = None
    unjudged = 0
    for rel in recorded:
        has = (rel in staged) if staged is not None else _inventory_has(inv, rel)
        unjudged += has is None
        if has is not False:
            continue
        f = fetch(f"{base}/{rel}", timeout=timeout, retries=retries, keep=0, read=1)
        if f.status != 404:
            rows.append(CheckResult(
                "http", f"GET {rel}", "gone: no inventory node has it" if _own_node(rel) else
                "gone: no longer rendered", f"HTTP {f.status}" if f.status else f.error, "fail",
                f"{rel}: {_whose_http(inv, rel, render_dir)}; `upi push INVENTORY -o DIR` (after "
                "`upi render`) removes the files upi placed that the render no longer has"))
    if not any(r.verdict == "fail" for r in rows):
        left = f" ({unjudged} only -o DIR can judge)" if unjudged else ""
        rows.append(CheckResult("http", f"GET {name}", "no stale file upi placed",
                                f"{len(recorded)} file(s) recorded, none stale{left}", "pass"))
    return rows


def _own_node(rel: str) -> str | None:
    """The node whose own ignition `rel` is (ignition/nodes/NAME.ign), else None."""
    head, _, file = rel.rpartition("/")
    return file.removesuffix(".ign") if head == OWN_IGNITION_DIR and file.endswith(".ign") else None


def _inventory_has(inv: Inventory, rel: str) -> bool | None:
    """Whether the inventory's render has `rel` (HTTP-root relative); None when only DIR/http/ can tell."""
    from upi.images.stage import http_path

    node = _own_node(rel)
    if node is not None:
        return node in {n.name for n in inv.workers}
    head = rel.rpartition("/")[0]
    if head == OWN_IGNITION_DIR.rpartition("/")[0]:  # ignition/: the set `upi ignition` stages
        return True
    values = (getattr(inv.rhcos, key) for key in ("kernel", "initramfs", "rootfs", "image"))
    rhcos = {p for p in (http_path(inv, v) for v in values if v) if p}
    if rel in rhcos:
        return True
    # Beside the inventory's RHCOS files: one `upi images` staged for another version.
    return False if head in {p.rpartition("/")[0] for p in rhcos} else None


def _staged_http(inv: Inventory, out: Path) -> set[str]:
    """What `upi push` would publish from out/http/ now, HTTP-root relative (names only, nothing read)."""
    from upi.ownignition import own_nodes, read_record
    from upi.push.sources import HTTP_DIR
    from upi.safefs import Tree

    with Tree.open(out) as tree:
        own = own_nodes(inv, read_record(tree))
        found = {rel.removeprefix(f"{HTTP_DIR}/") for rel, _ in tree.walk(HTTP_DIR)
                 if not any(part.startswith(".") for part in rel.split("/")[1:])}
    return {rel for rel in found if _own_node(rel) in (None, *own)}


def _whose_http(inv: Inventory, rel: str, render_dir: Path | None) -> str:
    node = _own_node(rel)
    if node is not None and node not in {n.name for n in inv.workers}:
        return f"the own ignition of {node}, which is not a node of {inv.source.name}"
    if node is not None:
        return f"the own ignition of {node}, which own-ignition.json no longer records (upi nodes remove)"
    if render_dir is not None:
        return f"placed by `upi push`, no longer in {shown(render_dir / 'http')}/"
    return f"placed by `upi push`, not a file {inv.source.name} boots from (its RHCOS files, ignition)"
