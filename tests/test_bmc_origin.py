"""The BMC password goes only where the inventory said: no Redfish link leads away from the BMC.

The hostile BMC is the AMI fake with `elsewhere` set: one kind of link (the
service root's Systems, a Systems member, the settings object, Secure Boot,
the reset action's target or its ActionInfo, a redirect) points at a second
server on another port of the same host, which records every request. It
must receive none: the command stops with one line naming the node, "not
Redfish", exit 1, and no reset is sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redfish_support import PASSWORD, AmiFake, Tls, inventory_with_bmcs, write_credentials
from typer.testing import CliRunner

from upi.cli import app

KINDS = ("systems", "member", "settings", "secure_boot", "reset_target", "action_info", "redirect")


@pytest.fixture
def other(tls: Tls) -> Iterator[AmiFake]:
    """A second Redfish server on another port: where a hostile link leads."""
    fake = AmiFake(tls)
    yield fake
    fake.stop()


def _inventory(example_dir: Path, tls: Tls, url: str) -> Path:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    return inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": url, "credentials_file": creds.name, "verify_tls": str(tls.ca_file), "timeout": 5.0}})


def _boot(runner: CliRunner, inv: Path, *more: str) -> Any:
    return runner.invoke(app, ["boot-metal", str(inv), *more])


@pytest.mark.parametrize("kind", KINDS)
def test_a_link_to_another_server_sends_it_nothing(runner: CliRunner, example_dir: Path, tls: Tls,
                                                   ami: AmiFake, other: AmiFake, kind: str) -> None:
    ami.state.elsewhere = {kind: other.url}
    res = _boot(runner, _inventory(example_dir, tls, ami.url))
    assert other.state.seen == [], f"{kind}: the other server got {other.state.seen}"
    assert res.exit_code == 1, res.output
    assert f"worker-0 (BMC {ami.url}): not Redfish: it links to {other.url}/redfish/v1/" in res.stderr
    assert "Traceback" not in res.output and PASSWORD not in res.output
    assert ami.state.resets == [], "nothing is reset after a hostile link"


@pytest.mark.parametrize("kind", KINDS)
def test_power_restart_follows_no_link_away_either(runner: CliRunner, example_dir: Path, tls: Tls,
                                                  ami: AmiFake, other: AmiFake, kind: str) -> None:
    ami.state.elsewhere = {kind: other.url}
    res = runner.invoke(app, ["power", str(_inventory(example_dir, tls, ami.url)), "restart"])
    assert other.state.seen == [], f"{kind}: the other server got {other.state.seen}"
    assert res.exit_code == 1, res.output
    assert "worker-0 (BMC " in res.stderr and "not Redfish: it links to" in res.stderr


def _forms(ami: AmiFake, other: AmiFake) -> dict[str, tuple[str, str]]:
    """Link prefix -> what the message shows of it, for each way to leave the origin."""
    host_port = ami.url.removeprefix("https://")
    other_hp = other.url.removeprefix("https://")
    return {
        "other port": (other.url, other.url),
        "network-path reference": (f"//{other_hp}", other.url),
        "other scheme": (f"http://{host_port}", f"http://{host_port}"),
        "user and password": (f"https://admin:{PASSWORD}@{host_port}", f"https://***@{host_port}"),
        "user only": (f"https://admin@{host_port}", f"https://***@{host_port}"),
    }


@pytest.mark.parametrize("form", ["other port", "network-path reference", "other scheme",
                                  "user and password", "user only"])
def test_every_way_out_of_the_origin_is_refused(runner: CliRunner, example_dir: Path, tls: Tls,
                                               ami: AmiFake, other: AmiFake, form: str) -> None:
    prefix, shown = _forms(ami, other)[form]
    ami.state.elsewhere = {"settings": prefix}
    res = _boot(runner, _inventory(example_dir, tls, ami.url))
    assert res.exit_code == 1, res.output
    assert f"not Redfish: it links to {shown}/redfish/v1/Systems/Self/SD" in res.stderr, res.stderr
    assert other.state.seen == []
    assert not [s for s in ami.state.seen if s[1].endswith("/SD")], "the settings object was read"
    assert PASSWORD not in res.output


def test_links_on_the_bmc_itself_are_followed_relative_or_absolute(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    # Absolute URLs to the BMC's own origin, with the port spelt out: the same place.
    ami.state.elsewhere = dict.fromkeys(("systems", "member", "settings", "secure_boot",
                                         "reset_target"), ami.url)
    res = _boot(runner, _inventory(example_dir, tls, ami.url), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["boot_override"]["target"] == "Pxe"
    assert ami.state.resets == ["On"]
    assert all(auth is not None for _, path, auth in ami.state.seen if path.rstrip("/") != "/redfish/v1")


@pytest.mark.parametrize(("link", "ok"), [
    ("/redfish/v1/Systems/Self", True),
    ("Systems/Self", True),  # relative to the address, as RFC 3986 resolves it
    ("https://bmc-7.example:8443/redfish/v1", True),
    ("https://BMC-7.example:8443/redfish/v1", True),  # host names are not case-sensitive
    ("https://bmc-7.example/redfish/v1", False),  # another port (443)
    ("http://bmc-7.example:8443/redfish/v1", False),
    ("//bmc-8.example:8443/redfish/v1", False),
    ("//bmc-7.example:8443/redfish/v1", True),
    ("https://admin@bmc-7.example:8443/redfish/v1", False),
    ("https://bmc-7.example:8443@evil.example/redfish/v1", False),
    ("https://bmc-7.example:8443\\@evil.example/", False),
    ("https://bmc-7.example:8443/redfish/v1 x", False),
    ("ftp://bmc-7.example:8443/x", False),
    ("https://[fd00::7]:8443/redfish/v1", False),
])
def test_link_check_accepts_only_the_bmc_origin(link: str, ok: bool) -> None:
    from upi.bmc.origin import Link, OffOrigin

    bmc = Link("https://bmc-7.example:8443")
    if ok:
        assert bmc.check(bmc.resolve(link)).startswith("https://")
    else:
        with pytest.raises(OffOrigin):
            bmc.check(bmc.resolve(link))


def test_link_check_on_an_ipv6_bmc() -> None:
    from upi.bmc.origin import Link, OffOrigin

    bmc = Link("https://[FD00::7]")
    assert bmc.check(bmc.resolve("/redfish/v1")) == "https://[FD00::7]/redfish/v1"
    assert bmc.check("https://[fd00::7]:443/redfish/v1")
    with pytest.raises(OffOrigin):
        bmc.check("https://[fd00::8]/redfish/v1")


def test_link_check_refuses_a_port_in_other_digits() -> None:
    from upi.bmc.origin import Link, OffOrigin

    bmc = Link("https://bmc-7.example")
    with pytest.raises(OffOrigin):  # int() reads '٤٤٣' as 443; a URL parser elsewhere may not
        bmc.check("https://bmc-7.example:\u0664\u0664\u0663/redfish/v1")
