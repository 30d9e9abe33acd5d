"""`upi wait`'s VM shepherd never asks on the terminal: an unknown ssh host key fails, and says so.

libvirt's qemu+ssh runs the ssh client, which asks about an unknown host key
(and for a password) on the controlling terminal. Under `upi wait` the
shepherd runs in a thread beneath the live display, with nobody to answer:
a prompt there hung it and garbled the screen. Here `upi wait` runs on a pty
of its own against a real sshd whose host key the user's known_hosts lacks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bootvms_support import require_libvirt
from conftest import require
from fake_apiserver import FakeApiServer
from status_support import spawn
from wait_support import make_assets, script, wait_args

pytestmark = pytest.mark.usefixtures("fake_openshift_install")


def test_the_shepherd_fails_on_an_unknown_host_key_without_asking(
        runner, tmp_path: Path, example_dir: Path, sshd, kube: FakeApiServer, monkeypatch) -> None:
    require_libvirt()
    require("ssh")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # an empty ~/.ssh: the host key is unknown
    (tmp_path / "home").mkdir()
    inv = example_dir / "dgxpod.yaml"
    uri = f"qemu+ssh://nobody@127.0.0.1:{sshd.port}/system"
    inv.write_text(inv.read_text().replace("uri: qemu:///system", f"uri: {uri}"))
    assets = make_assets(runner, inv, tmp_path)
    script(monkeypatch, tmp_path, bootstrap_complete=["slow"], install_complete=["ok"])
    upi = spawn(wait_args(inv, assets, kube, "--keep-bootstrap", "--no-metal", "--no-approve",
                          "--status-every", "0"), tty=True, env={"KUBECONFIG": ""})
    try:
        upi.until(lambda: "Host key verification failed" in upi.text()
                  or "continue connecting" in upi.text(), "the shepherd's first connection")
    finally:
        (tmp_path / "release").touch()  # the FAKE installer's bootstrap-complete ends
    assert upi.finish() == 0, upi.text()
    assert "continue connecting" not in upi.text() and "'s password" not in upi.text()
    assert "Host key verification failed" in upi.text()
