from __future__ import annotations

import json
from pathlib import Path

from check_helpers import LOOPBACK, http_server
from conftest import inventory_path
from realtftp import TFTP_PORT, serve_tftp
from test_check_http import http_root
from test_check_lb import running_lb
from test_check_tftp import tftp_root

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
