from __future__ import annotations

import json
from pathlib import Path

from check_helpers import LOOPBACK, dnsmasq, http_server
from conftest import inventory_path
from realtftp import serve_tftp
from test_check_dns import rendered_dns_conf
from test_check_http import http_root
from test_check_lb import running_lb
from test_check_tftp import tftp_root

from upi.cli import app


def test_all_runs_dns_lb_http_and_tftp_in_one_report(runner, tmp_path: Path) -> None:
    conf = rendered_dns_conf(runner, tmp_path, "dgxpod")
    with dnsmasq(conf) as dns_port, http_server(http_root(tmp_path)) as http_port, \
            running_lb(tmp_path, down=80) as mapping, \
            serve_tftp(tftp_root(tmp_path, runner)[0], tmp_path / "tftp.log") as tftp_port:
        result = runner.invoke(app, [
            "check", "all", str(inventory_path("dgxpod")), "--server", LOOPBACK,
            "--dns-port", str(dns_port), "--http-port", str(http_port),
            "--tftp-port", str(tftp_port), *mapping, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    areas = [r["area"] for r in doc["checks"]]
    # tftp: 3 boot loaders, 6 per-MAC files, one kernel and one initramfs
    assert areas == ["dns"] * 17 + ["lb"] * 5 + ["http"] * 9 + ["tftp"] * 11
    # Port 80 has no live backend: before the nodes boot that is only a warning.
    assert doc["counts"] == {"pass": 41, "warn": 1, "fail": 0}
