"""`upi ignition` through the CLI, against the FAKE openshift-install (tests/fakes)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from conftest import inventory_path

from upi.cli import app
from upi.ignition import IGNITION_FILES, ignition_status, made_at
from upi.installer import Installer, InstallerFailed, pull_secret_fragments

pytestmark = pytest.mark.usefixtures("fake_openshift_install")
GOLDEN = Path(__file__).resolve().parent / "golden"


def ignition(runner, inventory: Path, tmp_path: Path, *extra: str):
    return runner.invoke(app, ["ignition", str(inventory), "--dir", str(tmp_path / "assets"),
                               "-o", str(tmp_path / "out"), *extra])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def scheduler_in_bootstrap(assets: Path) -> dict:
    """The Scheduler manifest as the bootstrap node will apply it (embedded in bootstrap.ign)."""
    doc = json.loads((assets / "bootstrap.ign").read_text())
    entry = next(f for f in doc["storage"]["files"]
                 if f["path"].endswith("/manifests/cluster-scheduler-02-config.yml"))
    return yaml.safe_load(base64.b64decode(entry["contents"]["source"].split(",", 1)[1]))


def test_standard_cluster_keeps_masters_unschedulable(runner, tmp_path: Path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 0, result.output
    # The installer wrote true (compute replicas are 0 in UPI); upi set it back before ignition.
    assert "Making control-plane schedulable" in result.stderr
    scheduler = scheduler_in_bootstrap(tmp_path / "assets")
    assert scheduler["spec"]["mastersSchedulable"] is False
    assert scheduler["kind"] == "Scheduler" and scheduler["spec"]["policy"] == {"name": ""}
    assert "mastersSchedulable: false" in result.stdout


def _note_after_warning(stderr: str) -> str:
    """The line right after the installer's mastersSchedulable warning (upi's explanation)."""
    lines = stderr.splitlines()
    at = next(i for i, ln in enumerate(lines) if "Making control-plane schedulable" in ln)
    return lines[at + 1]


def test_the_installers_schedulable_warning_is_explained_for_a_standard_cluster(runner, tmp_path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 0, result.output
    assert _note_after_warning(result.stderr) == (
        "  upi: expected with UPI: install-config lists 0 compute replicas because the workers join "
        "later by PXE; this inventory has 2 workers, so upi sets mastersSchedulable back to false: "
        "workloads and the routers run on the workers, the masters only run the control plane")


def test_the_schedulable_warning_is_explained_for_compact_and_one_worker(
        runner, tmp_path: Path, example_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_VERSION", "4.18.1")
    compact = ignition(runner, example_dir / "compact.yaml", tmp_path / "compact")
    assert compact.exit_code == 0, compact.output
    assert "this is a compact cluster (no workers), so the masters must run workloads and the " \
        "ingress routers: upi keeps mastersSchedulable true" in _note_after_warning(compact.stderr)
    monkeypatch.delenv("FAKE_OPENSHIFT_INSTALL_VERSION")
    one = example_dir / "dgxpod.yaml"
    text = one.read_text()
    one.write_text(text[:text.index("  - {name: worker-1")])
    single = ignition(runner, one, tmp_path / "one")
    assert single.exit_code == 0, single.output
    assert "this inventory has one worker, which cannot hold both router replicas" in \
        _note_after_warning(single.stderr)
    quiet = ignition(runner, inventory_path("dgxpod"), tmp_path / "quiet", "--log-level", "error")
    assert "upi: expected with UPI" not in quiet.stderr


def test_compact_cluster_makes_masters_schedulable(runner, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_VERSION", "4.18.1")
    result = ignition(runner, inventory_path("compact"), tmp_path)
    assert result.exit_code == 0, result.output
    assert scheduler_in_bootstrap(tmp_path / "assets")["spec"]["mastersSchedulable"] is True
    assert "warning" not in result.stderr.replace("level=warning", "")


def test_ignition_files_are_staged_world_readable_with_a_record(runner, tmp_path: Path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 0, result.output
    stage = tmp_path / "out" / "http" / "ignition"
    record = json.loads((stage / "upi-ignition.json").read_text())
    assert record == json.loads((tmp_path / "assets" / ".upi-ignition.json").read_text())
    for name in IGNITION_FILES:
        staged = stage / name
        assert mode(staged) == 0o644
        assert staged.read_bytes() == (tmp_path / "assets" / name).read_bytes()
        assert json.loads(staged.read_text())["ignition"]["version"] == "3.2.0"
        assert record["files"][name]["size"] == staged.stat().st_size
    assert "http://10.33.3.18:8080/ignition/worker.ign" in result.stdout
    assert not list(stage.glob(".upi-staging-*"))


def test_install_config_is_the_rendered_one_private_with_orig(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    assets = tmp_path / "assets"
    assert not (assets / "install-config.yaml").exists()  # the installer consumed it
    orig = assets / "install-config.yaml.orig"
    assert mode(orig) == 0o600
    rendered = tmp_path / "rendered"
    runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(rendered)])
    assert orig.read_bytes() == (rendered / "install-config.yaml").read_bytes()


def test_admin_credentials_stay_private_and_unprinted(runner, tmp_path: Path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    auth = tmp_path / "assets" / "auth"
    assert mode(auth / "kubeconfig") == 0o600 and mode(auth / "kubeadmin-password") == 0o600
    assert (auth / "kubeadmin-password").read_text() not in result.output
    assert not (tmp_path / "out" / "http" / "ignition" / "auth").exists()


def test_refuses_an_assets_dir_with_an_older_install(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    before = (tmp_path / "out" / "http" / "ignition" / "bootstrap.ign").read_bytes()
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 2
    assert "holds an older install's state (.openshift_install_state.json)" in result.stderr
    assert "pass --force" in result.stderr
    assert (tmp_path / "out" / "http" / "ignition" / "bootstrap.ign").read_bytes() == before


def test_force_moves_the_older_install_aside(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    old_password = (tmp_path / "assets" / "auth" / "kubeadmin-password").read_text()
    (tmp_path / "assets" / ".upi-wait.json").write_text('{"done": {"bootstrap_complete": 1.0}}')
    result = ignition(runner, inventory_path("dgxpod"), tmp_path, "--force")
    assert result.exit_code == 0, result.output
    [previous] = (tmp_path / "assets" / ".upi-previous").iterdir()
    assert (previous / "auth" / "kubeadmin-password").read_text() == old_password
    assert (previous / ".openshift_install_state.json").exists()
    assert not (tmp_path / "assets" / ".upi-wait.json").exists()
    assert (tmp_path / "assets" / "auth" / "kubeadmin-password").read_text() != old_password


@pytest.mark.parametrize("installed_by", ["upi wait", "openshift-install"])
def test_an_installed_clusters_assets_point_to_upi_nodes_add(runner, tmp_path: Path,
                                                            installed_by: str) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    assets = tmp_path / "assets"
    if installed_by == "upi wait":
        (assets / ".upi-wait.json").write_text('{"done": {"install_complete": 1200.0}}')
    else:
        with (assets / ".openshift_install.log").open("a") as log:
            log.write('time="2026-11-25T10:00:00Z" level=info msg="Install complete!"\n')
    before = sorted(p.name for p in assets.iterdir())
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 2
    assert "its cluster is installed (Install complete!)" in result.stderr
    assert "to add workers use `upi nodes add" in result.stderr
    assert sorted(p.name for p in assets.iterdir()) == before  # nothing moved aside
    forced = ignition(runner, inventory_path("dgxpod"), tmp_path, "--force")
    assert forced.exit_code == 0, forced.output
    assert "--force starts a NEW cluster" in forced.stderr


def test_refused_install_config_fails_with_exit_3_meaning(runner, tmp_path: Path) -> None:
    # An OpenShift 4.3 inventory (OpenShiftSDN) handed to a 4.16 installer: a real mistake.
    result = ignition(runner, inventory_path("legacy-4.3"), tmp_path)
    assert result.exit_code == 1
    assert "upi: error: openshift-install create manifests exited 3 (install-config error)\n" \
        "  ERROR failed to fetch Master Machines" in result.stderr
    assert "networkType OpenShiftSDN is not supported, please use OVNKubernetes" in result.stderr
    assert "upi: warning: openshift-install 4.16.3 is for OpenShift 4.16 but the inventory says " \
        "OpenShift 4.3" in result.stderr
    assert not (tmp_path / "out" / "http").exists()
    # The installer logged the refused install-config, pull secret and all: owner-only.
    assert mode(tmp_path / "assets" / ".openshift_install.log") == 0o600
    assert mode(tmp_path / "assets") == 0o700


def test_version_warning_names_the_version_not_the_path(runner, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The real `version` starts with argv[0]; a path holding another version must not confuse upi.
    bindir = tmp_path / "ocp-4.12.9" / "bin"
    bindir.mkdir(parents=True)
    binary = bindir / "openshift-install"
    binary.symlink_to(os.environ["UPI_OPENSHIFT_INSTALL"])
    monkeypatch.setenv("UPI_OPENSHIFT_INSTALL", str(binary))
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_VERSION", "4.17.2")
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 0, result.output
    assert "upi: warning: openshift-install 4.17.2 is for OpenShift 4.17 but the inventory says " \
        "OpenShift 4.16" in result.stderr
    assert str(bindir) not in result.stderr
    record = json.loads((tmp_path / "assets" / ".upi-ignition.json").read_text())
    assert record["openshift_install"] == "openshift-install 4.17.2"


@pytest.mark.parametrize(("name", "edit", "reason"), [
    ("legacy-4.3", {}, "networkType OpenShiftSDN is not supported"),
    ("dgxpod", {"fips": True}, "fips: Forbidden: target cluster is in FIPS mode"),
    ("compact", {"fips": True}, "use the FIPS-capable installer binary"),
], ids=["sdn-to-a-4.16-installer", "fips-on-a-non-fips-host", "fips-compact"])
def test_installer_log_and_state_stay_private_after_a_failed_step(
        runner, tmp_path: Path, example_dir: Path, name: str, edit: dict, reason: str) -> None:
    # Refusals upi cannot foresee (the installer's release, the host's FIPS mode).
    inv = example_dir / f"{name}.yaml"
    doc = yaml.safe_load(inv.read_text())
    doc["cluster"].update(edit)
    inv.write_text(yaml.safe_dump(doc))
    assets = tmp_path / "assets"
    result = runner.invoke(app, ["ignition", str(inv), "--dir", str(assets), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert reason in result.stderr
    log = assets / ".openshift_install.log"
    token = json.loads((example_dir / "pull-secret.json").read_text())["auths"]
    token = next(iter(token.values()))["auth"]
    assert token in log.read_text()  # the installer did log the secret: the mode is what protects it
    assert token not in result.output
    assert mode(log) == 0o600 and mode(assets) == 0o700


def test_a_loose_existing_assets_dir_is_warned_about(runner, tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    assets.mkdir(mode=0o755)
    assets.chmod(0o755)
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 0, result.output
    assert f"upi: warning: {assets} is mode 0755: the installer's manifests, log and auth/ hold " \
        "the pull secret" in result.stderr
    for name in (".openshift_install.log", ".openshift_install_state.json", "auth/kubeconfig"):
        assert mode(assets / name) == 0o600, name


def test_force_moves_aside_everything_the_installer_wrote(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    assets = tmp_path / "assets"
    before = {p.name for p in assets.iterdir()} - {".upi-previous"}
    assert {"000_capi-namespace.yaml", ".openshift_install.log", "bootstrap.ign"} <= before
    (assets / "bootstrap-in-place-for-live-iso.ign").write_text("{}")
    result = ignition(runner, inventory_path("dgxpod"), tmp_path, "--force")
    assert result.exit_code == 0, result.output
    [previous] = (assets / ".upi-previous").iterdir()
    assert before | {"bootstrap-in-place-for-live-iso.ign"} <= {p.name for p in previous.iterdir()}
    assert (previous / "000_capi-namespace.yaml").read_bytes() == b""
    assert mode(assets / ".upi-previous") == 0o700
    assert mode(previous / ".openshift_install.log") == 0o600
    assert not (assets / "bootstrap-in-place-for-live-iso.ign").exists()


def test_force_moves_aside_a_failed_runs_log_without_a_state_file(
        runner, tmp_path: Path, example_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A refused install-config leaves no state file, only the log that holds the pull secret.
    inv = example_dir / "dgxpod.yaml"
    inv.write_text(inv.read_text().replace("  ssh_key_file: id_rsa.pub\n",
                                           "  ssh_key_file: id_rsa.pub\n  fips: true\n"))
    monkeypatch.delenv("FAKE_OPENSHIFT_INSTALL_FIPS_HOST", raising=False)
    assert ignition(runner, inv, tmp_path).exit_code == 1
    assets = tmp_path / "assets"
    assert not (assets / ".openshift_install_state.json").exists()
    failed_log = (assets / ".openshift_install.log").read_text()
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_FIPS_HOST", "1")
    result = ignition(runner, inv, tmp_path, "--force")
    assert result.exit_code == 0, result.output
    [previous] = (assets / ".upi-previous").iterdir()
    assert (previous / ".openshift_install.log").read_text().startswith(failed_log)
    assert not (assets / ".openshift_install.log").read_text().startswith(failed_log)


def test_force_in_a_fresh_assets_dir_moves_nothing(runner, tmp_path: Path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path, "--force")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "assets" / ".upi-previous").exists()


def test_scheduler_manifest_keeps_the_keys_upi_does_not_own(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    spec = scheduler_in_bootstrap(tmp_path / "assets")["spec"]
    assert spec["profileCustomizations"] == {"dynamicResourceAllocation": ""}


@pytest.mark.parametrize(("name", "trusted"), [("compact", "user-ca-bundle"), ("dgxpod", "")])
def test_a_trust_bundle_without_a_proxy_is_trusted_cluster_wide(runner, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                name: str, trusted: str) -> None:
    # compact has a mirror CA and no proxy: the policy Always makes the Proxy object carry it.
    monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_VERSION", "4.18.1")
    assert ignition(runner, inventory_path(name), tmp_path).exit_code == 0
    doc = json.loads((tmp_path / "assets" / "bootstrap.ign").read_text())
    entry = next(f for f in doc["storage"]["files"]
                 if f["path"].endswith("/manifests/cluster-proxy-01-config.yaml"))
    proxy = yaml.safe_load(base64.b64decode(entry["contents"]["source"].split(",", 1)[1]))
    assert proxy["spec"]["trustedCA"] == {"name": trusted}


def test_pull_secret_is_never_echoed(tmp_path: Path, example_dir: Path) -> None:
    # No "auth" for quay.io: the installer refuses it and echoes the whole value, as the real
    # one does. `upi validate` refuses it first, so the installer is run here directly.
    token = "c2VjcmV0LXRva2VuLW5ldmVyLXByaW50ZWQ="
    secret = json.dumps({"auths": {"quay.io": {"email": "admin@example.com", "token": token}}})
    assets = tmp_path / "assets"
    assets.mkdir()
    config = yaml.safe_load((GOLDEN / "dgxpod" / "install-config.yaml").read_text())
    config["pullSecret"] = secret
    (assets / "install-config.yaml").write_text(yaml.safe_dump(config))
    installer = Installer(Path(os.environ["UPI_OPENSHIFT_INSTALL"]), assets, pull_secret_fragments(secret))
    seen: list[str] = []
    with pytest.raises(InstallerFailed) as info:
        installer.run("create", "manifests", on_line=seen.append)
    assert token in (assets / ".openshift_install.log").read_text()  # the fake did print it
    assert not any(token in line for line in seen) and token not in str(info.value)
    assert "pullSecret: Invalid value: \"<redacted>\": \"quay.io\" requires either auth or " \
        "credsStore" in str(info.value)


def test_absent_installer_says_where_it_looked(runner, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UPI_OPENSHIFT_INSTALL")
    monkeypatch.setenv("PATH", str(tmp_path))
    result = ignition(runner, inventory_path("dgxpod"), tmp_path)
    assert result.exit_code == 2
    assert "openshift-install not found: --openshift-install was not given, " \
        "UPI_OPENSHIFT_INSTALL is not set, and no openshift-install is on PATH" in result.stderr
    assert "https://mirror.openshift.com/pub/openshift-v4/clients/ocp/stable-4.16/" in result.stderr
    assert not (tmp_path / "assets").exists()


def test_explicit_installer_path_must_exist(runner, tmp_path: Path) -> None:
    result = ignition(runner, inventory_path("dgxpod"), tmp_path,
                      "--openshift-install", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert f"--openshift-install: {tmp_path / 'nope'} does not exist" in result.stderr


def test_assets_and_render_dir_must_differ(runner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["ignition", str(inventory_path("dgxpod")), "--dir", str(tmp_path),
                                 "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert "give it one of its own" in result.stderr


def test_render_leaves_staged_ignition_alone(runner, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)]).exit_code == 0
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    result = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert all((out / "http" / "ignition" / n).exists() for n in (*IGNITION_FILES, "upi-ignition.json"))


def test_freshness_from_the_record(runner, tmp_path: Path) -> None:
    assert ignition(runner, inventory_path("dgxpod"), tmp_path).exit_code == 0
    out, assets = tmp_path / "out", tmp_path / "assets"
    made = made_at(out)
    assert made == made_at(assets) == made_at(out / "http" / "ignition")
    assert ignition_status(out, made + timedelta(hours=1)).level == "ok"
    warn = ignition_status(out, made + timedelta(hours=13))
    assert warn.level == "warn" and "expire in 11.0 h" in warn.message
    assert ignition_status(assets, made + timedelta(hours=25)).level == "expired"


def test_freshness_without_a_record_uses_the_file_time(tmp_path: Path) -> None:
    stage = tmp_path / "http" / "ignition"
    stage.mkdir(parents=True)
    ign = stage / "bootstrap.ign"
    ign.write_text('{"ignition": {"version": "3.2.0"}}')
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    os.utime(ign, (when.timestamp(), when.timestamp()))
    assert made_at(tmp_path) == when
    assert ignition_status(stage, when + timedelta(hours=30)).level == "expired"
    shutil.rmtree(stage)
    with pytest.raises(Exception, match="no ignition files"):
        made_at(tmp_path)


def test_without_a_render_dir_the_files_go_straight_to_the_http_root(runner, tmp_path: Path,
                                                                       example_dir: Path) -> None:
    inv = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inv.read_text())
    www = tmp_path / "www"
    doc["provisioner"].update(http_root=str(www), ssh={"local": True})
    inv.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["ignition", str(inv), "--dir", str(tmp_path / "assets")])
    assert result.exit_code == 0, result.output
    assert "published to the provisioner's HTTP root" in result.output
    for name in IGNITION_FILES:
        served = www / "ignition" / name
        assert mode(served) == 0o644
        assert served.read_bytes() == (tmp_path / "assets" / name).read_bytes()
        assert json.loads(served.read_text())["ignition"]["version"]
    assert ignition_status(www / "ignition").level == "ok"
    again = runner.invoke(app, ["ignition", str(inv), "--dir", str(tmp_path / "assets"), "--force"])
    assert again.exit_code == 0, again.output
    # Into a pipe (CliRunner) the table is plain text: host, destination, status columns.
    assert any(line.split()[0] == "local" and line.split()[-1] == "changed"
               for line in again.output.splitlines() if line.strip())


@pytest.mark.parametrize("host_fips", ["0", "1"])
def test_fips_on_a_host_not_in_fips_mode_is_warned_before_the_installer_refuses(
        runner, tmp_path: Path, example_dir: Path, monkeypatch: pytest.MonkeyPatch, host_fips: str) -> None:
    # The kernel's switch is a file upi reads; the fake takes its host's mode from the environment.
    switch = tmp_path / "fips_enabled"
    switch.write_text(f"{host_fips}\n")
    monkeypatch.setattr("upi.ignition.FIPS_SWITCH", switch)
    if host_fips == "1":
        monkeypatch.setenv("FAKE_OPENSHIFT_INSTALL_FIPS_HOST", "1")
    inv = example_dir / "dgxpod.yaml"
    inv.write_text(inv.read_text().replace("  ssh_key_file: id_rsa.pub\n",
                                           "  ssh_key_file: id_rsa.pub\n  fips: true\n"))
    result = ignition(runner, inv, tmp_path)
    warning = f"upi: warning: cluster.fips is true but this host is not in FIPS mode ({switch} is not 1)"
    if host_fips == "0":
        assert result.exit_code == 1, result.output
        assert warning in " ".join(result.stderr.split())
        assert result.stderr.index("upi: warning: cluster.fips") < result.stderr.index("fips: Forbidden")
    else:
        assert result.exit_code == 0, result.output
        assert "cluster.fips is true but" not in result.stderr
