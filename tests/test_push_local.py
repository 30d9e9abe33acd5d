"""`upi push` to `local: true` targets: the same steps, through the runner, no SSH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require
from pushkit import make_site

from upi.cli import app
from upi.inventory import load_inventory
from upi.push import PushError, push_files
from upi.render import RenderedFile


@pytest.fixture
def site(runner, tmp_path: Path, example_dir: Path):
    require("dnsmasq")
    require("haproxy")
    return make_site(tmp_path, example_dir, runner, {"local": True})


def _push(runner, site, *extra: str):
    return runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])


def test_local_target_is_validated_installed_and_reloaded(runner, site) -> None:
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {f["host"] for f in doc["files"]} == {"local"}
    assert [c["returncode"] for c in doc["commands"] if c["purpose"].startswith("validate")] == [0, 0, 0]
    assert (site.root / "etc/dnsmasq.d/dhcp-pxe.conf").is_file()
    assert site.reload_log() == ["dnsmasq", "haproxy"]
    assert json.loads(_push(runner, site, "--json").output)["commands"] == []


def test_broken_dnsmasq_conf_is_rejected_by_dnsmasq(runner, site) -> None:
    assert _push(runner, site).exit_code == 0
    bad = RenderedFile("dnsmasq/dns.conf", b"no-such-option=1\n", 0o644)
    with pytest.raises(PushError, match="dnsmasq rejected it"):
        push_files(load_inventory(site.inventory), [bad], target="provisioner")
    assert (site.root / "etc/dnsmasq.d/dns.conf").read_bytes() == (site.out / "dnsmasq/dns.conf").read_bytes()
    assert site.reload_log() == ["dnsmasq", "haproxy"]


def test_a_file_edited_after_render_is_refused(runner, site) -> None:
    with (site.out / "haproxy/haproxy.cfg").open("a") as fh:
        fh.write("# hand edit\n")
    result = _push(runner, site)
    assert result.exit_code == 2
    assert "haproxy.cfg differs from manifest.json" in result.output
    assert not site.root.exists()


def test_a_dir_without_manifest_is_refused(runner, site, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["push", str(site.inventory), "-o", str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert "manifest.json not found: run `upi render INVENTORY -o" in result.output


def test_only_must_name_a_target(runner, site) -> None:
    result = _push(runner, site, "--only", "dns")
    assert result.exit_code == 2
    assert "--only 'dns': expected one of provisioner, load_balancer" in result.output
