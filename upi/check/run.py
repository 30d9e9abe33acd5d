"""The library call behind each `upi check` command: load, probe, report."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from upi.check.report import CheckResult, Report, progress_bar

if TYPE_CHECKING:
    from upi.inventory import Inventory

Area = Literal["dns", "lb", "http", "tftp", "relay", "all"]


@dataclass(frozen=True)
class CheckOptions:
    """Where to probe and how patiently; None means the inventory's own address."""

    dns_server: str | None = None
    dns_port: int = 53
    lb_server: str | None = None
    port_map: dict[int, int] = field(default_factory=dict)
    cluster_up: bool = False
    http_server: str | None = None
    http_port: int | None = None
    http_deep: Path | None = None  # render dir: compare sha256 with the files staged in its http/
    http_render_dir: Path | None = None  # render dir: what its http/ publishes judges stale files
    timeout: float = 2.0
    retries: int = 1
    concurrency: int = 64
    tftp_server: str | None = None
    tftp_port: int = 69
    tftp_staged: Path | None = None  # render dir: kernel/initramfs must equal its tftp/ copies


def _dns(inv: Inventory, opts: CheckOptions) -> list[CheckResult]:
    from upi.check.dns import check_dns, probes
    from upi.facts import dns_records

    # The bar shows only on a terminal: count the probes (a few ms at 128 nodes) only there.
    total = len(probes(dns_records(inv))) if sys.stderr.isatty() else 0
    advance, close = progress_bar(total, "check dns")
    try:
        return check_dns(inv, server=opts.dns_server, port=opts.dns_port, window=opts.concurrency,
                         timeout=opts.timeout, retries=opts.retries, progress=advance)
    finally:
        close()


def _lb(inv: Inventory, opts: CheckOptions) -> list[CheckResult]:
    from upi.check.lb import check_lb

    return check_lb(inv, server=opts.lb_server, port_map=opts.port_map, cluster_up=opts.cluster_up,
                    timeout=opts.timeout, retries=opts.retries, workers=min(opts.concurrency, 8))


def _http(inv: Inventory, opts: CheckOptions) -> list[CheckResult]:
    from upi.check.http import check_http

    return check_http(inv, server=opts.http_server, port=opts.http_port, timeout=opts.timeout,
                      retries=opts.retries, workers=min(opts.concurrency, 8), deep=opts.http_deep,
                      render_dir=opts.http_render_dir)


def _tftp(inv: Inventory, opts: CheckOptions) -> list[CheckResult]:
    from upi.check.tftp import check_tftp

    return check_tftp(inv, server=opts.tftp_server, port=opts.tftp_port, timeout=opts.timeout,
                      retries=opts.retries, workers=min(opts.concurrency, 8),
                      render_dir=opts.tftp_staged)


def _relay(inv: Inventory, _opts: CheckOptions) -> list[CheckResult]:
    from upi.check.relay import check_relay

    return check_relay(inv)


# Report order: each area's rows in this order, however the areas run.
AREAS: dict[str, Callable[[Inventory, CheckOptions], list[CheckResult]]] = {
    "dns": _dns, "lb": _lb, "http": _http, "tftp": _tftp, "relay": _relay}


def run_checks(area: Area, inventory: Path, opts: CheckOptions) -> Report:
    """Run one area's checks (or all of them) against the inventory's cluster.

    The areas ask different servers and share nothing: `all` runs them at
    once, each in a thread of its own, so that one area's waits on the
    network (a DNS window, a TFTP transfer, a TLS handshake through the LB)
    overlap another's; the rows still come in the order of AREAS.
    """
    from upi.inventory import load_inventory

    # check runs where the pull secret may not be: do not require the files.
    inv = load_inventory(inventory, check_files=False)
    report = Report()
    todo = [run for name, run in AREAS.items() if area in (name, "all")]
    if len(todo) == 1:
        report.extend(todo[0](inv, opts))
        return report
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        futures = [pool.submit(run, inv, opts) for run in todo]
        for future in futures:
            report.extend(future.result())
    return report
