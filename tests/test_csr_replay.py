"""At most one approved client CSR per node until its Node registers (CSR replay), through the
CLI against the FAKE API server (tests/fake_apiserver.py): --once, across runs, --dry-run, --watch,
`upi wait`'s background approver, and releasing a held CSR by name.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import pytest
from conftest import inventory_path
from csr_cases import client, serving
from fake_apiserver import FakeApiServer
from test_approve_csr import add, approve, wait_for
from wait_support import make_assets, script, wait_args

from upi.cli import app
from upi.commands.approve_csr import approve_csr

INVENTORY = inventory_path("dgxpod")


@pytest.fixture
def fake(tmp_path):
    server = FakeApiServer(tmp_path / "kube").start()
    yield server
    server.stop()


def records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("names", [
    ("worker-0", "worker-0", "worker-0"),
    ("worker-0", "worker-0.dgxpod.nvidia.com", "worker-0"),  # one node, either name it may use
    ("master-1.dgxpod.nvidia.com", "master-1", "master-1.dgxpod.nvidia.com", "master-1"),
], ids=["three-short", "short-and-fqdn", "four-mixed"])
def test_one_pass_approves_the_first_client_csr_of_a_node_and_holds_the_rest(runner, fake, names):
    specs = [client(n, f"client-{i}", key="rsa" if i % 2 else "ec") for i, n in enumerate(names)]
    for spec in specs:
        add(fake, spec)
    add(fake, client("master-0"))  # another node is not affected
    result = approve(runner, fake, "--once", "--json")
    assert result.exit_code == 0, result.output
    assert fake.approved() == {"client-0", "client-master-0"}
    held = [r for r in records(result) if r["action"] == "held"]
    assert [r["csr"] for r in held] == [s.name for s in specs[1:]]
    short = names[0].split(".")[0]
    for r in held:
        assert r["kind"] == "client"
        assert f"{short} already has an approved client CSR (client-0)" in r["reason"]
        assert "possible replay" in r["reason"] and f"--release {r['csr']}" in r["reason"]
    for name in held:
        assert fake.conditions(name["csr"]) == []  # held: neither approved nor denied


@pytest.mark.parametrize("earlier", ["upi", "other-approver", "fqdn-by-admin"])
def test_a_client_csr_approved_earlier_counts_in_a_later_run(runner, fake, earlier):
    first = client("worker-1.dgxpod.nvidia.com" if earlier == "fqdn-by-admin" else "worker-1", "first")
    add(fake, first)
    if earlier == "upi":
        assert approve(runner, fake, "--once").exit_code == 0
    else:
        fake.decide_directly("first")
    add(fake, client("worker-1", "second", key="rsa"))
    result = approve(runner, fake, "--once")
    assert result.exit_code == 0, result.output
    assert fake.approved() == {"first"}
    assert result.stdout.startswith("held second: worker-1 already has an approved client CSR (first)")
    again = approve(runner, fake, "--once")  # still held on every later pass, never denied
    assert again.stdout.startswith("held second:") and fake.conditions("second") == []


def test_a_denied_client_csr_does_not_count(runner, fake):
    add(fake, client("worker-0", "denied"))
    fake.decide_directly("denied", "Denied")
    add(fake, client("worker-0", "fresh"))
    assert approve(runner, fake, "--once").exit_code == 0
    assert fake.approved() == {"fresh"}


def test_once_the_node_registers_a_further_client_csr_is_skipped_not_held(runner, fake):
    add(fake, client("worker-0", "first"))
    assert approve(runner, fake, "--once").exit_code == 0
    fake.add_node("worker-0")
    add(fake, client("worker-0", "late"))
    result = approve(runner, fake, "--once")
    assert result.stdout.startswith("skipped late: Node 'worker-0' already exists")


def test_serving_csrs_are_not_held(runner, fake):
    add(fake, client("master-0"))
    add(fake, serving("master-0"))
    assert approve(runner, fake, "--once").exit_code == 0
    assert fake.approved() == {"client-master-0", "serving-master-0"}


def test_dry_run_shows_the_hold_without_approving(runner, fake):
    for name in ("a", "b"):
        add(fake, client("worker-0", name))
    result = approve(runner, fake, "--once", "--dry-run", "--json")
    assert [(r["csr"], r["action"]) for r in records(result)] == [("a", "would-approve"), ("b", "held")]
    assert fake.approved() == set() and fake.approval_puts == 0


def test_release_approves_exactly_the_named_held_csr(runner, fake):
    for name in ("a", "b", "c"):
        add(fake, client("worker-0", name))
    add(fake, client("master-2"))
    approve(runner, fake, "--once")
    assert fake.approved() == {"a", "client-master-2"}
    result = approve(runner, fake, "--release", "c")
    assert result.exit_code == 0, result.output
    assert result.stdout == "approved c: client CSR of inventory node worker-0\n"
    assert fake.approved() == {"a", "client-master-2", "c"}
    assert approve(runner, fake, "--once").stdout.startswith("held b: worker-0 already has")


@pytest.mark.parametrize("case", ["unknown-name", "hostile", "already-approved"])
def test_release_still_checks_every_other_rule(runner, fake, case):
    add(fake, client("worker-0", "a"))
    approve(runner, fake, "--once")
    target = {"unknown-name": "nope", "hostile": "evil", "already-approved": "a"}[case]
    if case == "hostile":
        add(fake, replace(client("worker-0", "evil"), groups=("system:authenticated",)))
    result = approve(runner, fake, "--release", target)
    assert result.exit_code == 1
    assert f"not released: {target}" in result.output
    assert fake.approved() == {"a"}


def test_release_is_refused_with_watch(runner, fake):
    result = approve(runner, fake, "--watch", "--release", "a")
    assert result.exit_code == 2
    assert "--release approves the named CSRs in one pass" in result.output


def test_watch_holds_a_second_client_csr_as_it_arrives(fake):
    add(fake, client("worker-0", "before"))
    log, stop = [], threading.Event()
    thread = threading.Thread(target=approve_csr, args=(INVENTORY,), kwargs=dict(
        kubeconfig=fake.kubeconfig, assets=None, mode="watch", dry_run=False, log=log.append,
        stop=stop), daemon=True)
    thread.start()
    try:
        wait_for(lambda: fake.approved() == {"before"}, "the first client CSR")
        add(fake, client("worker-0", "replay-1"))
        add(fake, client("worker-0.dgxpod.nvidia.com", "replay-2", key="rsa"))
        add(fake, client("master-0"))  # decided after the two above: the watch is in order
        wait_for(lambda: "client-master-0" in fake.approved(), "the sentinel")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert fake.approved() == {"before", "client-master-0"}
    assert [r.csr for r in log if r.action == "held"] == ["replay-1", "replay-2"]


@pytest.mark.usefixtures("fake_openshift_install")
def test_wait_background_approver_holds_a_replay_and_warns(runner, tmp_path, fake, monkeypatch):
    assets = make_assets(runner, INVENTORY, tmp_path)
    script(monkeypatch, tmp_path, install_complete=["slow"])

    def cluster() -> None:
        try:
            add(fake, client("worker-0", "join"))
            wait_for(lambda: "join" in fake.approved(), "the first client CSR", 60)
            add(fake, client("worker-0", "replay"))
            add(fake, client("master-0"))
            wait_for(lambda: "client-master-0" in fake.approved(), "the sentinel", 60)
        finally:
            (tmp_path / "release").touch()

    thread = threading.Thread(target=cluster, daemon=True)
    thread.start()
    result = runner.invoke(app, wait_args(INVENTORY, assets, fake, "--keep-bootstrap", "--no-vms"))
    thread.join(60)
    assert result.exit_code == 0, result.output
    assert fake.approved() == {"join", "client-master-0"}
    assert "  csr: held replay: worker-0 already has an approved client CSR (join)" in result.stdout
    assert fake.conditions("replay") == []
