"""`upi approve-csr` end to end against the fake API server (tests/fake_apiserver.py)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import yaml
from conftest import inventory_path, require
from csr_cases import client, hostile, legitimate, serving
from fake_apiserver import FakeApiServer

from upi.cli import app
from upi.commands.approve_csr import approve_csr
from upi.runner import run

INVENTORY = str(inventory_path("dgxpod"))


@pytest.fixture
def fake(tmp_path):
    server = FakeApiServer(tmp_path / "assets").start()
    yield server
    server.stop()


def add(fake, spec):
    fake.add_csr(spec.name, spec.pem, **spec.kwargs())


def approve(runner, fake, *args):
    return runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(fake.kubeconfig), *args])


def wait_for(predicate, what, limit=20.0):
    """Poll a condition; the limit only guards against a hang (latency is bench/csr.py's job)."""
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_once_approves_every_legitimate_csr_client_first_and_no_hostile_one(runner, fake):
    fake.add_node("worker-1")
    good = [s for s in legitimate() if s.name != "client-worker-1"]
    for spec in [*reversed(good), *hostile().values()]:  # serving ones first, to prove the order
        add(fake, spec)
    result = approve(runner, fake, "--once")
    assert result.exit_code == 0, result.output
    assert fake.approved() == {s.name for s in good}
    order = fake.approval_order
    assert all(n.startswith("client-") for n in order[:4]) and all(
        n.startswith("serving-") for n in order[4:])
    assert len(hostile()) >= 15
    assert result.output.count("skipped ") == len(hostile())


def test_dry_run_logs_json_and_approves_nothing(runner, fake):
    add(fake, client("master-0"))
    add(fake, hostile()["prefix-evil"])
    result = approve(runner, fake, "--once", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["csr"], r["action"], r["node"]) for r in records] == [
        ("client-master-0", "would-approve", "master-0"), ("prefix-evil", "skipped", "master-0.evil")]
    assert records[1]["reason"] == "node 'master-0.evil' is not in the inventory"
    assert fake.approved() == set() and fake.approval_puts == 0
    assert "BEGIN" not in result.output and "client-key" not in result.output


def test_a_stale_resource_version_is_retried_with_a_fresh_read(runner, fake):
    add(fake, client("master-0"))
    fake.conflicts_to_inject = 2
    result = approve(runner, fake, "--once")
    assert result.exit_code == 0, result.output
    assert fake.approved() == {"client-master-0"}
    assert fake.approval_puts == 3


def test_kubeconfig_comes_from_the_installer_dir_or_kubeconfig_env(runner, fake, monkeypatch):
    add(fake, client("master-0"))
    assets = fake.kubeconfig.parent.parent
    monkeypatch.delenv("KUBECONFIG", raising=False)
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--dir", str(assets), "--dry-run"])
    assert result.output == "would-approve client-master-0: client CSR of inventory node master-0\n"
    monkeypatch.setenv("KUBECONFIG", str(fake.kubeconfig))
    result = runner.invoke(app, ["approve-csr", INVENTORY])
    assert result.output == "approved client-master-0: client CSR of inventory node master-0\n"


def test_missing_kubeconfig_is_a_usage_error(runner, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = runner.invoke(app, ["approve-csr", INVENTORY])
    assert result.exit_code == 2
    assert "no kubeconfig: pass --kubeconfig" in result.output


def test_insecure_kubeconfig_is_refused(runner, fake, tmp_path):
    doc = yaml.safe_load(fake.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    bad = tmp_path / "insecure"
    bad.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(bad)])
    assert result.exit_code == 2
    assert "insecure-skip-tls-verify is set" in result.output


def test_a_server_with_an_unknown_ca_is_not_trusted(runner, fake, tmp_path):
    other = FakeApiServer(tmp_path / "other")  # never started: only its CA is borrowed
    doc = yaml.safe_load(fake.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = yaml.safe_load(
        other.kubeconfig.read_text())["clusters"][0]["cluster"]["certificate-authority-data"]
    bad = tmp_path / "wrong-ca"
    bad.write_text(yaml.safe_dump(doc))
    add(fake, client("master-0"))
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(bad), "--once"])
    assert result.exit_code == 1
    assert "cannot reach the API at https://127.0.0.1:" in result.output
    assert "CERTIFICATE_VERIFY_FAILED" in result.output
    assert fake.approved() == set()


