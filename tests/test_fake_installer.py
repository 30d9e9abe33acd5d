"""The FAKE openshift-install (tests/fakes) prints and exits as the real one does.

Each test pins one fact measured on the real installer
(../shared/reference/real-installer.md, "Output the fake must reproduce" and
"Offline commands that work"), so upi's tests cannot drift from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FAKE_OPENSHIFT_INSTALL


def fake(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
         argv0: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the fake as a user would, with this venv's python3 first on PATH (it needs PyYAML)."""
    environ = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    environ.pop("FAKE_OPENSHIFT_INSTALL_VERSION", None)
    environ.update(env or {})
    program = argv0 or str(FAKE_OPENSHIFT_INSTALL)
    return subprocess.run([program, *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=60, check=False)


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
