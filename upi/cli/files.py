"""Commands that write files: validate, render, schema, push, ignition."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from upi import console
from upi.cli.base import InventoryArg, JsonOpt, app, output_dir

TABLE_ROWS = 40


@app.command(
    epilog="\b\nExamples:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi validate inventories/dgxpod.yaml --json | jq .nodes"
)
def validate(inventory: InventoryArg, as_json: JsonOpt = False) -> None:
    """Check the inventory and print a summary of the cluster it describes."""
    from upi.commands.validate import summary, table_rows
    from upi.inventory import load_inventory

    doc = summary(load_inventory(inventory))
    if as_json:
        console.print_json(doc)
        console.finished()
        return
    console.say(f"{inventory}: valid. {doc['cluster']}, OpenShift {doc['openshift_version']}, "
                f"{doc['network_type']}, {doc['topology']} topology")
    if "machine_networks" in doc:
        console.say("machine networks: " + ", ".join(
            f"{m['name']} {m['cidr']}" + (f" (relay {m['relay']})" if m["relay"] else "")
            for m in doc["machine_networks"]))
    cols, rows = table_rows(doc)
    console.print_table(None, cols, rows)
    for w in doc["warnings"]:
        console.warn(w)
    console.finished()


@app.command(
    epilog="\b\nExamples:\n  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod --dry-run --diff\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod --bootloaders\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod --reinstall worker-1"
)
def render(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option("-o", "--output", help="Directory to write into.",
                                      parser=output_dir, metavar="DIR")],
    diff: Annotated[bool, typer.Option("--diff", help="Show a unified diff of what changes.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a directory holding files upi did not write.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would change.")
    ] = False,
    bootloaders: Annotated[
        bool,
        typer.Option("--bootloaders", help="Also stage pxelinux.0, ldlinux.c32 and grubx64.efi "
                     "from this host's packages into tftp/."),
    ] = False,
    retire_bootstrap: Annotated[
        bool,
        typer.Option("--retire-bootstrap", help="HAProxy without the bootstrap (after "
                     "bootstrap-complete; upi wait does this in its render dir)."),
    ] = False,
    installed: Annotated[list[str] | None, typer.Option(
        "--installed", metavar="NODE", help="Record NODE as installed: its PXE file boots its disk "
        "(upi wait does this as nodes join); repeatable (default: none).", show_default=False)] = None,
    reinstall: Annotated[list[str] | None, typer.Option(
        "--reinstall", metavar="NODE", help="Put NODE back to installing: its PXE file runs the "
        "RHCOS installer again; repeatable (default: none).", show_default=False)] = None,
) -> None:
    """Write every config file of the install (layout in docs/render.md)."""
    from upi.commands.render import render as do_render

    result = do_render(inventory, out, diff=diff, force=force, dry_run=dry_run,
                       bootloaders=bootloaders, retire_bootstrap=retire_bootstrap,
                       installed=installed or (), reinstall=reinstall or ())
    for note in result.warnings:
        console.warn(note)
    if result.installed:
        console.say("installed, PXE boots their disk: " + ", ".join(sorted(result.installed)))
    if result.diff:
        console.say(result.diff.rstrip("\n"))
    counts = {s: sum(1 for c in result.changes if c.status == s)
              for s in ("new", "changed", "unchanged", "removed")}
    touched = [c for c in result.changes if c.status != "unchanged"]
    if touched and not diff:
        # A table of every PXE file of a 5,000-node cluster helps nobody and
        # costs seconds: the first rows, then the counts below say the rest.
        rows: list[tuple[str, str]] = [(c.path, c.status) for c in touched[:TABLE_ROWS]]
        if len(touched) > TABLE_ROWS:
            rows.append((f"... and {len(touched) - TABLE_ROWS} more (manifest.json lists all)", ""))
        console.print_table(None, ["file", "status"], rows)
    verb = "would write" if not result.written else "wrote"
    console.say(f"{verb} {out}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    console.finished()


@app.command(epilog="\b\nExample:\n  upi schema > inventory.schema.json")
def schema() -> None:
    """Print the inventory's JSON Schema (for editor completion and checks)."""
    from upi.commands.render import schema as do_schema

    console.say(do_schema().rstrip("\n"))