def test_watch_approves_as_csrs_arrive_and_survives_a_dropped_stream(fake):
    fake.add_node("worker-1")
    add(fake, client("master-0"))  # pending before the watch starts: the first list takes it
    stop = threading.Event()
    records = []
    thread = threading.Thread(target=approve_csr, args=(inventory_path("dgxpod"),), kwargs=dict(
        kubeconfig=fake.kubeconfig, assets=None, mode="watch", dry_run=False, log=records.append,
        stop=stop), daemon=True)
    thread.start()
    wait_for(lambda: fake.approved() == {"client-master-0"}, "the pending CSR")
    add(fake, serving("master-0"))
    add(fake, hostile()["client-existing-node"])
    wait_for(lambda: "serving-master-0" in fake.approved(), "a CSR created during the watch")
    fake.drop_watches()
    wait_for(lambda: fake.watches_served >= 2, "the watch to reconnect")
    add(fake, client("worker-0", key="rsa"))
    wait_for(lambda: "client-worker-0" in fake.approved(), "a CSR after the reconnect")
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert fake.approved() == {"client-master-0", "serving-master-0", "client-worker-0"}
    skipped = [r for r in records if r.action == "skipped"]
    # A reconnect may list again and skip it again, with its reason each time; never approve it.
    assert {r.csr for r in skipped} == {"client-existing-node"}


def test_manifests_need_an_image_holding_upi(runner):
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--manifests"])
    assert result.exit_code == 2
    assert "--manifests needs --image" in result.output
    assert "kind:" not in result.output


def test_manifests_grant_exactly_the_approval_verbs_and_run_watch(runner):
    image = "registry.example.com/infra/upi:0.1.0"
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--manifests", "--image", image])
    assert result.exit_code == 0, result.output
    docs = {d["kind"]: d for d in yaml.safe_load_all(result.output)}
    assert list(docs) == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                          "Deployment"]
    rules = {(r["apiGroups"][0], r["resources"][0]): (r["verbs"], r.get("resourceNames"))
             for r in docs["ClusterRole"]["rules"]}
    assert rules == {
        ("certificates.k8s.io", "certificatesigningrequests"): (["get", "list", "watch"], None),
        ("certificates.k8s.io", "certificatesigningrequests/approval"): (["update"], None),
        ("certificates.k8s.io", "signers"): (["approve"], ["kubernetes.io/kube-apiserver-client-kubelet",
                                                          "kubernetes.io/kubelet-serving"]),
        ("", "nodes"): (["list"], None),
    }
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["upi", "approve-csr", "/etc/upi/inventory.yaml", "--watch",
                                               "--json"]
    assert pod["containers"][0]["image"] == image
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    assert docs["ConfigMap"]["data"]["inventory.yaml"] == inventory_path("dgxpod").read_text()


def test_once_and_watch_exclude_each_other(runner):
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--once", "--watch"])
    assert result.exit_code == 2
    assert "--once and --watch exclude each other" in result.output


def test_the_fake_is_faithful_to_real_kubectl(fake):
    kubectl = require("kubectl")
    add(fake, client("master-0"))
    base = [kubectl, "--kubeconfig", str(fake.kubeconfig)]
    listing = run([*base, "get", "csr"], timeout=30).stdout
    assert listing.splitlines()[1].split()[0] == "client-master-0"
    assert listing.splitlines()[1].split()[-1] == "Pending"
    out = run([*base, "certificate", "approve", "client-master-0"], timeout=30).stdout
    assert out == "certificatesigningrequest.certificates.k8s.io/client-master-0 approved\n"
    assert fake.conditions("client-master-0") == ["Approved"]
    assert run([*base, "get", "csr"], timeout=30).stdout.splitlines()[1].split()[-1] == "Approved"
    doc = json.loads(run([*base, "get", "csr", "client-master-0", "-o", "json"], timeout=30).stdout)
    assert doc["status"]["conditions"][0]["reason"] == "KubectlApprove"


def test_upi_approval_reads_back_through_kubectl(runner, fake):
    kubectl = require("kubectl")
    add(fake, client("master-1"))
    assert approve(runner, fake, "--once").exit_code == 0
    doc = json.loads(run([kubectl, "--kubeconfig", str(fake.kubeconfig), "get", "csr", "client-master-1",
                          "-o", "json"], timeout=30).stdout)
    cond = doc["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Approved", "True", "UpiInventoryMatch")
