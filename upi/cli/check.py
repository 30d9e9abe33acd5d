"""`upi check dns|lb|http|tftp|relay|all`: a sub-app of its own."""

from __future__ import annotations

import ipaddress
import re
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from upi import console
from upi.cli.base import InventoryArg, JsonOpt, duration_option, output_dir, sub_app

check_app = sub_app(
    "check",
    help="Prove DNS, the load balancer, the HTTP and TFTP servers are ready (docs/check.md).",
    epilog="\b\nExamples:\n  upi check all inventories/dgxpod.yaml\n"
    "  upi check dns inventories/dgxpod.yaml --server 10.33.3.18 --json",
)

_HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def server_host(value: str) -> str:
    """A --server value: an IP address (IPv6 with or without brackets) or a DNS name.

    Anything else (`[::1`, `http://x`, spaces) is refused here, before a URL or a
    socket address is built from it.
    """
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    name = value.removesuffix(".")
    if 0 < len(name) <= 253 and all(_HOST_LABEL.fullmatch(p) for p in name.split(".")):
        return value
    raise typer.BadParameter(f"{value[:80]!r} is not a host name or an IP address "
                             "(IPv6 as ::1 or [::1]; no scheme, port or path)")


ServerOpt = Annotated[str | None, typer.Option(
    "--server", metavar="HOST",
    help="Probe this host (default: the inventory's provisioner or load balancer).",
    parser=server_host, show_default=False)]


def _timeout(default: float) -> Any:
    return duration_option("--timeout", unit="s", default=default, minimum=0.05,
                           help="How long one probe may take")


RetriesOpt = Annotated[int, typer.Option("--retries", min=0, metavar="N", help="Tries more after a timeout.")]
ConcurrencyOpt = Annotated[int, typer.Option(
    "--concurrency", min=1, max=1024, metavar="N", help="Probes in flight at once.")]
PortMapOpt = Annotated[list[str] | None, typer.Option(
    "--port-map", metavar="LB_PORT=PORT",
    help="Dial PORT for the LB port (a tunnel or test LB); repeatable (default: the LB ports).",
    show_default=False)]
ClusterUpOpt = Annotated[bool, typer.Option(
    "--cluster-up", help="The nodes run: a pool with no live server and a failing /readyz fail.")]


def _check(area: Literal["dns", "lb", "http", "tftp", "relay", "all"], inventory: Path, as_json: bool,
           **opts: Any) -> None:
    from upi.check.report import show
    from upi.check.run import CheckOptions, run_checks
    from upi.errors import CheckFailed

    report = run_checks(area, inventory, CheckOptions(**opts))
    show(report, as_json=as_json)
    if all(t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        # The probes' pools are joined; a cancelled watchdog timer may still be winding down.
        console.finished()
    if report.failed:
        raise CheckFailed(f"{report.failed} of {len(report.results)} checks failed")


@check_app.command(
    "dns",
    epilog="\b\nExamples:\n  upi check dns inventories/dgxpod.yaml\n"
    "  upi check dns inventories/dgxpod.yaml --server 127.0.0.1 --port 5353 --json",
)
def check_dns(
    inventory: InventoryArg,
    server: ServerOpt = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, metavar="PORT", help="DNS port.")] = 53,
    as_json: JsonOpt = False,
    timeout: Annotated[float, _timeout(2.0)] = 2.0,
    retries: RetriesOpt = 1,
    concurrency: ConcurrencyOpt = 64,
) -> None:
    """Ask the cluster's DNS server for every record render writes.

    The server defaults to the provisioner (the cluster's dnsmasq), never the system resolver.
    """
    _check("dns", inventory, as_json, dns_server=server, dns_port=port, timeout=timeout,
           retries=retries, concurrency=concurrency)


