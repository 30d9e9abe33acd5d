"""Which rendered file goes where: the render dir, mapped onto the inventory's hosts."""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
from pathlib import Path
from typing import Any

from upi.errors import UpiError, UsageError
from upi.inventory.model import Inventory
from upi.ownignition import own_nodes
from upi.ownignition import read_record as read_own
from upi.push.model import Item, LocalFile, TargetName, TargetPlan
from upi.remote import host_access
from upi.render import MANIFEST, PUBLIC, RenderedFile
from upi.safefs import Tree, kind_of, relpath, shown
from upi.writer import manifest_images

HTTP_DIR = "http"
IGNITION_DIR = "ignition"  # http/ignition/: `upi ignition` stages the Ignition configs here
MANIFEST_LIMIT = 64 << 20
FILE_LIMIT = 256 << 20  # a rendered file (configs, boot loaders); RHCOS images are in http/
DEFAULT_RELOAD: dict[TargetName, list[str]] = {
    # SIGHUP (systemctl reload) does NOT make dnsmasq re-read its config files.
    "provisioner": ["systemctl", "restart", "dnsmasq"],
    "load_balancer": ["systemctl", "reload", "haproxy"],
}


def _item(inv: Inventory, f: RenderedFile | None, path: str, local: LocalFile | None = None
          ) -> tuple[TargetName, Item] | None:
    """Where `path` of the render dir goes; None for files no host needs.

    `path` must already be a plain relative path (safefs.relpath): joined to a
    root, it stays below that root.
    """
    content = f.content if f else None
    mode = f.mode if f else PUBLIC
    top, _, rest = path.partition("/")
    prov = inv.provisioner
    if top == "dnsmasq" and path.endswith(".conf") and "/" not in rest:
        return "provisioner", Item(path, posixpath.join(prov.dnsmasq_dir, rest), mode, "dnsmasq",
                                   content, local, prov.dnsmasq_dir)
    if top == "tftp" and rest:
        return "provisioner", Item(path, posixpath.join(prov.tftp_root, rest), mode, "tftp",
                                   content, local, prov.tftp_root)
    if top == HTTP_DIR and rest:
        # The HTTP server (and the nodes) must read ignition and RHCOS files: 0644 there.
        return "provisioner", Item(path, posixpath.join(prov.http_root, rest), PUBLIC, "http",
                                   content, local, prov.http_root)
    if path == "haproxy/haproxy.cfg":
        cfg = inv.load_balancer.config_path
        return "load_balancer", Item(path, cfg, mode, "haproxy", content, local,
                                     posixpath.dirname(cfg))
    return None


def plans_for(inv: Inventory, files: list[RenderedFile], only: TargetName | None = None,
              extra: list[tuple[str, LocalFile]] | None = None) -> list[TargetPlan]:
    """Group files by target; files no host needs (vms/, csr/, install-config) are left out."""
    grouped: dict[TargetName, list[Item]] = {}
    for f in files:
        if relpath(f.path) is None:
            raise UsageError(f"{str(f.path)[:80]!r} is not a plain relative path: refused")
    mapped = [_item(inv, f, f.path) for f in files]
    mapped += [_item(inv, None, path, local) for path, local in extra or []]
    for entry in mapped:
        if entry and (only is None or entry[0] == only):
            grouped.setdefault(entry[0], []).append(entry[1])
    plans = []
    for name, items in grouped.items():
        ssh, _ = host_access(inv, name)
        reload = list(ssh.reload_command) if ssh.reload_command else DEFAULT_RELOAD[name]
        plans.append(TargetPlan(name, items, reload, inv.cluster.domain))
    return plans


def owned_roots(inv: Inventory, name: TargetName) -> tuple[str, ...]:
    """The roots of a target whose files can go stale (upi.push.owned.TRACKED): a full push prunes them."""
    if name != "provisioner":
        return ()
    prov = inv.provisioner
    return tuple(dict.fromkeys(posixpath.normpath(r) for r in (prov.dnsmasq_dir, prov.tftp_root,
                                                                prov.http_root)))


def _manifest(tree: Tree, out: Path, inv: Inventory) -> dict[str, Any]:
    """manifest.json, checked to be a JSON object for this cluster with a `files` mapping."""
    where = shown(out / MANIFEST)
    try:
        data = tree.read(MANIFEST, MANIFEST_LIMIT)
        if data is None and (st := tree.lstat(MANIFEST)) is not None:
            raise UsageError(f"{where} is {kind_of(st.st_mode)}, not a file upi render wrote: "
                             "refused; remove it and run `upi render` again")
        if data is None:
            raise FileNotFoundError
        doc: dict[str, Any] = json.loads(data)
        files = doc["files"]
        cluster = doc.get("cluster")
    except FileNotFoundError:
        raise UsageError(f"{where} not found: "
                         f"run `upi render INVENTORY -o {shown(out)}` first") from None
    except UsageError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RecursionError, UpiError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else type(exc).__name__
        raise UsageError(f"{where} is unreadable ({why}): run `upi render` again") from None
    if not isinstance(files, dict):
        raise UsageError(f"{where}: \"files\" is not a mapping: run `upi render` again")
    if cluster != inv.cluster.domain:
        raise UsageError(f"{shown(out)} was rendered for {str(cluster)[:80]!r}, not "
                         f"{inv.cluster.domain}: pass the render dir of this inventory")
    return doc


