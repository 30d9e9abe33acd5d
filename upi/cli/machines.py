"""Commands that act on machines and the cluster: boot-vms, approve-csr, wait."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from upi import console
from upi.cli.base import InventoryArg, JsonOpt, app, duration_option, output_dir


@app.command(
    "boot-vms",
    epilog="\b\nExamples:\n  upi boot-vms inventories/dgxpod.yaml --dry-run\n"
    "  upi boot-vms inventories/dgxpod.yaml --watch --timeout 1h\n"
    "  upi boot-vms inventories/dgxpod.yaml --connect qemu+ssh://root@kvm1/system\n"
    "  upi boot-vms inventories/dgxpod.yaml --destroy bootstrap",
)
def boot_vms(
    inventory: InventoryArg,
    connect: Annotated[
        str | None,
        typer.Option("--connect", metavar="URI",
                     help="libvirt URI for every VM (default: the inventory's hypervisor.uri)."),
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
        str | None, typer.Option("--destroy", metavar="NAME",
                                 help="Remove the VM NAME and its disk (default: remove none).")
    ] = None,
    timeout: Annotated[float, duration_option(
        "--timeout", unit="s", default=3600, help="How long --watch waits in all")] = 3600,
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
    "  upi approve-csr inventories/dgxpod.yaml --manifests --image registry.example.com/upi:0.1 \\\n"
    "      | oc apply -f -\n"
    "  upi approve-csr inventories/dgxpod.yaml --dir install --release csr-8xk2p"
)
def approve_csr(
    inventory: InventoryArg,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", metavar="FILE",
                                  help="Kubeconfig (default: KUBECONFIG, then "
                                  "DIR/auth/kubeconfig, then the pod's service account).")
    ] = None,
    assets: Annotated[
        Path | None, typer.Option("--dir", metavar="ASSETS", show_default=False,
                                  help="The installer's asset directory, for its auth/kubeconfig "
                                  "(default: none, see --kubeconfig).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Decide every pending CSR, then exit (default).")]
    = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep watching; approve as CSRs arrive.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and log; approve nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per decision.")] = False,
    manifests: Annotated[
        bool, typer.Option("--manifests", help="Print the in-cluster form (RBAC + Deployment) as YAML.")
    ] = False,
    image: Annotated[str | None, typer.Option(
        "--image", metavar="IMAGE", show_default=False,
        help="An image holding upi, for --manifests' Deployment (no default: required with "
        "--manifests).")] = None,
    release: Annotated[
        list[str] | None, typer.Option("--release", metavar="CSR", show_default=False,
                                       help="Approve this held client CSR (checked, see "
                                       "docs/approve-csr.md), and nothing else; repeatable "
                                       "(default: none, decide every pending CSR).")
    ] = None,
) -> None:
    """Approve the node CSRs of the inventory's nodes, and only those (docs/approve-csr.md)."""
    from upi.errors import UsageError

    if once and watch:
        raise UsageError("--once and --watch exclude each other")
    if release and (watch or manifests):
        raise UsageError("--release approves the named CSRs in one pass: not with --watch or --manifests")
    if manifests:
        from upi.csr.manifests import manifests_yaml
        from upi.inventory import load_inventory

        if not image:
            # No public image holds upi: a default would deploy a pod stuck in ImagePullBackOff.
            raise UsageError("--manifests needs --image: an image that holds upi "
                             "(build one from this checkout; docs/approve-csr.md)", field="--image")
        from upi.inventory.installer_rules import image_problem

        if problem := image_problem(image):  # it goes into a Deployment: a pod must pull it
            raise UsageError(f"--image {image[:200]!r} {problem}", field="--image")
        load_inventory(inventory, check_files=False)  # refuse to ship an invalid inventory
        console.say(manifests_yaml(inventory.read_text(encoding="utf-8"), image).rstrip("\n"))
        return
    from upi.commands.approve_csr import approve_csr as run

    def log(record: Any) -> None:
        if as_json:
            console.print_json_line(record.line(True))
            return
        console.say(record.line(False))
        sys.stdout.flush()  # under systemd stdout is a pipe: each decision reaches the journal now

    try:
        run(inventory, kubeconfig=kubeconfig, assets=assets, mode="watch" if watch else "once",
            dry_run=dry_run, log=log, release=frozenset(release or ()))
    except KeyboardInterrupt:
        return