@check_app.command(
    "lb",
    epilog="\b\nExamples:\n  upi check lb inventories/dgxpod.yaml\n"
    "  upi check lb inventories/dgxpod.yaml --cluster-up\n"
    "  upi check lb inventories/dgxpod.yaml --server 127.0.0.1 --port-map 6443=16443",
)
def check_lb(
    inventory: InventoryArg,
    server: ServerOpt = None,
    port_map: PortMapOpt = None,
    cluster_up: ClusterUpOpt = False,
    as_json: JsonOpt = False,
    timeout: Annotated[float, _timeout(3.0)] = 3.0,
    retries: RetriesOpt = 1,
) -> None:
    """Connect to the load balancer on 6443, 22623, 443 and 80; a server must answer through it.

    A pool forwards only when a server behind it answers: a TLS handshake on 6443, 22623 and
    443, an HTTP answer on 80. With --cluster-up (or once 6443 forwards) also GET /readyz
    through 6443 over TLS.
    """
    from upi.check.lb import parse_port_map

    _check("lb", inventory, as_json, lb_server=server, port_map=parse_port_map(port_map or []),
           cluster_up=cluster_up, timeout=timeout, retries=retries)


@check_app.command(
    "http",
    epilog="\b\nExamples:\n  upi check http inventories/dgxpod.yaml\n"
    "  upi check http inventories/dgxpod.yaml --server 127.0.0.1 --port 8080 --json\n"
    "  upi check http inventories/dgxpod.yaml -o out/dgxpod    # stale files judged by DIR/http/\n"
    "  upi check http inventories/dgxpod.yaml --deep -o out/dgxpod",
)
def check_http(
    inventory: InventoryArg,
    server: ServerOpt = None,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535, metavar="PORT", help="HTTP port (default: http_base_url's).",
        show_default=False)] = None,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Read every file to the end; compare its sha256 with the copy staged in "
        "-o DIR/http/.")] = False,
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", parser=output_dir,
        help="Render dir: a file upi pushed that its http/ no longer publishes must be gone "
        "from the server; --deep compares with its copies (no default: required with --deep).",
        show_default=False)] = None,
    as_json: JsonOpt = False,
    timeout: Annotated[float, _timeout(5.0)] = 5.0,
    retries: RetriesOpt = 1,
) -> None:
    """Fetch the RHCOS artifacts and each role's ignition file.

    Ignition must be JSON with ignition.version; older than 12 h warns, 24 h fails.
    Every fetch has an overall deadline of --timeout (--deep: plus 1 s per MiB).
    """
    from upi.errors import UsageError

    if deep and render_dir is None:
        raise UsageError("--deep compares with the files staged in a render directory: "
                         "pass it with -o DIR")
    if render_dir is not None and not render_dir.is_dir():
        raise UsageError(f"-o {render_dir}: not a directory (the render directory of this inventory)")
    _check("http", inventory, as_json, http_server=server, http_port=port, timeout=timeout,
           retries=retries, http_deep=render_dir if deep else None, http_render_dir=render_dir)


@check_app.command(
    "tftp",
    epilog="\b\nExamples:\n  upi check tftp inventories/dgxpod.yaml\n"
    "  upi check tftp inventories/dgxpod.yaml --server 10.33.3.18 --json\n"
    "  upi check tftp inventories/dgxpod.yaml -o out/dgxpod    # kernel/initramfs as staged",
)
def check_tftp(
    inventory: InventoryArg,
    server: ServerOpt = None,
    render_dir: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="DIR", parser=output_dir,
        help="Render dir: the kernel and initramfs must equal (sha256) the copies `upi images` "
        "staged in its tftp/ (default: only checked for content).", show_default=False)] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, metavar="PORT", help="TFTP port.")] = 69,
    as_json: JsonOpt = False,
    timeout: Annotated[float, duration_option("--timeout", unit="s", default=2.0, minimum=0.05,
                                              help="How long to wait for one packet")] = 2.0,
    retries: Annotated[int, typer.Option(
        "--retries", min=0, metavar="N", help="Resends after a timeout.")] = 3,
) -> None:
    """Fetch over TFTP what pxelinux and GRUB fetch: loaders, per-MAC files, kernel, initramfs.

    Per-MAC files must equal the render byte for byte (docs/check.md).
    """
    from upi.errors import UsageError

    if render_dir is not None and not render_dir.is_dir():
        raise UsageError(f"-o {render_dir}: not a directory (the render directory of this inventory)")
    _check("tftp", inventory, as_json, tftp_server=server, tftp_port=port, timeout=timeout,
           retries=retries, tftp_staged=render_dir)


