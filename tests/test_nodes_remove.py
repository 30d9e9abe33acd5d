"""`upi nodes remove`: cordon, drain through the Eviction API, delete the Node, power off, forget it.

The cluster is the FAKE API server (tests/fake_apiserver.py: pods, PodDisruptionBudgets, the eviction
subresource answering 429 while a budget blocks); the BMC is the DGX (AMI) fake.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from fake_apiserver import FakeApiServer
from pushkit import Site
from redfish_support import AmiFake, Tls, pushed_site_with_bmc
from test_nodes_add import installed_cluster
from typer.testing import CliRunner

from upi.cli import app


def cluster_with_work(runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
                      kube: FakeApiServer, *, allowed: int) -> Site:
    """worker-0 installed and running: a web pod under a PDB, a DaemonSet pod, a pod with emptyDir."""
    site: Site = pushed_site_with_bmc(runner, tmp_path, example_dir, tls, ami)
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out),
                               "--installed", "worker-0"]).exit_code == 0
    installed_cluster(kube)
    ami.state.power = "On"
    kube.add_pod("apps", "web-1", "worker-0", labels={"app": "web"}, owner="ReplicaSet")
    kube.add_pod("openshift-dns", "dns-default-x", "worker-0", owner="DaemonSet")
    kube.add_pod("ml", "cache-0", "worker-0", owner="StatefulSet", empty_dir=True)
    kube.add_pod("apps", "web-2", "worker-1", labels={"app": "web"}, owner="ReplicaSet")
    kube.add_pdb("apps", "web", {"app": "web"}, disruptions_allowed=allowed)
    return site


def remove(runner: CliRunner, site: Site, kube: FakeApiServer, *extra: str) -> object:
    return runner.invoke(app, ["nodes", "remove", str(site.inventory), "worker-0", "-o", str(site.out),
                               "--kubeconfig", str(kube.kubeconfig), "--poll", "0.1", *extra])


def test_remove_waits_out_a_pdb_then_deletes_powers_off_and_forgets_the_node(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=0)

    def budget_frees_up() -> None:  # another replica becomes ready: the PDB allows one disruption
        end = time.monotonic() + 30
        while not any(code == 429 for *_, code in kube.evictions) and time.monotonic() < end:
            time.sleep(0.02)
        kube.set_status("policy/v1", "PodDisruptionBudget", "web", "apps", {"disruptionsAllowed": 1})

    threading.Thread(target=budget_frees_up, daemon=True).start()
    res = remove(runner, site, kube, "--json", "--drain-timeout", "30s")

    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    doc = json.loads(res.stdout)[0]  # type: ignore[attr-defined]
    assert sorted(doc["evicted"]) == ["apps/web-1", "ml/cache-0"]
    assert doc["left"] == ["openshift-dns/dns-default-x"] and doc["empty_dir"] == ["ml/cache-0"]
    assert doc["node_deleted"] is True and doc["record_cleared"] is True and doc["power"] == "ForceOff"
    assert ("apps", "web-1", 429) in kube.evictions and ("apps", "web-1", 201) in kube.evictions
    assert ("openshift-dns", "dns-default-x") in kube.pods and ("apps", "web-2") in kube.pods
    assert "worker-0" not in kube.nodes and "worker-1" in kube.nodes
    assert ami.state.power == "Off" and ami.state.resets == ["ForceOff"]
    assert "worker-0" not in json.loads((site.out / "installed.json").read_text())["nodes"]
    assert "pod ml/cache-0 has emptyDir data (scratch): it is lost" in res.stderr  # type: ignore[attr-defined]

    again = remove(runner, site, kube, "--keep-power")
    assert again.exit_code == 0, again.output  # type: ignore[attr-defined]
    assert "worker-0: not a Node of the cluster (removed already)" in again.stderr  # type: ignore[attr-defined]


def test_a_drain_a_pdb_blocks_past_the_timeout_is_exit_1_naming_the_pod(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=0)
    res = remove(runner, site, kube, "--drain-timeout", "1s")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert "worker-0: stage drain: pod apps/web-1 could not be evicted within 1 s" in res.stderr  # type: ignore[attr-defined]
    assert kube.nodes["worker-0"]["spec"]["unschedulable"] is True  # cordoned, not deleted
    assert ami.state.resets == [] and ("apps", "web-1") in kube.pods
    assert "worker-0" in json.loads((site.out / "installed.json").read_text())["nodes"]


def test_dry_run_changes_nothing(runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls,
                                 ami: AmiFake, kube: FakeApiServer) -> None:
    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=1)
    res = remove(runner, site, kube, "--dry-run", "--json")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert sorted(json.loads(res.stdout)[0]["evicted"]) == ["apps/web-1", "ml/cache-0"]  # type: ignore[attr-defined]
    assert kube.evictions == [] and "unschedulable" not in kube.nodes["worker-0"]["spec"]
    assert ami.state.resets == [] and ami.state.power == "On"


def test_dry_run_of_an_rdma_dgx_in_a_tuned_pool_sends_no_write(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=1)
    text = site.inventory.read_text()
    for mac in ("b8:ce:f6:10:33:44", "b8:ce:f6:10:33:46"):
        assert text.count(f"  mac: {mac}\n") == 1
        text = text.replace(f"  mac: {mac}\n", f"  mac: {mac}\n  rdma: {{interfaces: [ibp24s0, ibp64s0], "
                            "node_interface: eno1}\n")
    pool = "gpu_pool: {name: gpu, taint: {key: example.com/dgx, effect: NoExecute}}\n"
    site.inventory.write_text(text + pool)
    assert runner.invoke(app, ["validate", str(site.inventory)]).exit_code == 0
    sent = len(kube.requests)
    res = remove(runner, site, kube, "--dry-run", "--json")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    doc = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert [d["name"] for d in doc] == ["worker-0"] and doc[0]["node_deleted"] is False
    assert [r for r in kube.requests[sent:] if r[0] in ("PATCH", "PUT", "POST", "DELETE")] == []
    assert ami.state.resets == [] and "worker-0" in kube.nodes


def test_a_master_is_refused(runner: CliRunner, example_dir: Path, kube: FakeApiServer) -> None:
    res = runner.invoke(app, ["nodes", "remove", str(example_dir / "dgxpod.yaml"), "master-0",
                              "--kubeconfig", str(kube.kubeconfig)])
    assert res.exit_code == 2 and "master-0 is a master" in res.stderr


def test_a_name_the_inventory_lacks_says_remove_comes_before_the_edit(
        runner: CliRunner, tmp_path: Path, example_dir: Path) -> None:
    inv = example_dir / "dgxpod.yaml"
    res = runner.invoke(app, ["nodes", "remove", str(inv), "worker-7", "worker-7", "--dry-run",
                              "--kubeconfig", str(tmp_path / "none")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines() == [
        f"upi: error: worker-7: not a node of {inv}; a node is removed while the inventory still names it, "
        "and taken out of nodes: after (docs/day2.md)"]


def test_after_remove_and_the_inventory_edit_render_and_push_drop_its_entries(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    import yaml

    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=1)
    assert remove(runner, site, kube).exit_code == 0  # type: ignore[attr-defined]
    doc = yaml.safe_load(site.inventory.read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != "worker-0"]
    site.inventory.write_text(yaml.safe_dump(doc))
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])
    assert pushed.exit_code == 0, pushed.output
    for conf in ("etc/dnsmasq.d/dhcp-pxe.conf", "etc/dnsmasq.d/dns.conf", "etc/haproxy/haproxy.cfg"):
        text = (site.root / conf).read_text()
        assert "10.33.3.44" not in text and "b8:ce:f6:10:33:44" not in text, conf
    assert "10.33.3.46" in (site.root / "etc/haproxy/haproxy.cfg").read_text()  # worker-1 still serves
    assert not (site.out / "tftp/grub.cfg-01-b8-ce-f6-10-33-44").exists()


def test_remove_forgets_the_nodes_own_ignition_and_the_next_push_unpublishes_it(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    from upi.ownignition import with_nodes
    from upi.render import RenderedFile
    from upi.renderdir import transaction

    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=1)
    with transaction(site.out) as txn:  # as `upi nodes add` published worker-0's and worker-1's own ignition
        txn.commit(None, own=with_nodes(txn.records.own, ["worker-0", "worker-1"]), published=[
            RenderedFile(f"http/ignition/nodes/{n}.ign", b'{"ignition":{"version":"3.2.0"}}\n', 0o600)
            for n in ("worker-0", "worker-1")])
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    assert runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    served = site.root / "var/www/html/ignition/nodes"
    assert sorted(p.name for p in served.iterdir()) == ["worker-0.ign", "worker-1.ign"]

    res = remove(runner, site, kube, "--json")

    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert json.loads(res.stdout)[0]["record_cleared"] is True  # type: ignore[attr-defined]
    assert "worker-0: forgotten in installed.json and own-ignition.json" in res.stderr  # type: ignore[attr-defined]
    assert json.loads((site.out / "own-ignition.json").read_text())["nodes"].keys() == {"worker-1"}
    # The next render + push (the inventory not yet edited) no longer publish worker-0's own file:
    # a re-added machine gets the ignition the cluster serves then (`upi nodes add`).
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])
    assert pushed.exit_code == 0, pushed.output
    assert sorted(p.name for p in served.iterdir()) == ["worker-1.ign"]
    assert "nodes/worker-0.ign" not in (site.out / "tftp/grub.cfg-01-b8-ce-f6-10-33-44").read_text()
    assert "nodes/worker-1.ign" in (site.out / "tftp/grub.cfg-01-b8-ce-f6-10-33-46").read_text()


def test_remove_of_a_node_only_in_the_own_ignition_record_clears_it(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    from upi.ownignition import with_nodes
    from upi.renderdir import transaction

    site = cluster_with_work(runner, tmp_path, example_dir, tls, ami, kube, allowed=1)
    with transaction(site.out) as txn:  # joined, but never flipped to local boot (not in installed.json)
        txn.commit(None, record={}, own=with_nodes(txn.records.own, ["worker-0"]))
    assert "worker-0" not in json.loads((site.out / "installed.json").read_text())["nodes"]
    res = remove(runner, site, kube, "--keep-power")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "worker-0: forgotten in own-ignition.json" in res.stderr  # type: ignore[attr-defined]
    assert json.loads((site.out / "own-ignition.json").read_text())["nodes"] == {}