@app.command(
    epilog="\b\nExamples:\n  upi wait inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --kubeconfig-to ~/.kube/config\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --keep-bootstrap --no-vms --json\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod --deadline 3h   # slow hardware\n"
    "  upi wait inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod --gpu   # on to GPUs verified"
)
def wait(
    inventory: InventoryArg,
    assets: Annotated[Path, typer.Option(
        "--dir", metavar="ASSETS", help="openshift-install's assets directory (the one `upi ignition` used).",
        show_default=False)],
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", show_default=False, parser=output_dir,
        help="The render dir (`upi render -o`). With it, each node's PXE file there and on the "
        "provisioner flips to local boot as the node joins, and the bootstrap is retired from its "
        "HAProxy config, so a later `upi push` keeps both; the age of the ignition files staged "
        "there is judged too. Without it (the default) neither is recorded: a later push would "
        "reinstall the nodes.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", metavar="FILE", show_default=False,
        help="Kubeconfig for CSRs and nodes (default: ASSETS/auth/kubeconfig).")] = None,
    connect: Annotated[str | None, typer.Option(
        "--connect", metavar="URI", show_default=False,
        help="libvirt URI for every VM (default: the inventory's hypervisor.uri).")] = None,
    keep_bootstrap: Annotated[bool, typer.Option(
        "--keep-bootstrap", help="Leave the bootstrap in HAProxy and its VM alone.")] = False,
    no_approve: Annotated[bool, typer.Option(
        "--no-approve", help="Do not approve node CSRs (something else does).")] = False,
    no_vms: Annotated[bool, typer.Option(
        "--no-vms", help="The VMs are yours: do not restart them after their install, nor destroy the "
        "bootstrap VM (HAProxy still drops it). Without it, VM nodes need libvirt-python.")] = False,
    no_metal: Annotated[bool, typer.Option(
        "--no-metal", help="Do not network-boot bare-metal workers over Redfish once the machine "
        "config server answers, nor flip their PXE files to local boot as they join.")] = False,
    deadline: Annotated[float | None, duration_option(
        "--deadline", unit="m", default=None,
        help="Retry timeouts until this long after the start (default: the installer's "
        "budgets, 65 min bootstrap + 70 min install)")] = None,
    retry_pause: Annotated[float, duration_option(
        "--retry-pause", unit="s", default=10.0, help="Pause before retrying a wait that timed out")] = 10.0,
    kubeconfig_to: Annotated[Path | None, typer.Option(
        "--kubeconfig-to", metavar="PATH", show_default=False,
        help="Copy ASSETS/auth/kubeconfig here at the end, 0600 (default: copy it nowhere).")]
    = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Let --kubeconfig-to back up and replace a different file.")] = False,
    show_password: Annotated[bool, typer.Option(
        "--show-password", help="Print the kubeadmin password at the end.")] = False,
    openshift_install: Annotated[Path | None, typer.Option(
        "--openshift-install", metavar="PATH", show_default=False,
        help="The installer binary (default: $UPI_OPENSHIFT_INSTALL, then PATH).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON summary at the end (progress goes to stderr; an error is a "
        "JSON object too).")] = False,
    gpu: Annotated[bool, typer.Option(
        "--gpu", help="Go on from install-complete into `upi gpu`'s steps; end at \"GPUs verified\".")]
    = False,
    gpu_timeout: Annotated[float, duration_option(
        "--gpu-timeout", unit="m", default=3600, help="With --gpu: give up on the GPU steps after this long")]
    = 3600,
    gpu_poll: Annotated[float, duration_option(
        "--gpu-poll", unit="s", default=5.0,
        help="With --gpu: how often to look at the cluster")] = 5.0,
    status_every: Annotated[float, duration_option(
        "--status-every", unit="s", default=15.0,
        help="How often the nodes' table (upi status: logs, libvirt, API) is read again; 0 shows "
        "none")] = 15.0,
) -> None:
    """Drive the install to "Install complete!" (docs/wait.md), with --gpu on to "GPUs verified".

    Waits for bootstrap-complete, takes the bootstrap out of HAProxy and
    destroys its VM, waits for install-complete; meanwhile approves the
    inventory's node CSRs and restarts VMs that power off after their
    install. Timeouts are retried; Ctrl-C stops cleanly and a re-run resumes.
    VM nodes need libvirt-python unless --no-vms: without it upi wait refuses
    at the start (exit 2). Meanwhile each node's install stages (upi status)
    are shown: a live table on a terminal, each change as a line otherwise.
    With --gpu it then installs NFD and the GPU Operator and verifies every
    `gpu: true` node exactly as `upi gpu` does (docs/gpu.md); exit 1 unless
    every GPU node is verified.
    """
    from upi.commands.wait import wait_command
    from upi.wait.run import WaitRequest

    req = WaitRequest(inventory, assets, render_dir=render_dir, kubeconfig=kubeconfig, connect=connect,
                      keep_bootstrap=keep_bootstrap, approve=not no_approve, vms=not no_vms,
                      metal=not no_metal, deadline_minutes=deadline / 60 if deadline is not None else None,
                      retry_pause=retry_pause, installer=openshift_install,
                      kubeconfig_to=kubeconfig_to.expanduser() if kubeconfig_to else None, force=force,
                      gpu=gpu, gpu_timeout=gpu_timeout / 60, gpu_poll=gpu_poll,
                      status_every=status_every)
    if not wait_command(req, show_password=show_password, as_json=as_json).ok:
        raise typer.Exit(1)
