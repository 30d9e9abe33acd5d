"""The library call behind each `upi check` command: load, probe, report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from upi.check.report import Report, progress_bar

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


def run_checks(area: Area, inventory: Path, opts: CheckOptions) -> Report:
    """Run one area's checks (or all of them) against the inventory's cluster."""
    from upi.inventory import load_inventory

    # check runs where the pull secret may not be: do not require the files.
    inv = load_inventory(inventory, check_files=False)
    report = Report()
    if area in ("dns", "all"):
        from upi.check.dns import check_dns, probes
        from upi.facts import dns_records

        advance, close = progress_bar(len(probes(dns_records(inv))), "check dns")
        try:
            report.extend(check_dns(inv, server=opts.dns_server, port=opts.dns_port,
                                    window=opts.concurrency, timeout=opts.timeout,
                                    retries=opts.retries, progress=advance))
        finally:
            close()
    if area in ("lb", "all"):
        from upi.check.lb import check_lb

        report.extend(check_lb(inv, server=opts.lb_server, port_map=opts.port_map,
                               cluster_up=opts.cluster_up, timeout=opts.timeout,
                               retries=opts.retries, workers=min(opts.concurrency, 8)))
    if area in ("http", "all"):
        from upi.check.http import check_http

        report.extend(check_http(inv, server=opts.http_server, port=opts.http_port,
                                 timeout=opts.timeout, retries=opts.retries,
                                 workers=min(opts.concurrency, 8), deep=opts.http_deep,
                                 render_dir=opts.http_render_dir))
    if area in ("tftp", "all"):
        from upi.check.tftp import check_tftp

        report.extend(check_tftp(inv, server=opts.tftp_server, port=opts.tftp_port,
                                 timeout=opts.timeout, retries=opts.retries,
                                 workers=min(opts.concurrency, 8), render_dir=opts.tftp_staged))
    if area in ("relay", "all"):
        from upi.check.relay import check_relay

        report.extend(check_relay(inv))
    return report
