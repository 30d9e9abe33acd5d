"""`upi wait` end to end with BMCs: the DGX workers booted over Redfish, flipped to disk as they join.

Everything `upi wait` talks to is a separate peer, driven through the CLI:
the FAKE openshift-install (its wait-for runs scripted), the fake Kubernetes
API (Nodes registering), a machine config server's /healthz over TLS signed
by the cluster's root CA (the one the FAKE installer put in worker.ign), the
real sushy-tools emulator and the DGX (AMI) BMC fake, and a local push site
whose TFTP root is where the per-MAC PXE files land. The test plays the
cluster: a node whose BMC powered it on "installs" and its Node registers.

Overridden, and only that: the address and port upi probes the MCS at (the
inventory's load balancer IP is not on this machine; the probe itself, TLS
verification included, is upi's own) and the metal helper's poll (10 s in
production; 0.1 s here so a file of full runs stays well under a minute).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import require
from fake_apiserver import FakeApiServer
from pushkit import Site, make_site
from redfish_support import PASSWORD, AmiFake, Emulator, Silent, Tls, fake_system, write_credentials
from typer.testing import CliRunner
from wait_support import FakeMcs, cluster_ca, script, state, wait_args

import upi.wait.metal as metal
from upi.cli import app

pytestmark = pytest.mark.usefixtures("fake_openshift_install")

DOMAIN = "dgxpod.nvidia.com"
GRUB = {"worker-0": "grub.cfg-01-b8-ce-f6-10-33-44", "worker-1": "grub.cfg-01-b8-ce-f6-10-33-46"}
UUID1 = "7b0c3f1e-2d4a-4c55-9a6e-0f1d2c3b4a51"
# Only the metal helper: no hypervisor here, and the bootstrap stays (HAProxy is test_wait_site's).
QUIET = ("--no-vms", "--keep-bootstrap")


@dataclass
class MetalSite:
    """A pushed site, an install in `assets`, its MCS answering; `wait()` runs `upi wait` on it."""

    site: Site
    assets: Path
    mcs: FakeMcs
    kube: FakeApiServer
    release: Path  # the FAKE installer's "slow" waits end when this file exists

    def wait(self, runner: CliRunner, *extra: str) -> Any:
        return runner.invoke(app, wait_args(self.site.inventory, self.assets, self.kube, *QUIET,
                                            "-o", str(self.site.out), *extra))

    def pxe(self, node: str) -> str:
        """The per-MAC GRUB file of `node` as the provisioner serves it."""
        return (self.site.root / "var/lib/tftpboot" / GRUB[node]).read_text()

    def installed(self) -> dict[str, Any]:
        path = self.site.out / "installed.json"
        return dict(json.loads(path.read_text())["nodes"]) if path.exists() else {}


def _booted_disk(text: str) -> bool:
    return "coreos.inst" not in text and text.rstrip().endswith("exit")


@pytest.fixture
def build(runner: CliRunner, tmp_path: Path, example_dir: Path, kube: FakeApiServer, tls: Tls,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, dict[str, Any]]], MetalSite]]:
    """A site whose nodes have the given `bmc:` sections: rendered, ignition made, pushed; MCS up."""
    servers: list[FakeMcs] = []

    def make(bmcs: dict[str, dict[str, Any]]) -> MetalSite:
        require("dnsmasq")  # upi push checks what it pushes with the real programs
        require("haproxy")
        site = make_site(tmp_path, example_dir, runner, {"local": True})
        doc = yaml.safe_load(site.inventory.read_text())
        for node in doc["nodes"]:
            if node["name"] in bmcs:
                node["bmc"] = {"verify_tls": str(tls.ca_file), **bmcs[node["name"]]}
        site.inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
        assets = tmp_path / "assets"
        for argv in (["ignition", str(site.inventory), "--dir", str(assets), "-o", str(site.out)],
                     ["push", str(site.inventory), "-o", str(site.out)]):
            res = runner.invoke(app, argv)
            assert res.exit_code == 0, res.output
        mcs = FakeMcs(tmp_path / "mcs", cluster_ca(assets), DOMAIN, up=False)
        servers.append(mcs)
        real_probe = metal.mcs_probe
        monkeypatch.setattr(metal, "mcs_probe", lambda inv, where, **_kw: real_probe(
            inv, where, address="127.0.0.1", port=mcs.port))
        monkeypatch.setattr(metal, "POLL", 0.1)
        return MetalSite(site, assets, mcs, kube, tmp_path / "release")

    yield make
    for server in servers:
        server.stop()


def cluster(s: MetalSite, powered: dict[str, Callable[[], bool]], when: Callable[[], bool],
            early: list[bool] | None = None) -> Callable[[], None]:
    """Play the cluster in a thread: the MCS comes up once upi has probed it twice (`early` gets
    whether any node was powered on before that); a node its BMC powered on registers; the
    installer's wait ends once `when()` holds.

    Returns the function that stops it (it also stops by itself after 60 s: a guard, not a timing).
    """
    stop = threading.Event()
    kube, release = s.kube, s.release

    def run() -> None:
        end = time.monotonic() + 60
        left = dict(powered)
        while not stop.is_set() and time.monotonic() < end:
            if not s.mcs.up.is_set() and len(s.mcs.probes) >= 2:
                if early is not None:
                    early.append(any(is_on() for is_on in powered.values()))
                s.mcs.up.set()
            for name, is_on in list(left.items()):
                if is_on():
                    kube.add_node(name, ready=False)  # RHCOS installed, kubelet registered
                    del left[name]
            if when():
                release.touch()
            stop.wait(0.05)

    threading.Thread(target=run, daemon=True).start()
    return stop.set


@pytest.fixture
def emulator(tmp_path: Path, tls: Tls) -> Iterator[Emulator]:
    work = tmp_path / "emulator"
    work.mkdir()
    emu = Emulator(work, [fake_system(UUID1, "dgx-b", power="Off")], tls)
    yield emu
    emu.stop()


def test_wait_boots_each_worker_once_flips_it_on_join_and_a_resumed_wait_boots_only_the_rest(
        runner: CliRunner, build: Callable[..., MetalSite], ami: AmiFake, emulator: Emulator,
        example_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = write_credentials(example_dir / "bmc-ami.yaml")
    bad = write_credentials(example_dir / "bmc-emu.yaml", password="not-the-password")
    s = build({"worker-0": {"address": ami.url, "credentials_file": good.name, "timeout": 5.0},
               "worker-1": {"address": emulator.url, "credentials_file": bad.name, "timeout": 5.0}})
    # Run 1: worker-1's BMC refuses its credentials; the installer fails at install-complete.
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"], install_complete=["degraded", "slow"])

    def emulated_on() -> bool:
        return bool(emulator.get(f"/redfish/v1/Systems/{UUID1}")["PowerState"] == "On")

    early: list[bool] = []
    done = cluster(s, {"worker-0": lambda: bool(ami.state.resets), "worker-1": emulated_on},
                   lambda: "worker-0" in s.installed(), early)
    try:
        first = s.wait(runner)
    finally:
        done()
    assert first.exit_code == 1, first.output
    out = first.stdout
    # (1) nothing was powered on while the MCS did not answer; once it did, worker-0 got a
    # one-time UEFI network boot and a power on.
    assert early == [False] and set(s.mcs.probes) == {"/healthz"}
    assert ami.state.resets == ["On"] and ami.state.power == "On"
    assert ami.state.boot["BootSourceOverrideEnabled"] == "Once"
    assert ami.state.boot["BootSourceOverrideTarget"] == "Pxe"
    assert ami.state.boot["BootSourceOverrideMode"] == "UEFI"
    assert "booting worker-0, worker-1 over Redfish" in out
    # (5) the refusing BMC is named with its node, the wait went on; the installer decided the exit.
    assert (f"worker-1 (BMC {emulator.url}): refused the credentials in {bad} (HTTP 401)") in out
    assert "boot it by hand (upi boot-metal)" in out
    assert PASSWORD not in first.output and "not-the-password" not in first.output
    assert first.stderr.startswith("upi: error: wait-for install-complete failed (exit 6: install failed); "
                                   "the installer's last errors:")
    # (2) worker-0's Node registered: its PXE file now boots the disk, recorded with the MAC.
    assert _booted_disk(s.pxe("worker-0")), s.pxe("worker-0")
    assert "coreos.inst" in s.pxe("worker-1")
    record = s.installed()
    assert set(record) == {"worker-0"} and record["worker-0"]["how"] == "Node registered"
    assert record["worker-0"]["mac"] == "b8:ce:f6:10:33:44"
    assert "worker-0 joined: PXE file boots its disk from now on" in out
    assert emulator.get(f"/redfish/v1/Systems/{UUID1}")["PowerState"] == "Off"
    assert state(s.assets) == {"bootstrap_complete"}

    # Run 2, resumed after the credentials were fixed: (3) worker-0 is installed and is not booted
    # again, while worker-1, in the same boot, is.
    write_credentials(bad)
    s.release.unlink()
    probes_before, patches_before = len(s.mcs.probes), len(ami.state.patches)
    done = cluster(s, {"worker-1": emulated_on}, lambda: "worker-1" in s.installed())
    try:
        second = s.wait(runner)
    finally:
        done()
    assert second.exit_code == 0, second.output
    assert "booting worker-1 over Redfish" in second.stdout
    assert ami.state.resets == ["On"] and len(ami.state.patches) == patches_before
    system = emulator.get(f"/redfish/v1/Systems/{UUID1}")
    assert system["PowerState"] == "On"
    assert system["Boot"]["BootSourceOverrideTarget"] == "Pxe"
    assert system["Boot"]["BootSourceOverrideMode"] == "UEFI"
    assert len(s.mcs.probes) > probes_before
    assert _booted_disk(s.pxe("worker-1")) and _booted_disk(s.pxe("worker-0"))
    assert set(s.installed()) == {"worker-0", "worker-1"}
    assert "refused" not in second.output


def test_no_metal_boots_nothing(runner: CliRunner, build: Callable[..., MetalSite], ami: AmiFake,
                                example_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    creds = write_credentials(example_dir / "bmc-ami.yaml")
    s = build({"worker-0": {"address": ami.url, "credentials_file": creds.name, "timeout": 5.0}})
    script(monkeypatch, tmp_path, install_complete=["slow"])
    s.mcs.up.set()
    # Nothing to wait for when nothing happens: the install ends after 1.5 s, ample for a helper
    # that ignored --no-metal to probe the MCS (it answers at once) and reset the BMC.
    timer = threading.Timer(1.5, s.release.touch)
    timer.start()
    try:
        res = s.wait(runner, "--no-metal")
    finally:
        timer.cancel()
    assert res.exit_code == 0, res.output
    assert s.mcs.probes == []
    assert ami.state.resets == [] and ami.state.patches == []
    assert "coreos.inst" in s.pxe("worker-0")
    assert not (s.site.out / "installed.json").exists()
    assert "Redfish" not in res.output


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_unreachable_and_refusing_bmcs_are_named_and_the_wait_goes_on(
        runner: CliRunner, build: Callable[..., MetalSite], ami: AmiFake, example_dir: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    silent = Silent()
    wrong = write_credentials(example_dir / "bmc-wrong.yaml", password="wrong-password")
    try:
        s = build({"worker-0": {"address": ami.url, "credentials_file": wrong.name, "timeout": 5.0},
                   "worker-1": {"address": silent.url, "credentials_file": wrong.name, "timeout": 1.0}})
        script(monkeypatch, tmp_path, install_complete=["slow"])
        looked: list[str] = []

        def seen(method: str, path: str) -> None:  # the fake API's requests once the MCS was probed
            if s.mcs.probes:  # not the status reader's first look, taken before the helpers start
                looked.append(f"{method} {path}")

        s.kube.tamper = seen
        s.mcs.up.set()
        # The helper has given up booting once, after probing the MCS, it looks for the Nodes.
        done = cluster(s, {}, lambda: any("/api/v1/nodes" in r for r in looked))
        try:
            res = s.wait(runner, "--no-approve", *(["--json"] if as_json else []))
        finally:
            done()
    finally:
        silent.stop()
    assert res.exit_code == 0, res.output
    refused = f"worker-0 (BMC {ami.url}): refused the credentials in {wrong} (HTTP 401)"
    silence = f"worker-1 (BMC {silent.url}): no answer within 1 s"
    progress = res.stderr if as_json else res.stdout.split("\nupi wait\n")[0]
    assert refused in progress and silence in progress
    assert progress.count("boot it by hand (upi boot-metal)") == 2
    assert "wrong-password" not in res.output
    if as_json:
        warnings = json.loads(res.stdout)["warnings"]
    else:  # the summary lists them again: on a terminal the run's lines have long scrolled away
        summary = res.stdout.split("\nupi wait\n", 1)[1]
        warnings = [line.removeprefix("warning: ") for line in summary.splitlines()
                    if line.startswith("warning: ")]
    assert any(w.startswith(refused) for w in warnings), warnings
    assert any(w.startswith(silence) for w in warnings), warnings
    assert ami.state.resets == [] and ami.state.patches == []
    assert "coreos.inst" in s.pxe("worker-0") and "coreos.inst" in s.pxe("worker-1")
    assert state(s.assets) == {"bootstrap_complete", "install_complete"}


def test_a_credentials_file_others_can_read_stops_wait_before_it_starts(
        runner: CliRunner, build: Callable[..., MetalSite], ami: AmiFake, example_dir: Path) -> None:
    creds = write_credentials(example_dir / "bmc-ami.yaml")
    s = build({"worker-0": {"address": ami.url, "credentials_file": creds.name, "timeout": 5.0}})
    s.mcs.up.set()
    creds.chmod(0o644)
    res = s.wait(runner)
    assert res.exit_code == 2, res.output
    assert str(creds) in res.stderr and "chmod 600" in res.stderr and "credentials_file" in res.stderr
    assert "Traceback" not in res.output and PASSWORD not in res.output
    assert "wait-for" not in (s.assets / ".openshift_install.log").read_text()
    assert s.mcs.probes == [] and ami.state.resets == [] and ami.state.patches == []
