"""`upi boot-metal --watch`: boot over Redfish, follow each node to its Node, flip its PXE file."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer
from pushkit import Site
from redfish_support import AmiFake, Tls, pushed_site_with_bmc, write_credentials
from typer.testing import CliRunner

from upi.cli import app

W0_GRUB = "grub.cfg-01-b8-ce-f6-10-33-44"


def _site(runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake) -> Site:
    return pushed_site_with_bmc(runner, tmp_path, example_dir, tls, ami)  # type: ignore[no-any-return]


def test_watch_follows_the_node_until_it_joins_and_flips_its_pxe_file(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = _site(runner, tmp_path, example_dir, tls, ami)

    def node_installs() -> None:  # the DGX: once powered, it installs RHCOS and its kubelet registers
        end = time.monotonic() + 60
        while ami.state.power != "On" and time.monotonic() < end:
            time.sleep(0.05)
        kube.add_node("worker-0", ready=False)

    threading.Thread(target=node_installs, daemon=True).start()
    res = runner.invoke(app, ["boot-metal", str(site.inventory), "worker-0", "--watch", "--kubeconfig",
                              str(kube.kubeconfig), "-o", str(site.out), "--poll", "0.2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc[0]["node"] == "worker-0" and doc[0]["joined"] is True and doc[0]["reset"] == "On"
    assert "watching worker-0 until their Nodes register" in res.stderr
    assert "worker-0 joined: PXE file boots its disk from now on (local:" in res.stderr
    served = (site.root / "var/lib/tftpboot" / W0_GRUB).read_text()
    assert "coreos.inst" not in served and served.rstrip().endswith("exit")
    assert "worker-0" in json.loads((site.out / "installed.json").read_text())["nodes"]


def test_watch_gives_up_on_a_node_that_never_joins(runner: CliRunner, tmp_path: Path, example_dir: Path,
                                                   tls: Tls, ami: AmiFake, kube: FakeApiServer) -> None:
    site = _site(runner, tmp_path, example_dir, tls, ami)
    res = runner.invoke(app, ["boot-metal", str(site.inventory), "worker-0", "--watch", "--kubeconfig",
                              str(kube.kubeconfig), "-o", str(site.out), "--poll", "0.2",
                              "--timeout", "2s"])
    assert res.exit_code == 1
    assert "worker-0: no Node registered within" in res.stderr
    assert "coreos.inst" in (site.root / "var/lib/tftpboot" / W0_GRUB).read_text()


@pytest.mark.parametrize(("extra", "message"), [
    (["--watch"], "name the render dir with -o DIR"),
    (["--watch", "-o", "x", "--dry-run"], "--watch cannot be combined with --dry-run"),
])
def test_watch_usage_errors_touch_no_bmc(runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake,
                                         extra: list[str], message: str) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = example_dir / "dgxpod.yaml"
    inv.write_text(inv.read_text().replace(
        'mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44,',
        f'mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44, bmc: {{address: "{ami.url}", '
        f'credentials_file: {creds.name}, verify_tls: "{tls.ca_file}"}},'))
    res = runner.invoke(app, ["boot-metal", str(inv), *extra])
    assert res.exit_code == 2 and message in res.stderr
    assert ami.state.patches == [] and ami.state.resets == []
