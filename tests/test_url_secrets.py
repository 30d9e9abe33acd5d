"""A message that refuses credentials in a URL never prints the password it refuses.

Every place upi reads a URL from the user: the inventory (a BMC address,
http_base_url, an rhcos URL), `upi images --from`, a kubeconfig's server.
Each is refused (exit 2) with the user and password shown as `***`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from redfish_support import inventory_with_bmcs, write_credentials
from test_approve_csr import INVENTORY
from typer.testing import CliRunner

from upi.cli import app
from upi.redact import hide_userinfo

SECRET = "Pa55-w0rd-in-url"  # noqa: S105 - the password the messages must not show


@pytest.mark.parametrize("address", [
    f"https://admin:{SECRET}@10.33.4.44",
    f"https://admin:{SECRET}@10.33.4.44:8443/redfish/v1",
    f"http://admin:{SECRET}@10.33.4.44",
    f"https://:{SECRET}@10.33.4.44",
    f"https://admin:{SECRET} x@10.33.4.44",
    f"https://admin:{SECRET}@[::1",
])
def test_a_bmc_address_with_a_password_is_refused_without_showing_it(
        runner: CliRunner, example_dir: Path, address: str) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": address, "credentials_file": creds.name}})
    res = runner.invoke(app, ["validate", str(inv)])
    assert res.exit_code == 2, res.output
    assert "metal.yaml:" in res.stderr and "nodes[4].bmc.address" in res.stderr
    assert "***@" in res.stderr and "put them in bmc.credentials_file" in res.stderr
    assert SECRET not in res.output
    assert "boot files" not in res.stderr, "a BMC address goes into no boot file"


@pytest.mark.parametrize(("address", "message"), [
    ("ftp://10.33.4.44", "is not a BMC address (write https://HOST or https://HOST:PORT"),
    ("10.33.4.44", "is not a BMC address (write https://HOST"),
    ("https://bmc 1", "is not a BMC address (write https://HOST"),
    ("https://10.33.4.44:0", "is not a BMC address (port 0;"),
    ("https://10.33.4.44?x=1", "name the BMC only (https://HOST[:PORT])"),
])
def test_the_bmc_address_message_asks_for_what_a_bmc_address_is(
        runner: CliRunner, example_dir: Path, address: str, message: str) -> None:
    # Not "want http://HOST[:PORT]/..." nor "written into boot files": a BMC is https:// only.
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": address, "credentials_file": creds.name}})
    res = runner.invoke(app, ["validate", str(inv)])
    assert res.exit_code == 2, res.output
    assert "nodes[4].bmc.address" in res.stderr and message in res.stderr, res.stderr
    assert "http://HOST" not in res.stderr and "boot files" not in res.stderr


@pytest.mark.parametrize(("old", "new"), [
    ("http_base_url: http://10.33.3.18:8080", f"http_base_url: http://web:{SECRET}@10.33.3.18:8080"),
    ("http_base_url: http://10.33.3.18:8080", f"http_base_url: 'http://web:{SECRET} x@10.33.3.18'"),
    ("  kernel: rhcos/", f"  kernel: http://web:{SECRET}@10.33.3.18/rhcos/"),
])
def test_inventory_urls_with_a_password_are_refused_without_showing_it(
        runner: CliRunner, example_dir: Path, old: str, new: str) -> None:
    inv = example_dir / "dgxpod.yaml"
    text = inv.read_text()
    assert old in text
    inv.write_text(text.replace(old, new, 1))
    res = runner.invoke(app, ["validate", str(inv)])
    assert res.exit_code == 2, res.output
    assert "***@" in res.stderr and SECRET not in res.output


@pytest.mark.parametrize("src", [
    f"https://mirror:{SECRET}@mirror.example/rhcos/4.19",
    f"http://mirror:{SECRET}@/rhcos",
    f"ftp://mirror:{SECRET}@mirror.example/rhcos",
    f"https://mirror:{SECRET}@[::1/rhcos",
])
def test_images_from_a_url_with_a_password_is_refused_without_showing_it(
        runner: CliRunner, example_dir: Path, tmp_path: Path, src: str) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(example_dir / "dgxpod.yaml"), "-o", str(out)]).exit_code == 0
    res = runner.invoke(app, ["images", str(example_dir / "dgxpod.yaml"), "-o", str(out), "--from", src])
    assert res.exit_code == 2, res.output
    assert "--from" in res.stderr and SECRET not in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("server", [f"http://admin:{SECRET}@127.0.0.1:6443",
                                    f"https://admin:{SECRET}@[::1"])
def test_a_kubeconfig_server_with_a_password_is_refused_without_showing_it(
        runner: CliRunner, tmp_path: Path, server: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    res = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(kubeconfig), "--once"])
    assert res.exit_code == 2, res.output
    assert "server" in res.stderr and SECRET not in res.output


@pytest.mark.parametrize(("text", "shown"), [
    ("https://u:p@h/x", "https://***@h/x"),
    ("'http://u:p w@h:80'", "'http://***@h:80'"),
    ("//u@h", "//***@h"),
    ("https://h/x@sha256:00", "https://h/x@sha256:00"),  # an @ after the host is not a user
    ("see http://a:b@c and https://d:e@f/", "see http://***@c and https://***@f/"),
])
def test_hide_userinfo(text: str, shown: str) -> None:
    assert hide_userinfo(text) == shown
