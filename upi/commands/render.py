"""`upi render` and `upi schema`: the library calls behind them (validate: validate.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from upi.bootloaders import kept_bootloaders, stage_bootloaders
from upi.installed import installed_nodes, load_record, save_record, updated
from upi.inventory import load_inventory
from upi.inventory.rules import warnings
from upi.render import RenderedFile, render_inventory
from upi.writer import Change, manifest_files, manifest_images, previous_manifest, update_tree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderResult:
    """What `upi render` did (or, with dry_run, would do)."""

    out: Path
    changes: list[Change]
    diff: str | None
    written: bool
    warnings: list[str] = field(default_factory=list)
    installed: frozenset[str] = frozenset()  # nodes whose per-MAC file boots their disk


def render(inventory: Path, out: Path, *, diff: bool = False, force: bool = False,
           dry_run: bool = False, bootloaders: bool = False,
           retire_bootstrap: bool = False, installed: Sequence[str] = (),
           reinstall: Sequence[str] = (), how: str = "marked by hand") -> RenderResult:
    """Load, render to memory, and write unless `dry_run`.

    With `bootloaders`, the host's pxelinux.0, ldlinux.c32 and grubx64.efi
    join the tftp/ tree (and manifest.json) like any rendered file. With
    `retire_bootstrap`, HAProxy's pools leave the bootstrap out. The nodes
    recorded in DIR/installed.json (plus `installed`, minus `reinstall`; the
    record is updated) get per-MAC files that boot their disk.
    """
    inv = load_inventory(inventory)
    last = previous_manifest(out)  # read once here; the write reads it again under the lock
    kept, refused = manifest_files(last)
    extra = stage_bootloaders() if bootloaders else kept_bootloaders(out, kept)
    before = load_record(out)
    record = updated(inv, before, add=installed, remove=reinstall, how=how)
    done, record_notes = installed_nodes(inv, record)
    # RHCOS files staged by `upi images` stay, recorded as they were (not re-read: they are large).
    images = manifest_images(last)
    files: list[RenderedFile] = render_inventory(inv, extra, retire_bootstrap=retire_bootstrap,
                                                 installed=done, images=images)
    notes = warnings(inv)  # the inventory's own (validate prints them too)
    if refused:
        notes.append(f"{out}/manifest.json names {len(refused)} path(s) outside it or unsafe "
                     f"({', '.join(refused[:3])}): ignored, nothing there is read or deleted")
    if not retire_bootstrap and last.get("bootstrap_retired"):
        notes.append(f"the last render of {out} had the bootstrap retired (upi wait); this one puts "
                     f"{inv.bootstrap.name} back into HAProxy's API pools: pass --retire-bootstrap "
                     "to keep it out")
    notes += record_notes
    # The plan (and diff) is made once, by the write itself, with DIR locked.
    update = update_tree(out, files, force=force, diff=diff, dry_run=dry_run)
    for change in update.changes:
        log.debug("%s: %s", change.path, change.status)
    if not dry_run and record != before:  # after the files: a failed write keeps the old record
        save_record(out, record)
    return RenderResult(out, update.changes, update.diff, written=not dry_run, warnings=notes,
                        installed=done)


def schema() -> str:
    """The inventory's JSON Schema, for editors (yaml-language-server)."""
    from upi.inventory.schema import inventory_schema

    return json.dumps(inventory_schema(), indent=2) + "\n"