def _entry(where: str, path: object, meta: object) -> tuple[str, str, int]:
    """A manifest entry checked: (path, sha256, mode); UsageError naming it otherwise."""
    rel = relpath(path)
    if rel is None:
        raise UsageError(
            f"{where}: the entry {str(path)[:80]!r} is not a plain relative path inside the render "
            "dir (absolute, `..`, empty or control characters): refused, nothing was pushed. "
            "manifest.json is written by `upi render`; run it again")
    sha = meta.get("sha256") if isinstance(meta, dict) else None
    mode = meta.get("mode") if isinstance(meta, dict) else None
    bits = int(mode, 8) if isinstance(mode, str) and re.fullmatch(r"[0-7]{3,4}", mode) else -1
    # Never group/other-writable, never setuid/setgid/sticky: render writes 0600, 0644, 0755.
    if not isinstance(sha, str) or not 0 <= bits <= 0o777 or bits & 0o022:
        raise UsageError(f"{where}: the entry {rel!r} has no valid sha256 and mode (0600/0644/0755): "
                         "run `upi render` again")
    return rel, sha, bits


def _local(out: Path, rel: str, st: os.stat_result, record: dict[str, Any] | None) -> LocalFile:
    """A file to publish, pinned to its inode; an image keeps its record's sha256 to be checked.

    Its size is checked here, before any host is touched; its sha256 when it is hashed.
    """
    if record is None:
        return LocalFile(out / rel, st.st_dev, st.st_ino)
    local = LocalFile(out / rel, st.st_dev, st.st_ino, record["sha256"])
    if st.st_size != record["size"]:
        raise local.changed_since_staged(f"{st.st_size:,} bytes, recorded {record['size']:,}")
    return local


def _http_tree(tree: Tree, out: Path, images: dict[str, dict[str, Any]]) -> list[tuple[str, LocalFile]]:
    """The files under http/ to publish, with the inode each was checked as.

    Refused (exit 2), since each is published 0644 on the HTTP server: a
    symbolic link (it could point at a private key), anything but a regular
    file, a name with control characters; and, but for the Ignition configs
    (http/ignition/*.ign, served to the nodes by design whatever their mode
    here), a file others may not read here (publishing would widen it) or
    one holding a PEM private key.
    Dot files and dot directories are skipped, as before.
    """
    found = []
    for rel, st in sorted(tree.walk(HTTP_DIR)):
        parts = rel.split("/")[1:]
        if any(part.startswith(".") for part in parts):
            continue
        path = out / rel
        if relpath(rel) is None:
            raise UsageError(f"{shown(path)!r}: a name under {HTTP_DIR}/ with control characters or "
                             "a backslash: refused; rename it")
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{shown(path)} is a symbolic link: push publishes {HTTP_DIR}/ to the "
                             "HTTP server and never follows links there; copy the file in instead")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{shown(path)} is {kind_of(st.st_mode)}: only regular files are "
                             f"published from {HTTP_DIR}/; remove it")
        ignition = parts[0] == IGNITION_DIR and rel.endswith(".ign")
        if not ignition and not st.st_mode & stat.S_IROTH:
            raise UsageError(
                f"{shown(path)} is mode {stat.S_IMODE(st.st_mode):04o} (private) and push would "
                f"publish it 0644 on the HTTP server: `chmod a+r` it if it is meant to be served, "
                f"or move it out of {HTTP_DIR}/")
        if not ignition and _private_key(tree, rel):
            raise UsageError(f"{shown(path)} holds a PEM PRIVATE KEY: never published; move it out "
                             f"of {HTTP_DIR}/")
        found.append((rel, _local(out, rel, st, images.get(rel))))
    return found


PEM_KEY = b"PRIVATE KEY-----"  # the end of `-----BEGIN [RSA |EC |OPENSSH |ENCRYPTED ]PRIVATE KEY-----`
SCAN_CHUNK = 1 << 20


def _private_key(tree: Tree, rel: str) -> bool:
    """Whether the file holds a PEM private key anywhere: read whole, a chunk at a time.

    A key appended after the first bytes is published all the same, so every
    byte is looked at; memory stays one chunk (an RHCOS rootfs is ~1 GB). The
    last bytes of each chunk are kept, so a marker split across two is found.
    """
    dfd, name = tree.parent_of(rel)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    try:
        return contains(fd, PEM_KEY)
    finally:
        os.close(fd)


