"""`upi check relay` in a network namespace wired like the provisioner: the kernel's own routes decide.

The namespace (tests/pxe_harness.py's Lab) holds only the provisioner's
segment: without a route to the racks every relay address is unreachable and
the check fails; with the default route via network.gateway, as a site routes
it, the relays are reached from the provisioner's address. The relay path
itself is always reported as not checkable from the provisioner (a warning).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import inventory_path, require_root
from pxe_harness import Lab
from typer.testing import CliRunner

from upi.cli import app
from upi.inventory import load_inventory


def _check(lab: Lab) -> tuple[int, dict]:
    result = lab.inside(lambda: CliRunner().invoke(
        app, ["check", "relay", str(inventory_path("racks")), "--json"]))
    return result.exit_code, json.loads(result.stdout)


def test_check_relay_follows_the_provisioners_routes(tmp_path: Path) -> None:
    require_root("a network namespace for the provisioner")
    inv = load_inventory(inventory_path("racks"))
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    relays = ["10.40.1.2", "10.40.2.2", "10.40.3.2", "10.40.4.1"]
    with Lab(tmp_path / "lab", inv.provisioner.interface, address) as lab:
        code, report = _check(lab)
        assert code == 1
        routes = [c for c in report["checks"] if c["check"].startswith("route to")]
        assert [c["check"].rsplit(" ", 1)[1] for c in routes] == relays
        assert {(c["verdict"], c["got"]) for c in routes} == {("fail", "none (ENETUNREACH)")}

        lab.ip("route", "add", "default", "via", str(inv.network.gateway))
        code, report = _check(lab)
        assert code == 0
        routes = [c for c in report["checks"] if c["check"].startswith("route to")]
        assert {(c["verdict"], c["got"]) for c in routes} == {("pass", f"from {inv.provisioner.ip}")}
        paths = [c for c in report["checks"] if c["check"].startswith("DHCP through")]
        assert len(paths) == 4
        assert {(c["verdict"], c["got"]) for c in paths} == {("warn", "not checkable from the provisioner")}
        assert "tag rack1" in paths[0]["fix"]


def test_check_relay_has_nothing_to_say_about_one_network(runner) -> None:
    result = runner.invoke(app, ["check", "relay", str(inventory_path("dgxpod")), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["checks"] == []