@app.command(
    epilog="\b\nExamples:\n"
    "  upi images inventories/dgxpod.yaml -o out/dgxpod --from ~/Downloads/rhcos\n"
    "  upi images inventories/dgxpod.yaml -o out/dgxpod \\\n"
    "      --from https://mirror.openshift.com/pub/openshift-v4/x86_64/dependencies/rhcos/4.16/4.16.3\n"
    "  upi images inventories/dgxpod.yaml -o out/dgxpod \\\n"
    "      --shim /boot/efi/EFI/redhat/shimx64.efi --grub /boot/efi/EFI/redhat/grubx64.efi\n"
    "  upi images inventories/dgxpod.yaml -o out/dgxpod --iso rhcos-4.16.3-x86_64-live.x86_64.iso\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod    # then publish them"
)
def images(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option("-o", "--output", help="The render directory to stage into.",
                                      parser=output_dir, metavar="PATH")],
    src: Annotated[str | None, typer.Option(
        "--from", metavar="SRC", show_default=False,
        help="A directory holding the downloaded RHCOS files, or an http(s):// mirror URL "
        "(files fetched as SRC/NAME; SRC/sha256sum.txt is read when present) (default: none, "
        "only the signed loaders of --iso or --shim/--grub).")] = None,
    openshift_install: Annotated[Path | None, typer.Option(
        "--openshift-install", metavar="PATH",
        help="The installer binary (default: $UPI_OPENSHIFT_INSTALL, then PATH).")] = None,
    shim: Annotated[Path | None, typer.Option(
        "--shim", metavar="PATH",
        help="Signed shimx64.efi for Secure Boot nodes (with --grub; default: none).")] = None,
    grub: Annotated[Path | None, typer.Option(
        "--grub", metavar="PATH",
        help="The signed grubx64.efi of the same vendor (with --shim; default: none).")] = None,
    iso: Annotated[Path | None, typer.Option(
        "--iso", metavar="PATH", help="The RHCOS live ISO: shim and GRUB are taken from its EFI "
        "boot image (instead of --shim/--grub; default: none).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Stage the RHCOS kernel, initramfs and rootfs the boot files name, sha256-checked.

    Reads the RHCOS stream the installer was built for (`openshift-install
    coreos print-stream-json`) and warns when the inventory's `rhcos:` files
    are other ones. Kernel and initramfs go to DIR/tftp/, all files to
    DIR/http/, at the paths the boot files use; each is checked against the
    stream's sha256 (else SRC's sha256sum.txt) while it downloads, and a
    rerun resumes an interrupted download. They are recorded in
    manifest.json: `upi push` publishes them and `upi render` keeps them.
    A file whose sha256 differs is not staged, and the exit code is 1.

    With --iso (the live ISO of the installer's RHCOS, sha256-checked
    against its stream; shim and GRUB read from its EFI boot image, not
    mounted) or --shim and --grub, the signed UEFI loaders Secure Boot nodes
    boot (docs/secure-boot.md) go to DIR/tftp/shimx64.efi and grubx64.efi,
    each checked to be a signed EFI image, recorded and published the same way.
    """
    from upi.errors import CheckFailed
    from upi.images import images as do_images
    from upi.images import request_loaders

    staged = request_loaders(inventory, out, src, shim=shim, grub=grub, iso=iso,
                             installer=openshift_install, say=console.say)
    if staged and not as_json:
        console.print_table(f"Signed UEFI loaders in {out}", ["file", "bytes", "sha256"],
                            ((path, r["size"], r["sha256"][:16]) for path, r in staged.items()))
    if src is None:
        if as_json:
            console.print_json({"loaders": staged})
        console.finished()
        return
    with console.transfer_progress() as progress:
        result = do_images(inventory, out, src, installer=openshift_install, on_progress=progress)
    for note in result.warnings:
        console.warn(note)
    if as_json:
        console.print_json(result.to_json())
    else:
        console.print_table(f"RHCOS {result.release} files in {out}",
                            ["file", "status", "bytes", "sha256", "staged at"],
                            ((s.name, s.status, s.size or "", s.sha256[:16], ", ".join(s.targets))
                             for s in result.staged))
    if result.failed:
        raise CheckFailed(f"{len(result.failed)} of {len(result.staged)} RHCOS files not staged: "
                          + "; ".join(f"{s.name}: {s.detail}" for s in result.failed))
    if not as_json:
        console.say(f"staged {len(result.staged)} RHCOS files in {out}; `upi push` publishes them")


@app.command(
    epilog="\b\nExamples:\n  upi push inventories/dgxpod.yaml -o out/dgxpod --dry-run\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod --only load_balancer --json"
)
def push(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option(
        "-o", "--output", metavar="DIR", parser=output_dir, help="The render directory to push from.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Change nothing; show files, targets and commands.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option("--only", metavar="provisioner|load_balancer", show_default=False,
                     help="Push to one target only (default: both)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy rendered files to their hosts over SSH, validate them there, reload (docs/push.md)."""
    from upi.commands.push import push_command

    result = push_command(inventory, out, only=only, dry_run=dry_run)
    if as_json:
        console.print_json(result.to_json())
        return
    rows = ((f.target, f.host, f.source, f.dest, f.status) for f in result.files)
    console.print_table(None, ["target", "host", "file", "destination", "status"], rows)
    if result.steps:
        console.print_table("commands" + (" (would run)" if dry_run else ""), ["target", "why", "command"],
                            ((s.target, s.purpose, " ".join(s.argv)) for s in result.steps))
    for f in result.files:
        if f.status == "kept":
            console.say(f"{f.host}:{f.dest}: {f.note}")
    placed = [f for f in result.files if f.status not in ("removed", "kept")]
    uploaded = sum(f.status != "unchanged" for f in placed)
    removed = sum(f.status == "removed" for f in result.files)
    verb = "would upload" if dry_run else "uploaded"
    console.say(f"{verb} {uploaded} of {len(placed)} files"
                + (f", {'would remove' if dry_run else 'removed'} {removed} upi no longer renders"
                   if removed else ""))


@app.command(
    epilog="\b\nExamples:\n"
    "  upi ignition inventories/dgxpod.yaml --dir assets/dgxpod    # straight to the HTTP root\n"
    "  upi ignition inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod    # then publish them (boot within 12 h)\n"
    "  upi ignition inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod --force \\\n"
    "      --openshift-install ~/bin/openshift-install-4.16"
)
def ignition(
    inventory: InventoryArg,
    assets: Annotated[Path, typer.Option(
        "--dir", metavar="ASSETS", help="openshift-install's assets directory (auth/ stays here).",
        show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", parser=output_dir,
        help="Render dir: stage the files in its http/ignition/ for `upi push` (default: none, "
        "publish them to the provisioner's HTTP root at once).",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Move an older install's files in --dir aside and start afresh.")] = False,
    openshift_install: Annotated[Path | None, typer.Option(
        "--openshift-install", metavar="PATH",
        help="The installer binary (default: $UPI_OPENSHIFT_INSTALL, then PATH).")] = None,
) -> None:
    """Make the Ignition files with openshift-install and stage them for the HTTP server.

    Writes install-config.yaml (as upi render does) into --dir, runs `create
    manifests`, sets mastersSchedulable (true only for a compact cluster),
    runs `create ignition-configs`, and copies bootstrap/master/worker.ign
    (0644) to DIR/http/ignition/ for `upi push`, or without -o straight to
    the provisioner's HTTP root. Boot the nodes within 12 h: the
    certificates inside expire after 24 h.
    """
    from upi.ignition import make_ignition
    from upi.installer_log import display, parse_line

    def show(line: str) -> None:
        if console.shows(parse_line(line).level):  # the installer's debug lines only with -v
            console.progress(f"  {display(line)}")

    def note(message: str) -> None:  # under the installer's warning, shown when it is
        if console.shows("warn"):
            console.say_err(f"  upi: {message}")

    result = make_ignition(inventory, assets, out, force=force, installer=openshift_install, on_line=show,
                           on_warning=console.warn, on_note=note)
    if result.moved_aside:
        console.say(f"moved the older install's files to {result.moved_aside}")
    console.print_table(f"Ignition files ({result.installer_version})", ["file", "sha256", "bytes", "url"],
                        ((f.name, f.sha256[:16], f.size, f.url or "(no node of this role)")
                         for f in result.files))
    made = result.made_at.isoformat(timespec="seconds")
    if result.published is not None:
        console.print_table("Published", ["host", "destination", "status"],
                            ((f.host, f.dest, f.status) for f in result.published.files))
        where = "published to the provisioner's HTTP root"
    else:
        where = f"staged in {result.stage_dir} (0644) for `upi push`"
    console.say(f"made {made}; {where}; "
                f"mastersSchedulable: {str(result.masters_schedulable).lower()}")
    console.say(f"boot the nodes within 12 h: the certificates expire at "
                f"{result.expires_at.isoformat(timespec='seconds')}")
    console.say(f"admin credentials: {assets / 'auth' / 'kubeconfig'} and kubeadmin-password (0600)")