@check_app.command(
    "relay",
    epilog="\b\nExamples:\n  upi check relay inventories/racks.yaml\n"
    "  upi check relay inventories/racks.yaml --json",
)
def check_relay(inventory: InventoryArg, as_json: JsonOpt = False) -> None:
    """Check the provisioner's side of each rack's DHCP relay: a route to every relay address.

    The relay itself is not checkable from the provisioner and is reported as such (a
    warning): boot one node of the rack and read upi status. Inventories without
    machine_networks have nothing to check here.
    """
    _check("relay", inventory, as_json)


@check_app.command(
    "all",
    epilog="\b\nExamples:\n  upi check all inventories/dgxpod.yaml\n"
    "  upi check all inventories/dgxpod.yaml --cluster-up --json",
)
def check_all(
    inventory: InventoryArg,
    server: Annotated[str | None, typer.Option(
        "--server", metavar="HOST",
        help="Probe DNS, LB, HTTP and TFTP all at this host (default: the inventory's hosts).",
        parser=server_host, show_default=False)] = None,
    dns_port: Annotated[int, typer.Option(
        "--dns-port", min=1, max=65535, metavar="PORT", help="DNS port.")] = 53,
    http_port: Annotated[int | None, typer.Option(
        "--http-port", min=1, max=65535, metavar="PORT", help="HTTP port (default: http_base_url's).",
        show_default=False)] = None,
    tftp_port: Annotated[int, typer.Option("--tftp-port", min=1, max=65535, metavar="PORT",
                                           help="TFTP port.")] = 69,
    port_map: PortMapOpt = None,
    cluster_up: ClusterUpOpt = False,
    as_json: JsonOpt = False,
    timeout: Annotated[float, _timeout(2.0)] = 2.0,
    retries: RetriesOpt = 1,
) -> None:
    """Run the dns, lb, http, tftp and relay checks in one report."""
    from upi.check.lb import parse_port_map

    _check("all", inventory, as_json, dns_server=server, dns_port=dns_port, lb_server=server,
           port_map=parse_port_map(port_map or []), cluster_up=cluster_up, http_server=server,
           http_port=http_port, tftp_server=server, tftp_port=tftp_port, timeout=timeout,
           retries=retries)


@check_app.command(
    "mirror",
    epilog="\b\nExamples:\n  upi check mirror inventories/disconnected.yaml\n"
    "  upi check mirror inventories/disconnected.yaml --json --timeout 30\n"
    "  upi check mirror inventories/disconnected.yaml --dir assets/disconnected   # installed cluster",
)
def check_mirror(
    inventory: InventoryArg,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", metavar="FILE", show_default=False,
        help="An installed cluster: also its operators' relatedImages and driver-toolkit image "
        "(default: before install, no cluster).")] = None,
    assets: Annotated[Path | None, typer.Option(
        "--dir", metavar="ASSETS", show_default=False,
        help="openshift-install's assets directory, for its auth/kubeconfig (default: none, "
        "see --kubeconfig).")] = None,
    as_json: JsonOpt = False,
    timeout: Annotated[float, _timeout(10.0)] = 10.0,
) -> None:
    """Ask the mirror registry for every image the install pulls (docs/disconnected.md).

    The release image and upi's own images, each where cluster.mirrors maps it; HEAD of its
    manifest with the pull secret's credentials, TLS verified with the trust bundle. Exit 1
    when one is missing, unauthorised or unreachable.
    """
    from upi.check.mirror import run_check_mirror
    from upi.check.report import show
    from upi.errors import CheckFailed

    report = run_check_mirror(inventory, timeout=timeout, kubeconfig=kubeconfig, assets=assets)
    show(report, as_json=as_json)
    if report.failed:
        raise CheckFailed(f"{report.failed} of {len(report.results)} images are not in the mirror")
