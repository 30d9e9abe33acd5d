"""Which files upi placed on a host: a ledger per target root, so a later push removes only its own.

A node taken out of the inventory leaves its per-MAC boot files (and its
own ignition file) on the provisioner unless someone removes them; the
render no longer has them, so push never looks at them again. Each push
therefore records, in a hidden file beside the files of each root it
writes (`<root>/.upi-owned.<cluster domain>.json`), every file it put
there with the sha256 it put. The next full push (`upi push`, not the
single-file `push_files`) removes a recorded file the render no longer
has, and only when the file on the host is still the one upi wrote
(regular file, same sha256) and no other cluster's ledger in that root
records it: an admin's own file in the TFTP root is never in a ledger,
and one changed by hand is reported and left alone.

The ledger is world-readable (the TFTP server serves it), so `upi check
tftp` fetches it and names a recorded file still served that belongs to
no inventory node.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from upi.push.model import FileStatus, Item, Kind, PushError, TargetName
from upi.safefs import relpath

if TYPE_CHECKING:  # `upi check` reads ledgers (parse) without importing SSH
    from upi.remote import Transport

# The roots whose files can go stale (one per-MAC file per node, a file per day-2 node);
# haproxy.cfg is one file, rewritten in place, never removed.
TRACKED: tuple[Kind, ...] = ("dnsmasq", "tftp", "http")
LEDGER_LIMIT = 16 << 20
PREFIX = ".upi-owned."


def ledger_name(domain: str) -> str:
    """The ledger's file name in each root, for the cluster `domain` (hidden, like push's temporaries)."""
    return f"{PREFIX}{domain}.json"


@dataclass(frozen=True)
class Entry:
    """One file upi placed in a root: what it is and the sha256 it had."""

    kind: Kind
    sha256: str


@dataclass
class Ledger:
    """The ledger of one root on one host, as found, and the entries of other clusters' ledgers there."""

    root: str
    path: str
    found: dict[str, Entry]  # rel -> entry, as read from the host ({} when absent)
    others: set[str]  # rels another cluster's ledger in this root records

    def dest(self, rel: str) -> str:
        """The file's path on the host."""
        return posixpath.join(self.root, rel)


@dataclass(frozen=True)
class Stale:
    """A recorded file of a prune root that the push no longer places, and what becomes of it.

    action: `remove` (still the file upi wrote), `keep` (changed since, or no
    longer a regular file: left in place, still recorded, reported at every
    push), `release` (another cluster's ledger records it too: left, and
    dropped from this one), `gone` (not on the host any more: dropped).
    """

    ledger: Ledger
    rel: str
    kind: Kind
    action: Literal["remove", "keep", "release", "gone"]
    note: str = ""

    @property
    def dest(self) -> str:
        """The file's path on the host."""
        return self.ledger.dest(self.rel)

    def status(self, target: TargetName, host: str) -> FileStatus:
        """Its row in the push's report (source: where the render had it)."""
        return FileStatus(target, host, f"{self.kind}/{self.rel}", self.dest,
                          "removed" if self.action == "remove" else "kept", self.note)


def find_stale(candidates: list[tuple[Ledger, str]], modes: dict[str, int],
               digests: dict[str, str], linked: set[str] | frozenset[str] = frozenset()) -> list[Stale]:
    """Decide each candidate from what the host has at its path: its raw st_mode and sha256.

    `linked`: directories below a root that are not real directories (a
    symbolic link there leads elsewhere): a file below one is never removed.
    """
    out = []
    for lg, rel in candidates:
        entry, path = lg.found[rel], lg.dest(rel)
        if any(path.startswith(d + "/") for d in linked):
            out.append(Stale(lg, rel, entry.kind, "keep",
                             "no longer rendered, but a directory on its way is a symbolic link: "
                             "upi never removes through it; left in place"))
        elif path not in modes:
            out.append(Stale(lg, rel, entry.kind, "gone"))
        elif rel in lg.others:
            out.append(Stale(lg, rel, entry.kind, "release",
                             "no longer rendered, but another cluster's ledger in this root records "
                             "it: left in place"))
        elif not stat.S_ISREG(modes[path]) or digests.get(path) != entry.sha256:
            out.append(Stale(lg, rel, entry.kind, "keep",
                             "no longer rendered, but changed since upi placed it: left in place; "
                             "remove it by hand if nothing uses it"))
        else:
            out.append(Stale(lg, rel, entry.kind, "remove", "no longer rendered"))
    return out


