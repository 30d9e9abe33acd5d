"""Every command of the rendered vms/virt-install.sh is accepted by the real virt-install."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from bootvms_support import node_uri
from conftest import EXAMPLES, inventory_path, require

from upi.inventory import load_inventory
from upi.render import render_inventory
from upi.runner import run

TEST_POOL_GIB = 100  # the test driver's pool is a fixed 100 GiB (reference/test-harness.md)


def script_commands(name: str) -> list[list[str]]:
    inv = load_inventory(inventory_path(name), check_files=False)
    script = next(f for f in render_inventory(inv) if f.path == "vms/virt-install.sh")
    joined = script.content.decode().replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.startswith("virt-install ")]


@pytest.mark.parametrize("name", EXAMPLES)
def test_virt_install_accepts_every_rendered_command(tmp_path: Path, name: str) -> None:
    virt_install = require("virt-install")
    uri = node_uri(tmp_path)
    commands = script_commands(name)
    assert commands, "the example has VM nodes"
    for argv in commands:
        argv[argv.index("--connect") + 1] = uri
        size = int(next(a for a in argv if a.startswith("path=")).split("size=")[1].split(",")[0])
        # A disk bigger than the test pool is a property of this fake host, not of the line.
        extra = ["--check", "disk_size=off"] if size > TEST_POOL_GIB else []
        result = run([virt_install, *argv[1:], *extra, "--dry-run"], timeout=60,
                     env={"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                          "HOME": str(tmp_path)})
        assert "Dry run completed successfully" in result.stdout + result.stderr, argv
