"""The `upi` command line: thin Typer adapters over the library.

Heavy modules (pydantic, jinja2, libvirt, lightkube) are imported inside the
commands so that `upi --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from upi import console


class UpiGroup(TyperGroup):
    """Maps every UpiError to its message and exit code: the one place that does."""

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a UpiError becomes a message and an exit code."""
        from upi.errors import InventoryError, UpiError

        try:
            return super().invoke(ctx)
        except InventoryError as exc:
            n = len(exc.problems)
            if n > 1:
                console.error(f"the inventory has {n} problems:")
                for problem in exc.problems:
                    console.say_err(f"  {problem}")
            else:
                console.error(exc.problems[0] if exc.problems else str(exc))
            raise typer.Exit(exc.exit_code) from None
        except UpiError as exc:
            console.error(str(exc))
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=UpiGroup,
    name="upi",
    help="OpenShift 4 bare-metal UPI from one inventory file.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)



def _version(value: bool) -> None:
    if value:
        from upi import __version__

        console.say(f"upi {__version__}")
        raise typer.Exit(0)


@app.callback(
    epilog="\b\nQuick start:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "Reference: docs/cli.md; the inventory: docs/inventory.md"
)
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """OpenShift 4 bare-metal UPI from one inventory file.

    Renders install-config, DNS, DHCP/PXE, HAProxy and VM definitions, checks
    them, boots the control-plane VMs, approves node CSRs safely and drives
    the installer to the end.
    """