def contains(fd: int, needle: bytes, chunk: int = SCAN_CHUNK) -> bool:
    """Whether the open file `fd` holds `needle`, read from its start in `chunk`-byte pieces."""
    keep = len(needle) - 1
    carry, offset = b"", 0
    while data := os.pread(fd, chunk, offset):
        if needle in data or needle in carry + data[:keep]:
            return True
        carry = (carry + data)[-keep:] if len(data) < keep else data[-keep:]
        offset += len(data)
    return False


def read_render_dir(inv: Inventory, out: Path) -> tuple[list[RenderedFile], list[tuple[str, LocalFile]]]:
    """The pushable files of a render dir, checked against its manifest, and the http/ tree.

    A file that differs from manifest.json was edited after `upi render`: refused,
    so what reaches a host is always what render wrote. Every path read back
    from disk is hostile until checked (safefs): a manifest entry that is
    absolute or has `..`, or a symbolic link on the way to a file, is refused,
    never followed.
    """
    try:
        tree = Tree.open(out)
    except OSError as exc:
        raise UsageError(f"cannot read the render dir {shown(out)}: {exc.strerror}") from None
    with tree:
        where = shown(out / MANIFEST)
        doc = _manifest(tree, out, inv)
        files = []
        for path, meta in sorted(doc["files"].items()):
            rel, sha, mode = _entry(where, path, meta)
            if _item(inv, None, rel) is None:
                continue
            data = tree.read(rel, FILE_LIMIT)
            if data is None:
                raise UsageError(f"{shown(out / rel)} is missing, a symbolic link or not a regular "
                                 "file: run `upi render` again")
            rendered = RenderedFile(rel, data, mode)
            if rendered.sha256 != sha:
                raise UsageError(f"{shown(out / rel)} differs from {MANIFEST} (edited after "
                                 "`upi render`?): run `upi render` again")
            files.append(rendered)
        images = manifest_images(doc)
        own = own_nodes(inv, read_own(tree))
        http = [(rel, local) for rel, local in _http_tree(tree, out, images)
                if not _unrecorded_own_ignition(own, rel)]
        published = {rel for rel, _ in http}
        _own_published(out, own, published)
        gone = sorted(p for p in images if p.startswith(f"{HTTP_DIR}/") and p not in published)
        if gone:  # as _tftp_images refuses a missing tftp/ one
            raise UsageError(_unstaged(out, gone[0]))
        return files, http + _tftp_images(tree, out, images)


def _unrecorded_own_ignition(own: frozenset[str], rel: str) -> bool:
    """Whether `rel` is a node's own ignition file (http/ignition/nodes/) that is not published.

    Only the inventory's workers `upi nodes add` recorded (upi.ownignition)
    have theirs published: a file copied in by hand is not, and a node taken
    out of the inventory has its file removed from the HTTP server by the
    push (upi.push.owned), though it stays in DIR.
    """
    from upi.facts.boot import OWN_IGNITION_DIR

    head, _, name = rel.removeprefix(f"{HTTP_DIR}/").rpartition("/")
    return head == OWN_IGNITION_DIR and name.removesuffix(".ign") not in own


def _own_published(out: Path, own: frozenset[str], published: set[str]) -> None:
    """Each recorded node's own ignition is there to publish: its PXE file names it (UsageError otherwise)."""
    from upi.facts.boot import own_ignition_path

    for name in sorted(own):
        rel = f"{HTTP_DIR}/{own_ignition_path(name)}"
        if rel not in published:
            raise UsageError(
                f"{shown(out / rel)} is missing (or not a regular file), but own-ignition.json records "
                f"that {name} boots it: nothing was pushed. Run `upi nodes add INVENTORY {name} -o "
                f"{shown(out)}` again: it fetches the ignition the cluster serves now")


def _unstaged(out: Path, path: str) -> str:
    return (f"{shown(out / path)} is recorded in {MANIFEST} by `upi images` but is missing or not "
            "a regular file: run `upi images` again")


def _tftp_images(tree: Tree, out: Path, images: dict[str, dict[str, Any]]) -> list[tuple[str, LocalFile]]:
    """Kernel and initramfs `upi images` staged under tftp/ (http/ ones are in the walk above).

    manifest.json is hostile input: only plain paths recorded there, reached without a
    symlink, that are regular files, are pushed.
    """
    found = []
    for path in sorted(p for p in images if p.startswith("tftp/")):
        st = tree.lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            raise UsageError(_unstaged(out, path))
        found.append((path, _local(out, path, st, images[path])))
    return found
