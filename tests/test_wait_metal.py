"""`upi wait`'s metal helper: the MCS probe (a real TLS peer), Redfish boot then, PXE flips on join."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from certs import make_ca
from redfish_support import AmiFake, Tls, pushed_site_with_bmc, write_credentials
from typer.testing import CliRunner
from wait_support import FakeMcs

from upi.cli import app
from upi.inventory import load_inventory
from upi.wait.metal import MetalHooks, ignition_ca, mcs_probe, run_metal

DOMAIN = "dgxpod.nvidia.com"
W0_GRUB = "grub.cfg-01-b8-ce-f6-10-33-44"
W1_GRUB = "grub.cfg-01-b8-ce-f6-10-33-46"


def _assets(tmp_path: Path, ca_pem: bytes) -> Path:
    """An assets dir with a pointer worker.ign as openshift-install writes it (root CA as a data URL)."""
    assets = tmp_path / "assets"
    assets.mkdir()
    source = "data:text/plain;charset=utf-8;base64," + base64.b64encode(ca_pem).decode()
    (assets / "worker.ign").write_text(json.dumps({"ignition": {
        "config": {"merge": [{"source": f"https://api-int.{DOMAIN}:22623/config/worker"}]},
        "security": {"tls": {"certificateAuthorities": [{"source": source}]}}, "version": "3.2.0"}}))
    return assets


@pytest.fixture
def cluster_ca() -> Any:
    return make_ca("root-ca")


@pytest.fixture
def mcs(tmp_path: Path, cluster_ca: Any) -> Iterator[FakeMcs]:
    server = FakeMcs(tmp_path, cluster_ca, DOMAIN)
    yield server
    server.stop()


def test_ignition_ca_reads_the_data_url(tmp_path: Path, cluster_ca: Any) -> None:
    assert ignition_ca(_assets(tmp_path, cluster_ca.cert_pem)) == cluster_ca.cert_pem
    (tmp_path / "assets" / "worker.ign").write_text("{}")
    assert ignition_ca(tmp_path / "assets") is None


def test_probe_trusts_only_the_clusters_own_mcs(tmp_path: Path, example_dir: Path, cluster_ca: Any,
                                                mcs: FakeMcs) -> None:
    inv = load_inventory(example_dir / "dgxpod.yaml")
    ok, why = mcs_probe(inv, _assets(tmp_path, cluster_ca.cert_pem), address="127.0.0.1", port=mcs.port)()
    assert ok, why
    other = tmp_path / "other"
    other.mkdir()
    ok, why = mcs_probe(inv, _assets(other, make_ca("impostor").cert_pem), address="127.0.0.1",
                        port=mcs.port)()
    assert not ok and "certificate verify failed" in why
    mcs.stop()
    ok, why = mcs_probe(inv, tmp_path / "assets", address="127.0.0.1", port=mcs.port, timeout=1)()
    assert not ok and f"https://127.0.0.1:{mcs.port}" in why


def test_probe_with_an_unusable_root_ca_says_so_and_never_raises(tmp_path: Path, example_dir: Path,
                                                                 mcs: FakeMcs) -> None:
    # A worker.ign whose CA is no certificate must not kill the metal helper: the probe says why.
    inv = load_inventory(example_dir / "dgxpod.yaml")
    bogus = b"-----BEGIN CERTIFICATE-----\nRkFLRSBDQQ==\n-----END CERTIFICATE-----\n"
    ok, why = mcs_probe(inv, _assets(tmp_path, bogus), address="127.0.0.1", port=mcs.port)()
    assert not ok and "is not a usable certificate" in why and "worker.ign" in why
    assert mcs.probes == []


def test_workers_boot_when_the_mcs_answers_and_flip_as_they_join(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    # worker-0 has a BMC (the DGX fake); worker-1 has none: booted by hand, still flipped on join.
    site = pushed_site_with_bmc(runner, tmp_path, example_dir, tls, ami)
    inv = load_inventory(site.inventory)
    assert inv.nodes[4].bmc is not None
    answers = iter([(False, "connection refused"), (False, "connection refused"), (True, "200 OK")])
    probes: list[int] = []

    def probe() -> tuple[bool, str]:
        probes.append(len(ami.state.resets))  # resets sent before each look
        return next(answers)

    joined: set[str] = set()
    notes: list[str] = []
    warnings: list[str] = []

    def registered() -> set[str]:
        if ami.state.power == "On":  # it booted: it installs and joins
            joined.update({"worker-0", f"worker-1.{DOMAIN}"})
        return set(joined)

    hooks = MetalHooks(note=notes.append, warn=warnings.append, registered=registered)
    run_metal(site.inventory, inv, site.out, hooks, probe, threading.Event(), poll=0.01)
    assert probes == [0, 0, 0], "no node may be booted before the MCS answers"
    assert ami.state.resets == ["On"]
    assert ami.state.boot["BootSourceOverrideTarget"] == "Pxe"
    assert any("booting worker-0 over Redfish" in n for n in notes), notes
    assert any(n.startswith("worker-0, worker-1 joined: PXE file boots its disk") for n in notes), notes
    tftp = site.root / "var/lib/tftpboot"
    for name in (W0_GRUB, W1_GRUB):
        text = (tftp / name).read_text()
        assert "coreos.inst" not in text and text.rstrip().endswith("exit")
    record = json.loads((site.out / "installed.json").read_text())["nodes"]
    assert set(record) == {"worker-0", "worker-1"} and record["worker-0"]["how"] == "Node registered"
    assert warnings == []
    # A resumed wait boots nobody again: both are recorded installed.
    run_metal(site.inventory, inv, site.out, hooks, lambda: pytest.fail("probed again"), threading.Event())
    assert ami.state.resets == ["On"]


def test_without_a_render_dir_nothing_is_flipped_and_it_says_so(example_dir: Path) -> None:
    inv = load_inventory(example_dir / "dgxpod.yaml")
    warnings: list[str] = []
    hooks = MetalHooks(note=lambda _m: None, warn=warnings.append, registered=set)
    run_metal(example_dir / "dgxpod.yaml", inv, None, hooks, lambda: pytest.fail("no BMC: no probe"),
              threading.Event(), poll=0.01)
    assert len(warnings) == 1 and "not flipped to local boot" in warnings[0]
    assert "worker-0, worker-1" in warnings[0]


def test_stop_ends_the_wait_for_the_mcs(tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv_path = example_dir / "dgxpod.yaml"
    inv_path.write_text(inv_path.read_text().replace(
        'mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44,',
        f'mac: "b8:ce:f6:10:33:44", ip: 10.33.3.44, bmc: {{address: "{ami.url}", '
        f'credentials_file: {creds.name}, verify_tls: "{tls.ca_file}"}},'))
    inv = load_inventory(inv_path)
    stop = threading.Event()
    looks: list[int] = []

    def probe() -> tuple[bool, str]:
        looks.append(1)
        if len(looks) == 3:
            stop.set()
        return False, "refused"

    hooks = MetalHooks(note=lambda _m: None, warn=lambda _m: None, registered=set)
    run_metal(inv_path, inv, tmp_path / "out", hooks, probe, stop, poll=0.01)
    assert len(looks) == 3 and ami.state.resets == [] and ami.state.patches == []


def test_wait_has_a_no_metal_switch(runner: CliRunner) -> None:
    res = runner.invoke(app, ["wait", "--help"], terminal_width=200)
    assert "--no-metal" in res.output
