"""The render directory's one transaction, and the render every flow writes through it.

Like git's lockfile model (`hold_lock_file_for_update` -> `commit_lock_file`:
the index is read under `index.lock`): take DIR's lock, read the records
(manifest.json, the images `upi images` staged, installed.json), build the
new tree from them, commit it (installed.json in the same journal), release.
Nothing read before the lock is trusted after it. `upi render`, `upi images`,
the local-boot flip (upi.localboot) and `upi wait` all write DIR this way, so
two of them at once are two transactions one after the other, never a record
lost between them (docs/render.md, "Concurrent writers").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from upi.installed import Installed, installed_nodes, read_record, record_file, updated
from upi.inventory import Inventory, load_inventory
from upi.inventory.rules import warnings
from upi.ownignition import own_nodes
from upi.render import PUBLIC, RenderedFile, render_inventory
from upi.safefs import Tree
from upi.staging import Stager, recover
from upi.writer import (
    Change,
    TreeUpdate,
    commit,
    locked,
    manifest_files,
    manifest_images,
    open_existing,
    preview,
    read_manifest,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Records:
    """What DIR says about itself, read under its lock (or, for a dry run, without writing)."""

    manifest: dict[str, Any]
    images: dict[str, dict[str, Any]]  # the RHCOS files `upi images` staged (manifest.json)
    installed: dict[str, Installed]  # installed.json
    own: dict[str, str] = field(default_factory=dict)  # own-ignition.json (upi.ownignition)

    @classmethod
    def read(cls, tree: Tree | None) -> Records:
        """The records of the DIR open at `tree` (None: DIR does not exist yet, no records)."""
        from upi import ownignition

        doc = read_manifest(tree)
        return cls(doc, manifest_images(doc), read_record(tree), ownignition.read_record(tree))


@dataclass
class Transaction:
    """DIR locked, its records read: build from them, then `commit` once."""

    out: Path
    tree: Tree
    records: Records

    def read(self, rel: str) -> bytes | None:
        """A regular file of DIR, never through a link (None otherwise)."""
        return self.tree.read(rel)

    def commit(self, files: list[RenderedFile] | None, *, record: dict[str, Installed] | None = None,
               force: bool = False, diff: bool = False, own: dict[str, str] | None = None,
               published: Sequence[RenderedFile] = (), stager: Stager | None = None) -> TreeUpdate:
        """Write `files` (None: keep the rendered files) and each record that changed, in one journal.

        `own`: the nodes that boot their own ignition (upi.ownignition), with
        `published`, their files under http/ (written in the same journal).
        `stager`: the staging dir the render already fed (upi.staging.Stager).
        """
        from upi import ownignition

        # A published file already there as it is (a second `nodes add`) is not written again.
        records: tuple[RenderedFile, ...] = tuple(f for f in published if self.read(f.path) != f.content)
        if record is not None and record != self.records.installed:
            records += (record_file(record),)
        if own is not None and own != self.records.own:
            records += (ownignition.record_file(own),)
        return commit(self.tree, self.out, files, self.records.manifest, force=force, diff=diff,
                      records=records, stager=stager)

    def write_manifest(self, manifest: RenderedFile) -> None:
        """manifest.json alone, rewritten in one journaled commit (`upi images` records its files)."""
        commit(self.tree, self.out, None, self.records.manifest, records=(manifest,))


@contextlib.contextmanager
def transaction(out: Path) -> Iterator[Transaction]:
    """DIR created if needed, locked, an interrupted write finished, its records read; released at the end."""
    with locked(out) as tree:
        recover(tree)
        yield Transaction(out, tree, Records.read(tree))


@dataclass(frozen=True)
class RenderResult:
    """What `upi render` did (or, with dry_run, would do)."""

    out: Path
    changes: list[Change]
    diff: str | None
    written: bool
    warnings: list[str] = field(default_factory=list)
    installed: frozenset[str] = frozenset()  # nodes whose per-MAC file boots their disk


@dataclass(frozen=True)
class RenderRequest:
    """What to render into DIR beyond the inventory itself."""

    loaders: list[RenderedFile] | None = None  # --bootloaders: the host's; None keeps DIR's
    retire_bootstrap: bool | None = False  # None: as the last render had it (the flip)
    installed: Sequence[str] = ()
    reinstall: Sequence[str] = ()
    how: str = "marked by hand"


@dataclass(frozen=True)
class Built:
    """The new tree and record, built from DIR's records."""

    files: list[RenderedFile]
    record: dict[str, Installed]
    installed: frozenset[str]
    notes: list[str]


def _kept_loaders(tree: Tree | None, previous: dict[str, str]) -> list[RenderedFile]:
    from upi.bootloaders import BOOTLOADER_PATHS

    if tree is None:
        return []
    kept = []
    for rel in BOOTLOADER_PATHS:
        # Never through a link: tftp/pxelinux.0 -> a secret must not be carried into tftp/.
        content = tree.read(rel) if rel in previous else None
        if content is not None:
            kept.append(RenderedFile(rel, content, PUBLIC))
    return kept


