"""The FAKE openshift-install (tests/fakes) prints and exits as the real one does.

Each test pins one fact measured on the real installer
(../shared/reference/real-installer.md, "Output the fake must reproduce" and
"Offline commands that work"), so upi's tests cannot drift from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FAKE_OPENSHIFT_INSTALL

GOLDEN = Path(__file__).resolve().parent / "golden"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def fake(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         argv0: str | None = None, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run the fake as a user would, with this venv's python3 first on PATH (it needs PyYAML)."""
    environ = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    environ.pop("FAKE_OPENSHIFT_INSTALL_VERSION", None)
    environ.update(env or {})
    program = argv0 or str(FAKE_OPENSHIFT_INSTALL)
    return subprocess.run([program, *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=60, check=False, stdin=stdin)


def stream(**env: str) -> dict:
    result = fake("coreos", "print-stream-json", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc: dict = json.loads(result.stdout)
    return doc


def test_print_stream_json_has_the_pxe_artifacts_where_the_real_one_puts_them() -> None:
    doc = stream(FAKE_OPENSHIFT_INSTALL_RHCOS="9.6.20250402-0")
    metal = doc["architectures"]["x86_64"]["artifacts"]["metal"]
    assert metal["release"] == "9.6.20250402-0"
    pxe = metal["formats"]["pxe"]
    assert sorted(pxe) == ["initramfs", "kernel", "rootfs"]
    names = {part: artifact["location"].rsplit("/", 1)[1] for part, artifact in pxe.items()}
    assert names == {"kernel": "rhcos-9.6.20250402-0-live-kernel.x86_64",
                     "initramfs": "rhcos-9.6.20250402-0-live-initramfs.x86_64.img",
                     "rootfs": "rhcos-9.6.20250402-0-live-rootfs.x86_64.img"}
    for artifact in pxe.values():
        assert artifact["location"].startswith("https://")
        assert len(artifact["sha256"]) == 64 and int(artifact["sha256"], 16) >= 0
    assert metal["formats"]["iso"]["disk"]["location"].endswith(".x86_64.iso")
    assert metal["formats"]["raw.gz"]["disk"]["location"].endswith(".x86_64.raw.gz")


def test_print_stream_json_follows_the_build_and_release_knobs() -> None:
    doc = stream(FAKE_OPENSHIFT_INSTALL_RHCOS="9.6.20250521-1", FAKE_OPENSHIFT_INSTALL_VERSION="4.19.2")
    assert doc["stream"] == "rhcos-4.19"
    metal = doc["architectures"]["x86_64"]["artifacts"]["metal"]
    assert metal["release"] == "9.6.20250521-1"
    assert "/9.6.20250521-1/x86_64/rhcos-9.6.20250521-1-live-kernel.x86_64" \
        in metal["formats"]["pxe"]["kernel"]["location"]


def test_print_stream_json_checksums_match_the_documented_artifact_bytes() -> None:
    # A test HTTP server serves `FAKE RHCOS ARTIFACT <file name>\n` for each artifact.
    pxe = stream()["architectures"]["x86_64"]["artifacts"]["metal"]["formats"]["pxe"]
    for artifact in pxe.values():
        name = artifact["location"].rsplit("/", 1)[1]
        assert artifact["sha256"] == hashlib.sha256(f"FAKE RHCOS ARTIFACT {name}\n".encode()).hexdigest()


# --- the shape of its output -------------------------------------------------------------

PREFIX = ('level=error msg=failed to fetch Master Machines: failed to load asset "Install Config": '
          'failed to create install config: invalid "install-config.yaml" file: ')
LINE = re.compile(r"^level=(info|warning|error|fatal) msg=(?!\")\S")


def golden_config(name: str = "dgxpod") -> dict:
    config: dict = yaml.safe_load((GOLDEN / name / "install-config.yaml").read_text())
    return config


def assets_with(tmp_path: Path, config: dict | str, name: str = "a") -> Path:
    assets = tmp_path / name
    assets.mkdir(exist_ok=True)
    text = config if isinstance(config, str) else yaml.safe_dump(config)
    (assets / "install-config.yaml").write_text(text)
    return assets


def manifests(tmp_path: Path, config: dict | str, **env: str) -> subprocess.CompletedProcess[str]:
    assets_with(tmp_path, config)
    return fake("--dir", "a", "create", "manifests", cwd=tmp_path, env=env)


def test_lines_have_no_time_and_no_quotes(tmp_path: Path) -> None:
    result = manifests(tmp_path, golden_config())
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines
    assert "level=info msg=Consuming Install Config from target directory" in lines
    # The log file keeps logrus' full form: time and a quoted message.
    logged = (tmp_path / "a" / ".openshift_install.log").read_text().splitlines()
    assert logged[0].startswith('time="') and ' level=info msg="Consuming Install Config' in logged[0]


def test_an_install_config_error_is_level_error_exit_3_with_the_real_prefix(tmp_path: Path) -> None:
    config = golden_config()
    config["metadata"]["name"] = "a" * 55
    result = manifests(tmp_path, config)
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == \
        PREFIX + f'metadata.name: Invalid value: "{"a" * 55}": must be no more than 54 characters'
    assert "level=fatal" not in result.stderr


def test_several_install_config_errors_are_one_bracketed_list(tmp_path: Path) -> None:
    config = golden_config()
    config["metadata"]["name"] = "a" * 60
    config["proxy"] = {"noProxy": ".example.com"}
    result = manifests(tmp_path, config)
    assert result.returncode == 3
    last = result.stderr.splitlines()[-1]
    assert last.startswith(PREFIX + "[metadata.name: Invalid value: ")
    assert last.endswith(", proxy: Required value: must include httpProxy or httpsProxy]")


def test_a_yaml_syntax_error_is_an_install_config_error_too(tmp_path: Path) -> None:
    result = manifests(tmp_path, "apiVersion: v1\nmetadata: [name: x\n")
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1].startswith(
        'level=error msg=failed to fetch Master Machines: failed to load asset "Install Config": '
        "failed to create install config: failed to unmarshal install-config.yaml: ")


def test_a_missing_install_config_without_a_terminal_is_fatal_exit_1(tmp_path: Path) -> None:
    result = fake("--dir", str(tmp_path / "empty"), "create", "manifests", stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("level=fatal msg=failed to fetch Master Machines: ")
    assert line.endswith('failed to generate asset "Platform": EOF')


def test_an_unknown_field_warns_about_the_first_one_only(tmp_path: Path) -> None:
    config = golden_config()
    config["fooBar"] = 1
    config["zapQux"] = 2
    result = manifests(tmp_path, config)
    assert result.returncode == 0, result.stderr
    assert "level=warning msg=failed to parse first occurrence of unknown field: failed to unmarshal " \
        "install-config.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field " \
        '"fooBar"\nlevel=info msg=Attempting to unmarshal while ignoring unknown keys because ' \
        "strict unmarshaling failed\n" in result.stderr
    assert "zapQux" not in result.stderr


@pytest.mark.parametrize("given", ["a", "./a", "ABS"])
def test_create_manifests_names_the_dir_as_given(tmp_path: Path, given: str) -> None:
    given = str(tmp_path / "a") if given == "ABS" else given
    assets_with(tmp_path, golden_config())
    result = fake("--dir", given, "create", "manifests", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1] == \
        f"level=info msg=Manifests created in: {given}, {given}/manifests and {given}/openshift"
    assert sum(ln.startswith("level=info msg=Successfully populated MCS CA cert information: ")
               for ln in lines) == 1
    again = fake("--dir", given, "create", "ignition-configs", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1] == \
        f"level=info msg=Ignition-Configs created in: {given} and {given}/auth"


def test_create_manifests_writes_14_and_7_files_and_an_empty_capi_namespace(tmp_path: Path) -> None:
    assert manifests(tmp_path, golden_config()).returncode == 0
    assets = tmp_path / "a"
    assert len(list((assets / "manifests").iterdir())) == 14
    assert len(list((assets / "openshift").iterdir())) == 7
    assert (assets / "000_capi-namespace.yaml").read_bytes() == b""
    assert mode(assets / "manifests") == mode(assets / "openshift") == 0o750
    assert {mode(p) for p in (assets / "manifests").iterdir()} == {0o640}
    assert mode(assets / ".openshift_install.log") == 0o644  # the hazard upi closes
    scheduler = yaml.safe_load((assets / "manifests" / "cluster-scheduler-02-config.yml").read_text())
    assert scheduler["spec"]["profileCustomizations"] == {"dynamicResourceAllocation": ""}


def test_ignition_configs_consume_five_assets_in_an_order_that_changes(tmp_path: Path) -> None:
    orders = set()
    for run in range(12):
        sub = tmp_path / str(run)
        sub.mkdir()
        assert manifests(sub, golden_config()).returncode == 0
        result = fake("--dir", "a", "create", "ignition-configs", cwd=sub)
        assert result.returncode == 0, result.stderr
        consumed = tuple(ln.removeprefix("level=info msg=Consuming ")
                         for ln in result.stderr.splitlines() if ln.startswith("level=info msg=Consuming"))
        assert sorted(consumed) == sorted(f"{what} from target directory" for what in (
            "Common Manifests", "Openshift Manifests", "Master Machines", "Worker Machines",
            "OpenShift Install (Manifests)"))
        orders.add(consumed)
        if len(orders) > 1:
            break
    assert len(orders) > 1


def test_a_message_with_a_newline_is_split_over_lines(tmp_path: Path) -> None:
    assert manifests(tmp_path, golden_config()).returncode == 0
    assert fake("--dir", "a", "create", "ignition-configs", cwd=tmp_path).returncode == 0
    result = fake("--dir", "a", "wait-for", "install-complete", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    kubeconfig = (tmp_path / "a").resolve() / "auth" / "kubeconfig"
    assert "level=info msg=To access the cluster as the system:admin user when using 'oc', run\n" \
        f"level=info msg=    export KUBECONFIG={kubeconfig}\n" in result.stderr


def test_version_starts_with_argv0_then_three_lines(tmp_path: Path) -> None:
    link = tmp_path / "bin" / "openshift-install"
    link.parent.mkdir()
    link.symlink_to(FAKE_OPENSHIFT_INSTALL)
    result = fake("version", cwd=tmp_path, argv0="bin/openshift-install",
                  env={"FAKE_OPENSHIFT_INSTALL_VERSION": "4.19.0"})
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "bin/openshift-install 4.19.0"
    assert [ln.split(" ", 2)[:2] for ln in lines[1:]] == [["built", "from"], ["release", "image"],
                                                         ["release", "architecture"]]
    assert not (tmp_path / ".openshift_install.log").exists()
