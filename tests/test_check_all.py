from __future__ import annotations

import json
import threading
from pathlib import Path

from check_helpers import LOOPBACK, http_server
from conftest import inventory_path
from realtftp import TFTP_PORT, serve_tftp
from test_check_http import http_root
from test_check_lb import running_lb
from test_check_tftp import tftp_root

from upi.check import run
from upi.check.report import CheckResult
from upi.cli import app


def test_all_runs_dns_lb_http_and_tftp_in_one_report(runner, tmp_path: Path) -> None:
    """One provisioner: the rendered dnsmasq answers DNS (53) and TFTP (69) on its loopback.

    Everything runs inside the lab's namespace, where 127.0.0.1 is the provisioner's
    own: HTTP and the load balancer are started there too.
    """
    def run_all():
        with http_server(http_root(tmp_path)) as http_port, running_lb(tmp_path, down=80) as mapping:
            return runner.invoke(app, [
                "check", "all", str(inventory_path("dgxpod")), "--server", LOOPBACK,
                "--dns-port", "53", "--http-port", str(http_port),
                "--tftp-port", str(TFTP_PORT), *mapping, "--json"])

    with serve_tftp(tftp_root(tmp_path, runner)[0], tmp_path) as lab:
        result = lab.inside(run_all)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    areas = [r["area"] for r in doc["checks"]]
    # tftp: 3 boot loaders, 6 per-MAC files, one kernel and one initramfs
    assert areas == ["dns"] * 17 + ["lb"] * 5 + ["http"] * 9 + ["tftp"] * 11
    # Port 80 has no live backend: before the nodes boot that is only a warning.
    assert doc["counts"] == {"pass": 41, "warn": 1, "fail": 0}


def test_all_runs_the_areas_at_once_and_reports_them_in_order(monkeypatch) -> None:
    """The areas share nothing: `all` starts each in its own thread, and keeps the report's order.

    Each stand-in area waits at a barrier that opens only when all five wait
    there together: areas run one after the other would break it (after 10 s).
    They then finish last area first; the rows still come dns, lb, http, tftp, relay.
    """
    names = list(run.AREAS)
    barrier = threading.Barrier(len(names), timeout=10)
    done = {name: threading.Event() for name in names}

    def area(name: str):
        def check(inv, opts) -> list[CheckResult]:
            barrier.wait()
            later = names[names.index(name) + 1:]
            for other in later:  # the last area finishes first
                assert done[other].wait(10), f"{other} never finished"
            done[name].set()
            return [CheckResult(name, f"{name} {i}", "x", "x", "pass") for i in range(2)]
        return check

    monkeypatch.setattr(run, "AREAS", {name: area(name) for name in names})
    report = run.run_checks("all", inventory_path("dgxpod"), run.CheckOptions())
    assert [r.area for r in report.results] == [n for n in names for _ in range(2)]
    assert names == ["dns", "lb", "http", "tftp", "relay"]