InventoryArg = Annotated[
    Path, typer.Argument(metavar="INVENTORY", help="The inventory YAML file.", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


@app.command(
    epilog="\b\nExamples:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi validate inventories/dgxpod.yaml --json | jq .nodes"
)
def validate(inventory: InventoryArg, as_json: JsonOpt = False) -> None:
    """Check the inventory and print a summary of the cluster it describes."""
    from upi.commands.render import summary
    from upi.inventory import load_inventory

    doc = summary(load_inventory(inventory))
    if as_json:
        console.print_json(doc)
        return
    console.say(f"{inventory}: valid. {doc['cluster']}, OpenShift {doc['openshift_version']}, "
                f"{doc['network_type']}, {doc['topology']} topology")
    cols = ["name", "role", "machine", "firmware", "mac", "ip", "install_disk", "gpu"]
    console.print_table(None, cols, ([n[c] for c in cols] for n in doc["nodes"]))
    for w in doc["warnings"]:
        console.warn(w)


@app.command(
    epilog="\b\nExamples:\n  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod --dry-run --diff"
)
def render(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option("-o", "--output", help="Directory to write into.")],
    diff: Annotated[bool, typer.Option("--diff", help="Show a unified diff of what changes.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a directory holding files upi did not write.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would change.")
    ] = False,
) -> None:
    """Write every config file of the install (layout in docs/render.md)."""
    from upi.commands.render import render as do_render

    result = do_render(inventory, out, diff=diff, force=force, dry_run=dry_run)
    if result.diff:
        console.say(result.diff.rstrip("\n"))
    counts = {s: sum(1 for c in result.changes if c.status == s)
              for s in ("new", "changed", "unchanged", "removed")}
    touched = [c for c in result.changes if c.status != "unchanged"]
    if touched and not diff:
        console.print_table(None, ["file", "status"], ((c.path, c.status) for c in touched))
    verb = "would write" if not result.written else "wrote"
    console.say(f"{verb} {out}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))


@app.command(epilog="\b\nExample:\n  upi schema > inventory.schema.json")
def schema() -> None:
    """Print the inventory's JSON Schema (for editor completion and checks)."""
    from upi.commands.render import schema as do_schema

    console.say(do_schema().rstrip("\n"))


@app.command(
    epilog="\b\nExamples:\n  upi push inventories/dgxpod.yaml -o out/dgxpod --dry-run\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod --only load_balancer --json"
)
def push(
    inventory: InventoryArg,
    out: Annotated[Path, typer.Option("-o", "--output", help="The render directory to push from.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Change nothing; show files, targets and commands.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option("--only", metavar="provisioner|load_balancer", help="Push to one target only."),
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
    verb = "would upload" if dry_run else "uploaded"
    console.say(f"{verb} {len(result.changed)} of {len(result.files)} files")


@app.command(
    epilog="\b\nExamples:\n  upi ignition inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod\n"
    "  upi ignition inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod --force \\\n"
    "      --openshift-install ~/bin/openshift-install-4.16\n"
    "  upi push inventories/dgxpod.yaml -o out/dgxpod    # then publish them (boot within 12 h)"
)
def ignition(
    inventory: InventoryArg,
    assets: Annotated[Path, typer.Option(
        "--dir", help="openshift-install's assets directory (auth/ stays here).", show_default=False)],
    out: Annotated[Path, typer.Option(
        "-o", "--output", help="Render dir: the files are staged in its http/ignition/ for upi push.",
        show_default=False)],
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
    (0644) to DIR/http/ignition/. Boot the nodes within 12 h: the
    certificates inside expire after 24 h.
    """
    from upi.ignition import make_ignition
    from upi.installer_log import display

    result = make_ignition(inventory, assets, out, force=force, installer=openshift_install,
                           on_line=lambda line: console.say_err(f"  {display(line)}"),
                           on_warning=console.warn)
    if result.moved_aside:
        console.say(f"moved the older install's files to {result.moved_aside}")
    console.print_table(f"Ignition files ({result.installer_version})", ["file", "sha256", "bytes", "url"],
                        ((f.name, f.sha256[:16], f.size, f.url or "(no node of this role)")
                         for f in result.files))
    made = result.made_at.isoformat(timespec="seconds")
    console.say(f"made {made}; staged in {result.stage_dir} (0644) for `upi push`; "
                f"mastersSchedulable: {str(result.masters_schedulable).lower()}")
    console.say(f"boot the nodes within 12 h: the certificates expire at "
                f"{result.expires_at.isoformat(timespec='seconds')}")
    console.say(f"admin credentials: {assets / 'auth' / 'kubeconfig'} and kubeadmin-password (0600)")


@app.command(
    "boot-vms",
    epilog="\b\nExamples:\n  upi boot-vms inventories/dgxpod.yaml --dry-run\n"
    "  upi boot-vms inventories/dgxpod.yaml --watch --timeout 3600\n"
    "  upi boot-vms inventories/dgxpod.yaml --connect qemu+ssh://root@kvm1/system\n"
    "  upi boot-vms inventories/dgxpod.yaml --destroy bootstrap",
)
def boot_vms(
    inventory: InventoryArg,
    connect: Annotated[
        str | None,
        typer.Option("--connect", metavar="URI", help="libvirt URI for every VM (overrides the inventory)."),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Wait for each install to power its VM off, then start it from disk."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Change nothing; print the plan and domain XML.")
    ] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Redefine VMs that exist but differ from the inventory.")
    ] = False,
    destroy: Annotated[
        str | None, typer.Option("--destroy", metavar="NAME", help="Remove the VM NAME and its disk.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="S", help="Seconds --watch waits in all.")
    ] = 3600,
    as_json: JsonOpt = False,
) -> None:
    """Create and start the bootstrap and master VMs with libvirt (docs/boot-vms.md)."""
    from upi.commands.boot_vms import run

    run(inventory, connect=connect, watch=watch, dry_run=dry_run, replace=replace, destroy=destroy,
        timeout=timeout, as_json=as_json)


@app.command(
    "approve-csr",
    epilog="\b\nExamples:\n  upi approve-csr inventories/dgxpod.yaml --dir install --once\n"
    "  upi approve-csr inventories/dgxpod.yaml --kubeconfig install/auth/kubeconfig --watch --json\n"
    "  upi approve-csr inventories/dgxpod.yaml --once --dry-run\n"
    "  upi approve-csr inventories/dgxpod.yaml --manifests | oc apply -f -"
)
def approve_csr(
    inventory: InventoryArg,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Kubeconfig (default: KUBECONFIG, then "
                                  "DIR/auth/kubeconfig, then the pod's service account).")
    ] = None,
    assets: Annotated[
        Path | None, typer.Option("--dir", help="The installer's asset directory (uses its auth/kubeconfig).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Decide every pending CSR, then exit (default).")]
    = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep watching; approve as CSRs arrive.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and log; approve nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per decision.")] = False,
    manifests: Annotated[
        bool, typer.Option("--manifests", help="Print the in-cluster form (RBAC + Deployment) as YAML.")
    ] = False,
    image: Annotated[str | None, typer.Option("--image", help="Image for --manifests' Deployment.")] = None,
) -> None:
    """Approve the node CSRs of the inventory's nodes, and only those (docs/approve-csr.md)."""
    from upi.errors import UsageError

    if once and watch:
        raise UsageError("--once and --watch exclude each other")
    if manifests:
        from upi.csr.manifests import IMAGE, manifests_yaml
        from upi.inventory import load_inventory

        load_inventory(inventory, check_files=False)  # refuse to ship an invalid inventory
        console.say(manifests_yaml(inventory.read_text(encoding="utf-8"), image or IMAGE).rstrip("\n"))
        return
    from upi.commands.approve_csr import approve_csr as run

    def log(record: Any) -> None:
        console.say(record.line(as_json))
        sys.stdout.flush()  # under systemd stdout is a pipe: each decision reaches the journal now

    try:
        run(inventory, kubeconfig=kubeconfig, assets=assets, mode="watch" if watch else "once",
            dry_run=dry_run, log=log)
    except KeyboardInterrupt:
        return


@app.command(
    epilog="\b\nExamples:\n  upi wait inventories/dgxpod.yaml --dir assets/dgxpod\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --kubeconfig-to ~/.kube/config\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --keep-bootstrap --no-vms --json\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --deadline 180   # slow hardware"
)
def wait(
    inventory: InventoryArg,
    assets: Annotated[Path, typer.Option(
        "--dir", help="openshift-install's assets directory (the one `upi ignition` used).",
        show_default=False)],
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Render dir: judge the age of the ignition files staged there.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="Kubeconfig for CSRs and nodes (default: DIR/auth/kubeconfig).")] = None,
    connect: Annotated[str | None, typer.Option(
        "--connect", metavar="URI", help="libvirt URI for every VM (overrides the inventory).")] = None,
    keep_bootstrap: Annotated[bool, typer.Option(
        "--keep-bootstrap", help="Leave the bootstrap in HAProxy and its VM alone.")] = False,
    no_approve: Annotated[bool, typer.Option(
        "--no-approve", help="Do not approve node CSRs (something else does).")] = False,
    no_vms: Annotated[bool, typer.Option(
        "--no-vms", help="Do not restart VMs that power off after their install.")] = False,
    deadline: Annotated[float | None, typer.Option(
        "--deadline", metavar="MINUTES",
        help="Retry timeouts until this long after the start (default: the installer's "
        "budgets, 65 min bootstrap + 70 min install).")] = None,
    retry_pause: Annotated[float, typer.Option(
        "--retry-pause", metavar="SECONDS", help="Pause before retrying a wait that timed out.")] = 10.0,
    kubeconfig_to: Annotated[Path | None, typer.Option(
        "--kubeconfig-to", metavar="PATH", help="Copy DIR/auth/kubeconfig here at the end (0600).")]
    = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Let --kubeconfig-to back up and replace a different file.")] = False,
    show_password: Annotated[bool, typer.Option(
        "--show-password", help="Print the kubeadmin password at the end.")] = False,
    openshift_install: Annotated[Path | None, typer.Option(
        "--openshift-install", metavar="PATH",
        help="The installer binary (default: $UPI_OPENSHIFT_INSTALL, then PATH).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON summary at the end (progress goes to stderr).")] = False,
) -> None:
    """Drive the install to "Install complete!" (docs/wait.md).

    Waits for bootstrap-complete, takes the bootstrap out of HAProxy and
    destroys its VM, waits for install-complete; meanwhile approves the
    inventory's node CSRs and restarts VMs that power off after their
    install. Timeouts are retried; Ctrl-C stops cleanly and a re-run resumes.
    """
    from upi.commands.wait import wait_command
    from upi.wait.run import WaitRequest

    req = WaitRequest(inventory, assets, render_dir=render_dir, kubeconfig=kubeconfig, connect=connect,
                      keep_bootstrap=keep_bootstrap, approve=not no_approve, vms=not no_vms,
                      deadline_minutes=deadline, retry_pause=retry_pause, installer=openshift_install,
                      kubeconfig_to=kubeconfig_to.expanduser() if kubeconfig_to else None, force=force)
    wait_command(req, show_password=show_password, as_json=as_json)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="upi")
