"""`upi status`: which node is where in the install, and which one is stuck (docs/status.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from upi.cli.base import InventoryArg, JsonOpt, app, duration_option, output_dir


def _path_opt(*decls: str, metavar: str, help: str, **more: Any) -> object:  # noqa: A002  (typer's own word)
    return typer.Option(*decls, metavar=metavar, show_default=False, help=help, **more)


@app.command(
    epilog="\b\nExamples:\n  upi status inventories/dgxpod.yaml\n"
    "  upi status inventories/dgxpod.yaml --dir assets/dgxpod -o out/dgxpod --watch\n"
    "  upi status inventories/dgxpod.yaml --dnsmasq-log dnsmasq.log --access-log access.log --json\n"
    "  upi status inventories/dgxpod.yaml --stuck-after 45m\n"
    "  upi status inventories/dgxpod.yaml --connect qemu+ssh://root@kvm1/system",
)
def status(
    inventory: InventoryArg,
    assets: Annotated[Path | None, _path_opt(
        "--dir", metavar="ASSETS", help="openshift-install's assets directory: its auth/kubeconfig "
        "for the CSRs and Nodes, its ignition files' age (default: none; KUBECONFIG if set).")] = None,
    out: Annotated[Path | None, _path_opt(
        "-o", "--out", metavar="DIR", parser=output_dir, help="The render directory: its installed-nodes "
        "record (default: none).")] = None,
    kubeconfig: Annotated[Path | None, _path_opt(
        "--kubeconfig", metavar="FILE", help="Kubeconfig of the cluster (default: KUBECONFIG, "
        "then ASSETS/auth/kubeconfig).")] = None,
    dnsmasq_log: Annotated[Path | None, _path_opt(
        "--dnsmasq-log", metavar="FILE", help="dnsmasq's log, a file here (default: the "
        "inventory's provisioner.dnsmasq_log, on the provisioner).")] = None,
    access_log: Annotated[Path | None, _path_opt(
        "--access-log", metavar="FILE", help="The HTTP server's access log, common or combined "
        "format, a file here (default: the inventory's provisioner.http_access_log, on the "
        "provisioner).")] = None,
    connect: Annotated[str | None, typer.Option(
        "--connect", metavar="URI", show_default=False,
        help="libvirt URI of every VM node, for their power state (default: the inventory's "
        "hypervisors, when reachable).")] = None,
    stuck_after: Annotated[float, duration_option(
        "--stuck-after", unit="m", default=1200,
        help="A node this long at one stage is stuck: its likely causes are listed")] = 1200,
    watch: Annotated[bool, typer.Option(
        "--watch", help="Look again every --interval until every node is done: a live table on a "
        "terminal, the changes as lines into a pipe, a JSON line per look with --json. Ctrl-C "
        "stops it with the last look's exit status.")]
    = False,
    interval: Annotated[float, duration_option(
        "--interval", unit="s", default=10.0, minimum=0.1, help="How often --watch looks")] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Which node is where in the install, and which one is stuck.

    One row per node, the time it reached each stage: DHCP lease and PXE
    file, kernel and initramfs (dnsmasq's log), the rootfs then the
    ignition (4.6+) or the ignition then the metal image (whole GETs in the
    HTTP access log), installed (upi's record in the render directory, or
    libvirt: a VM powered off after its install, or booting from disk),
    client and serving CSR, Node Ready, GPUs verified (the API). Then the
    current stage and how long the node has been there; for a node stuck
    longer than --stuck-after, the likely causes. A MAC or IP in the logs
    that no node has is reported. The inventory's logs are read on the
    provisioner, reached as upi push reaches it: over SSH (to
    provisioner.ip without an ssh section), on this machine only with
    ssh: {local: true}; --dnsmasq-log and --access-log are files here.
    Nothing prompts: an ssh hypervisor that would ask for a host key or a
    password is a warning. Exit 0, or 1 when a node is stuck;
    2 for bad input.
    """
    from upi.commands.status import status_command

    code = status_command(inventory, {"dnsmasq_log": dnsmasq_log, "access_log": access_log, "out": out,
                                    "assets": assets, "kubeconfig": kubeconfig},
                        connect=connect, threshold=stuck_after, watch=watch, interval=interval,
                        as_json=as_json)
    if code:
        raise typer.Exit(code)