def removable(stale: list[Stale]) -> list[Stale]:
    """The stale files a push removes."""
    return [s for s in stale if s.action == "remove"]


def parse(raw: bytes) -> dict[str, Entry]:
    """A ledger's entries; only plain relative paths with a known kind and a sha256 are kept.

    The ledger sits on the host, so it is read as hostile: an entry that
    would lead outside its root is dropped, never acted on.
    """
    try:
        doc: Any = json.loads(raw)
        files = doc["files"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return {}
    out = {}
    if not isinstance(files, dict):
        return {}
    for rel, meta in files.items():
        kind = meta.get("kind") if isinstance(meta, dict) else None
        sha = meta.get("sha256") if isinstance(meta, dict) else None
        if relpath(rel) == rel and kind in TRACKED and isinstance(sha, str) and len(sha) == 64:
            out[rel] = Entry(kind, sha)
    return out


def dump(domain: str, entries: dict[str, Entry]) -> bytes:
    """The ledger's bytes (sorted: the same set is the same file)."""
    doc = {"cluster": domain, "written_by": "upi push",
           "files": {rel: {"kind": e.kind, "sha256": e.sha256} for rel, e in sorted(entries.items())}}
    return (json.dumps(doc, indent=2) + "\n").encode()


def _read(t: Transport, path: str) -> dict[str, Entry]:
    """The ledger at `path`, if it is a regular file there ({} otherwise: nothing is removed)."""
    res = t.run(["stat", "-c", "%f", "--", path])
    if res.returncode != 0:
        return {}
    with contextlib.suppress(ValueError):
        if not stat.S_ISREG(int(res.stdout.strip() or "0", 16)):
            return {}
    try:
        return parse(t.read_tail(path, LEDGER_LIMIT))
    except OSError:
        return {}


def roots_of(items: list[Item]) -> dict[str, list[Item]]:
    """The tracked items grouped by the root they are placed below."""
    out: dict[str, list[Item]] = {}
    for item in items:
        if item.kind in TRACKED:
            out.setdefault(posixpath.normpath(item.root), []).append(item)
    return out


def read_ledgers(t: Transport, domain: str, roots: list[str]) -> list[Ledger]:
    """The ledger of each root for the cluster, with what other clusters' ledgers there record."""
    mine = ledger_name(domain)
    out = []
    for root in roots:
        res = t.run(["find", root, "-maxdepth", "1", "-type", "f", "-name", f"{PREFIX}*.json"])
        others: set[str] = set()
        for path in res.stdout.splitlines() if res.returncode == 0 else []:
            if posixpath.basename(path) != mine:
                others |= set(_read(t, path))
        out.append(Ledger(root, posixpath.join(root, mine), _read(t, posixpath.join(root, mine)), others))
    return out


def updated(ledger: Ledger, items: list[Item], *, prune: set[str]) -> dict[str, Entry]:
    """The ledger after this push: every item placed in its root, minus the rels in `prune`."""
    entries = {rel: e for rel, e in ledger.found.items() if rel not in prune}
    for item in items:
        rel = posixpath.relpath(item.dest, ledger.root)
        entries[rel] = Entry(item.kind, item.sha256)
    return entries


def write(t: Transport, ledger: Ledger, content: bytes) -> list[str]:
    """Put the ledger in place (staged beside it, then renamed); the rename's argv."""
    staged = posixpath.join(ledger.root, f".{posixpath.basename(ledger.path)}.upi-new")
    t.write_file(staged, content, 0o644)
    argv = ["mv", "-fT", "--", staged, ledger.path]
    res = t.run(argv)
    if res.returncode != 0:
        t.run(["rm", "-f", "--", staged])
        raise PushError(f"{t.name}: recording upi's files in {ledger.path} failed "
                        f"(exit {res.returncode}): {(res.stderr or res.stdout).strip()[-400:]}")
    return argv
