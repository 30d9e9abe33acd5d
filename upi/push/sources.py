"""Which rendered file goes where: the render dir, mapped onto the inventory's hosts."""

from __future__ import annotations

import json
import posixpath
import stat
from pathlib import Path

from upi.errors import UsageError
from upi.inventory.model import Inventory, SshTarget
from upi.push.model import Item, TargetName, TargetPlan
from upi.render import MANIFEST, PUBLIC, RenderedFile
from upi.safefs import Tree
from upi.writer import manifest_images, previous_manifest

HTTP_DIR = "http"
DEFAULT_RELOAD: dict[TargetName, list[str]] = {
    # SIGHUP (systemctl reload) does NOT make dnsmasq re-read its config files.
    "provisioner": ["systemctl", "restart", "dnsmasq"],
    "load_balancer": ["systemctl", "reload", "haproxy"],
}


def ssh_of(inv: Inventory, target: TargetName) -> tuple[SshTarget | None, str]:
    """A target's `ssh` section and the address used when it names no host."""
    if target == "provisioner":
        return inv.provisioner.ssh, str(inv.provisioner.ip)
    return inv.load_balancer.ssh, str(inv.load_balancer.ip)


def _item(inv: Inventory, f: RenderedFile | None, path: str, local: Path | None = None
          ) -> tuple[TargetName, Item] | None:
    content = f.content if f else None
    mode = f.mode if f else PUBLIC
    top, _, rest = path.partition("/")
    prov = inv.provisioner
    if top == "dnsmasq" and path.endswith(".conf") and "/" not in rest:
        return "provisioner", Item(path, posixpath.join(prov.dnsmasq_dir, rest), mode, "dnsmasq",
                                   content, local)
    if top == "tftp" and rest:
        return "provisioner", Item(path, posixpath.join(prov.tftp_root, rest), mode, "tftp",
                                   content, local)
    if top == HTTP_DIR and rest:
        # The HTTP server (and the nodes) must read ignition and RHCOS files: 0644 there.
        return "provisioner", Item(path, posixpath.join(prov.http_root, rest), PUBLIC, "http",
                                   content, local)
    if path == "haproxy/haproxy.cfg":
        return "load_balancer", Item(path, inv.load_balancer.config_path, mode, "haproxy",
                                     content, local)
    return None


def plans_for(inv: Inventory, files: list[RenderedFile], only: TargetName | None = None,
              extra: list[tuple[str, Path]] | None = None) -> list[TargetPlan]:
    """Group files by target; files no host needs (vms/, csr/, install-config) are left out."""
    grouped: dict[TargetName, list[Item]] = {}
    mapped = [_item(inv, f, f.path) for f in files]
    mapped += [_item(inv, None, path, local) for path, local in extra or []]
    for entry in mapped:
        if entry and (only is None or entry[0] == only):
            grouped.setdefault(entry[0], []).append(entry[1])
    plans = []
    for name, items in grouped.items():
        ssh, _ = ssh_of(inv, name)
        reload = list(ssh.reload_command) if ssh and ssh.reload_command else DEFAULT_RELOAD[name]
        plans.append(TargetPlan(name, items, reload))
    return plans


def _manifest(out: Path, inv: Inventory) -> dict[str, dict[str, str]]:
    try:
        doc = json.loads((out / MANIFEST).read_text())
        files: dict[str, dict[str, str]] = doc["files"]
        cluster = doc.get("cluster")
    except FileNotFoundError:
        raise UsageError(f"{out / MANIFEST} not found: run `upi render INVENTORY -o {out}` first") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{out / MANIFEST} is unreadable ({exc}): run `upi render` again") from None
    if cluster != inv.cluster.domain:
        raise UsageError(f"{out} was rendered for {cluster}, not {inv.cluster.domain}: "
                         "pass the render dir of this inventory")
    return files


def read_render_dir(inv: Inventory, out: Path) -> tuple[list[RenderedFile], list[tuple[str, Path]]]:
    """The pushable files of a render dir, checked against its manifest, and the http/ tree.

    A file that differs from manifest.json was edited after `upi render`: refused,
    so what reaches a host is always what render wrote.
    """
    files = []
    for path, meta in sorted(_manifest(out, inv).items()):
        if _item(inv, None, path) is None:
            continue
        try:
            rendered = RenderedFile(path, (out / path).read_bytes(), int(meta["mode"], 8))
        except OSError as exc:
            raise UsageError(f"{out / path}: {exc.strerror}: run `upi render` again") from None
        if rendered.sha256 != meta["sha256"]:
            raise UsageError(f"{out / path} differs from {MANIFEST} (edited after `upi render`?): "
                             "run `upi render` again")
        files.append(rendered)
    http = out / HTTP_DIR
    extra = sorted(
        (p.relative_to(out).as_posix(), p) for p in (http.rglob("*") if http.is_dir() else [])
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(http).parts))
    return files, extra + _tftp_images(out)


def _tftp_images(out: Path) -> list[tuple[str, Path]]:
    """Kernel and initramfs `upi images` staged under tftp/ (http/ ones are in the walk above).

    manifest.json is hostile input: only plain paths recorded there, reached without a
    symlink, that are regular files, are pushed.
    """
    images = [p for p in manifest_images(previous_manifest(out)) if p.startswith("tftp/")]
    found = []
    with Tree.open(out) as tree:
        for path in sorted(images):
            st = tree.lstat(path)
            if st is None or not stat.S_ISREG(st.st_mode):
                raise UsageError(f"{out / path} is recorded in {MANIFEST} by `upi images` but is "
                                 "missing or not a regular file: run `upi images` again")
            found.append((path, out / path))
    return found