def build(inv: Inventory, out: Path, tree: Tree | None, records: Records, req: RenderRequest,
          stager: Stager | None = None) -> Built:
    """Render `inv` over DIR's `records`: installed nodes boot disk, staged images and loaders stay.

    `stager`: fed the per-MAC boot files as soon as they are rendered (a first render).
    """
    last = records.manifest
    kept, refused = manifest_files(last)
    # A later render without --bootloaders keeps the loaders an earlier one staged (upi.bootloaders).
    extra = req.loaders if req.loaders is not None else _kept_loaders(tree, kept)
    # Secure Boot nodes need the signed shim + GRUB `upi images` staged; those replace the built GRUB.
    from upi.facts.boot import secure_boot_nodes
    from upi.images.loaders import require_signed_loaders

    extra = require_signed_loaders(secure_boot_nodes(inv), records.images, extra, out)
    record = updated(inv, records.installed, add=req.installed, remove=req.reinstall, how=req.how)
    done, record_notes = installed_nodes(inv, record)
    retire = bool(last.get("bootstrap_retired")) if req.retire_bootstrap is None else req.retire_bootstrap
    # RHCOS files staged by `upi images` stay, recorded as they were (not re-read: they are large).
    files = render_inventory(inv, extra, retire_bootstrap=retire, installed=done, images=records.images,
                             own_ignition=own_nodes(inv, records.own),
                             sink=stager.feed if stager else None)
    notes = warnings(inv)  # the inventory's own (validate prints them too)
    if refused:
        notes.append(f"{out}/manifest.json names {len(refused)} path(s) outside it or unsafe "
                     f"({', '.join(refused[:3])}): ignored, nothing there is read or deleted")
    if not retire and last.get("bootstrap_retired"):
        notes.append(f"the last render of {out} had the bootstrap retired (upi wait); this one puts "
                     f"{inv.bootstrap.name} back into HAProxy's API pools: pass --retire-bootstrap "
                     "to keep it out")
    return Built(files, record, done, notes + record_notes)


def render_dir(inv: Inventory, out: Path, req: RenderRequest, *, diff: bool = False,
               force: bool = False, dry_run: bool = False) -> RenderResult:
    """Render `inv` into DIR in one transaction (dry run: read DIR, plan and diff, write nothing)."""
    updated(inv, {}, add=req.installed, remove=req.reinstall)  # bad names: refused before DIR is made
    if dry_run:
        tree = open_existing(out)
        try:
            records = Records.read(tree)
            built = build(inv, out, tree, records, req)
            update = preview(tree, built.files, records.manifest, diff=diff)
        finally:
            if tree:
                tree.close()
        return RenderResult(out, update.changes, update.diff, written=False, warnings=built.notes,
                            installed=built.installed)
    with transaction(out) as txn, _first_stager(txn) as stager:
        built = build(inv, out, txn.tree, txn.records, req, stager)
        update = txn.commit(built.files, record=built.record, force=force, diff=diff, stager=stager)
    for change in update.changes:
        log.debug("%s: %s", change.path, change.status)
    return RenderResult(out, update.changes, update.diff, written=True, warnings=built.notes,
                        installed=built.installed)


@contextlib.contextmanager
def _first_stager(txn: Transaction) -> Iterator[Stager | None]:
    """On a first render (DIR has no manifest: every file is new), a Stager the render feeds.

    A later render may change nothing, and then writes nothing: it stages
    after planning, as before, rather than write 5,000 files to delete them.
    """
    if txn.records.manifest:
        yield None
        return
    with Stager(txn.tree) as stager:
        yield stager


def render(inventory: Path, out: Path, *, diff: bool = False, force: bool = False,
           dry_run: bool = False, bootloaders: bool = False,
           retire_bootstrap: bool | None = False, installed: Sequence[str] = (),
           reinstall: Sequence[str] = (), how: str = "marked by hand") -> RenderResult:
    """Load the inventory, render it to memory, and write it into `out` unless `dry_run`.

    With `bootloaders`, the host's pxelinux.0, ldlinux.c32 and grubx64.efi
    join the tftp/ tree (and manifest.json) like any rendered file. With
    `retire_bootstrap`, HAProxy's pools leave the bootstrap out (None: as the
    last render had it). The nodes recorded in DIR/installed.json (plus
    `installed`, minus `reinstall`; the record is updated in the same
    commit) get per-MAC files that boot their disk.
    """
    from upi.bootloaders import stage_bootloaders

    inv = load_inventory(inventory)
    loaders = stage_bootloaders() if bootloaders else None  # the host's files, not DIR's: before the lock
    req = RenderRequest(loaders, retire_bootstrap, installed, reinstall, how)
    return render_dir(inv, out, req, diff=diff, force=force, dry_run=dry_run)
