"""Which nodes boot their own ignition is a record of DIR (own-ignition.json), never the files present.

`upi nodes add` publishes the cluster's worker ignition as the new node's
own file and records the node in the same commit of DIR. A file deleted
by hand does not send the node back to day 1's expired worker.ign (render
keeps its URL; push refuses to go on without it and names the fix); a
file copied in by hand is neither published nor makes a day-1 Node look
like one `nodes add` joined. The cluster is the FAKE API server of
tests/test_nodes_add.py, the site a local push site (tests/pushkit.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from fake_apiserver import FakeApiServer
from redfish_support import AmiFake, Tls
from test_nodes_add import W2_GRUB, W2_IGN, add, day2_site, installed_cluster
from typer.testing import CliRunner

from upi.cli import app

OWN_URL = "coreos.inst.ignition_url=http://10.33.3.18:8080/ignition/nodes/worker-2.ign"
W1_GRUB = "tftp/grub.cfg-01-b8-ce-f6-10-33-46"


def test_a_deleted_own_ignition_file_keeps_the_nodes_url_and_push_names_the_fix(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami, bmc=False)
    installed_cluster(kube)
    assert add(runner, site, kube, "--timeout", "1s").exit_code == 1  # published; no Node joins here
    assert json.loads((site.out / "own-ignition.json").read_text())["nodes"].keys() == {"worker-2"}
    (site.out / "http/ignition/nodes/worker-2.ign").unlink()

    rendered = runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)])
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])

    assert rendered.exit_code == 0, rendered.output
    assert OWN_URL in (site.out / W2_GRUB.replace("var/lib/tftpboot", "tftp")).read_text()
    assert pushed.exit_code == 2, pushed.output
    assert "http/ignition/nodes/worker-2.ign is missing" in pushed.output
    assert "upi nodes add" in pushed.output
    assert (site.root / W2_IGN).is_file()  # nothing pushed: the served copy stays
    again = add(runner, site, kube, "--timeout", "1s")  # resumes: fetches and publishes it again
    assert "stage join" in again.stderr  # type: ignore[attr-defined]
    assert (site.out / "http/ignition/nodes/worker-2.ign").is_file()


def test_a_hand_copied_own_ignition_file_is_not_published_nor_a_reason_to_resume(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami, bmc=False)
    installed_cluster(kube)  # worker-1 is a day-1 Node
    copied = site.out / "http/ignition/nodes/worker-1.ign"
    copied.parent.mkdir(parents=True)
    copied.write_bytes(b'{"ignition":{"version":"3.2.0"}}\n')

    rendered = runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)])
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])
    res = runner.invoke(app, ["nodes", "add", str(site.inventory), "worker-1", "-o", str(site.out),
                              "--kubeconfig", str(kube.kubeconfig), "--no-gpu", "--timeout", "1s"])

    assert rendered.exit_code == 0 and pushed.exit_code == 0, pushed.output
    assert "ignition/nodes/" not in (site.out / W1_GRUB).read_text()
    assert not (site.root / "var/www/html/ignition/nodes/worker-1.ign").exists()
    assert res.exit_code == 1, res.output
    assert "worker-1: stage check: it is already a Node of the cluster" in res.stderr
