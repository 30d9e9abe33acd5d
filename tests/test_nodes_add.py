"""`upi nodes add`: a worker joins an installed cluster; only its files, its BMC and its CSRs are touched.

The cluster is the FAKE API server (tests/fake_apiserver.py) serving an installed
cluster; the BMC is the DGX (AMI) fake; the provisioner and load balancer are
a local push site (tests/pushkit.py) validated by the real dnsmasq and haproxy.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from csr_cases import client
from fake_apiserver import FakeApiServer
from fake_gpu import SimNode
from gpu_support import gpu_args, start_cluster
from pushkit import Site
from redfish_support import AmiFake, Tls, pushed_site_with_bmc, write_credentials
from typer.testing import CliRunner

from upi.cli import app

DOMAIN = "dgxpod.nvidia.com"
NEW = {"name": "worker-2", "role": "worker", "mac": "b8:ce:f6:10:33:48", "ip": "10.33.3.48",
       "install_disk": "/dev/nvme0n1", "gpu": True}
W2_GRUB = "var/lib/tftpboot/grub.cfg-01-b8-ce-f6-10-33-48"
W2_IGN = "var/www/html/ignition/nodes/worker-2.ign"
DAY1_NODES = ("master-0", "master-1", "master-2", "worker-0", "worker-1")


def pointer(ca_pem: bytes, source: str = f"https://api-int.{DOMAIN}:22623/config/worker") -> bytes:
    """A worker pointer ignition as the MCO keeps it in worker-user-data-managed."""
    ca = "data:text/plain;charset=utf-8;base64," + base64.b64encode(ca_pem).decode()
    tls = {"certificateAuthorities": [{"source": ca}]}
    return json.dumps({"ignition": {"version": "3.2.0", "config": {"merge": [{"source": source}]},
                                    "security": {"tls": tls}}}).encode()


def installed_cluster(kube: FakeApiServer) -> None:
    """Day 1 done: ClusterVersion Available, the worker ignition secret, every day-1 node Ready."""
    kube.set_cluster_version(available=True)
    kube.add_secret("openshift-machine-api", "worker-user-data-managed", {"userData": pointer(kube.ca_pem)})
    for name in DAY1_NODES:
        kube.add_node(name, ready=True)


def day2_site(runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
              bmc: bool = True) -> Site:
    """The day-1 site, pushed; then worker-2 written into the inventory, with the DGX fake as its BMC.

    (worker-0 hands its BMC section over: one BMC is one machine.)
    """
    site: Site = pushed_site_with_bmc(runner, tmp_path, example_dir, tls, ami)
    write_new_worker(site, bmc=bmc)
    return site


def write_new_worker(site: Site, *, bmc: bool = True, **extra: object) -> None:
    """worker-2 (and `extra` keys) written into the site's inventory, taking worker-0's BMC if asked."""
    doc = yaml.safe_load(site.inventory.read_text())
    worker0 = next(n for n in doc["nodes"] if n["name"] == "worker-0")
    node = {**NEW, **extra}
    if bmc:
        node["bmc"] = worker0.pop("bmc")
    doc["nodes"].append(node)
    site.inventory.write_text(yaml.safe_dump(doc))


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` but push's backups (.NAME.upi-backup) of the files it replaced."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".upi-backup")}


def kubelet_joins(kube: FakeApiServer, ami: AmiFake, name: str = "worker-2", *,
                  ready: bool = True, register: Callable[[], None] | None = None) -> threading.Thread:
    """The DGX: once powered on it installs, its kubelet asks for a client certificate, then registers.

    Another machine's CSR (intruder-9) arrives at the same time: it must stay pending.
    `register` registers the Node (default: a bare Node, Ready as `ready` says).
    """
    def run() -> None:
        end = time.monotonic() + 60
        while ami.state.power != "On" and time.monotonic() < end:
            time.sleep(0.05)
        spec, other = client(name), client("intruder-9")
        kube.add_csr(spec.name, spec.pem, **spec.kwargs())  # type: ignore[arg-type]
        kube.add_csr(other.name, other.pem, **other.kwargs())  # type: ignore[arg-type]
        while spec.name not in kube.approved() and time.monotonic() < end:
            time.sleep(0.05)
        if register is None:
            kube.add_node(name, ready=ready)
        else:
            register()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def add(runner: CliRunner, site: Site, kube: FakeApiServer, *extra: str, gpu: bool = False) -> object:
    """`upi nodes add` worker-2; the GPU step (tests/test_nodes_gpu.py) only when asked for."""
    return runner.invoke(app, ["nodes", "add", str(site.inventory), "worker-2", "-o", str(site.out),
                               "--kubeconfig", str(kube.kubeconfig), "--poll", "0.2", *extra,
                               *(() if gpu else ("--no-gpu",))])


def test_a_new_dgx_joins_and_only_its_files_and_csrs_change(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    before = snapshot(site.root)
    kubelet_joins(kube, ami)

    res = add(runner, site, kube, "--json", "--timeout", "60s")

    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    doc = json.loads(res.stdout)  # type: ignore[attr-defined]
    assert doc["ok"] is True and doc["nodes"][0]["stage"] == "done" and doc["nodes"][0]["ready"] is True
    assert doc["left_pending"] == ["client-intruder-9"]
    assert kube.approved() == {"client-worker-2"} and kube.conditions("client-intruder-9") == []
    assert ami.state.resets  # the one-time network boot and power on went to its BMC
    after = snapshot(site.root)
    changed = sorted(k for k in after if before.get(k) != after[k])
    # ... and the ledger of the files upi placed in each provisioner root they are in (upi.push.owned)
    ledgers = [f"{root}/.upi-owned.{DOMAIN}.json" for root in
               ("etc/dnsmasq.d", "var/lib/tftpboot", "var/www/html")]
    assert changed == sorted([
        "etc/dnsmasq.d/dhcp-pxe.conf", "etc/dnsmasq.d/dns.conf", "etc/haproxy/haproxy.cfg",
        W2_GRUB, W2_IGN, *ledgers]), changed
    assert set(before) <= set(after)  # nothing removed
    assert after[W2_IGN] == pointer(kube.ca_pem)
    assert after[W2_GRUB].rstrip().endswith(b"exit")  # flipped to local boot as its Node registered
    assert "worker-2" in json.loads((site.out / "installed.json").read_text())["nodes"]
    assert "10.33.3.48" in after["etc/dnsmasq.d/dhcp-pxe.conf"].decode()
    assert "(changed)" in res.stderr or "(new)" in res.stderr  # type: ignore[attr-defined]
    # the day-1 ignition files are untouched (the fetched config has its own name)
    assert not (site.out / "http/ignition/worker.ign").exists() or \
        (site.out / "http/ignition/worker.ign").read_bytes() != after[W2_IGN]

    resets = len(ami.state.resets)
    sent = len(kube.requests)
    again = add(runner, site, kube, "--json", "--timeout", "10s")
    assert again.exit_code == 0, again.output  # type: ignore[attr-defined]
    assert json.loads(again.stdout)["changed"] == []  # type: ignore[attr-defined]
    # Counted on the wire: the second run reads, and writes nothing to the cluster.
    assert [r for r in kube.requests[sent:] if r[0] in ("PATCH", "PUT", "POST", "DELETE")] == []
    assert snapshot(site.root) == after and len(ami.state.resets) == resets


def test_the_pxe_file_names_the_nodes_own_ignition_and_a_node_never_ready_is_exit_1(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami, bmc=False)
    installed_cluster(kube)
    res = add(runner, site, kube, "--timeout", "1s")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert "worker-2: stage join: no Node registered within 1 s" in res.stderr  # type: ignore[attr-defined]
    assert "worker-2: no BMC driven" in res.stderr  # type: ignore[attr-defined]
    served = (site.root / W2_GRUB).read_text()
    assert "coreos.inst.ignition_url=http://10.33.3.18:8080/ignition/nodes/worker-2.ign" in served
    # day-1 workers still boot the role's file
    w0 = (site.root / "var/lib/tftpboot/grub.cfg-01-b8-ce-f6-10-33-44").read_text()
    assert "ignition/nodes/" not in w0


def test_a_node_registered_but_never_ready_names_stage_ready(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    kubelet_joins(kube, ami, ready=False)
    res = add(runner, site, kube, "--timeout", "8s")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert "worker-2: stage ready: its Node is not Ready within 8 s" in res.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(("setup", "message"), [
    ("not-installed", "the cluster is not installed yet (ClusterVersion Available is not True"),
    ("no-secret", "worker-2: stage ignition: secret openshift-machine-api/worker-user-data-managed "
                  "does not exist"),
    ("not-pointer", "worker-2: stage ignition: secret openshift-machine-api/worker-user-data-managed: "
                    "the config points at https://evil.example:22623/config/worker, not at the machine "
                    "config server https://api-int.dgxpod.nvidia.com:22623/config/worker"),
    ("bad-ca", "the root CA does not parse as a PEM certificate"),
    ("already-node", "worker-2: stage check: it is already a Node of the cluster"),
])
def test_a_cluster_not_ready_for_the_node_is_exit_1_with_nothing_written_or_booted(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake, kube: FakeApiServer,
        setup: str, message: str) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    if setup == "not-installed":
        kube.set_cluster_version(available=False)
    elif setup == "no-secret":
        kube.delete("v1", "Secret", "worker-user-data-managed", "openshift-machine-api")
    elif setup == "not-pointer":
        kube.add_secret("openshift-machine-api", "worker-user-data-managed",
                        {"userData": pointer(kube.ca_pem, "https://evil.example:22623/config/worker")})
    elif setup == "bad-ca":
        kube.add_secret("openshift-machine-api", "worker-user-data-managed",
                        {"userData": pointer(b"-----BEGIN CERTIFICATE-----\nnope\n"
                                             b"-----END CERTIFICATE-----\n")})
    else:
        kube.add_node("worker-2", ready=True)
    before, out_before = snapshot(site.root), snapshot(site.out)
    res = add(runner, site, kube, "--timeout", "5s")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert message in res.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in res.output  # type: ignore[attr-defined]
    assert snapshot(site.root) == before and snapshot(site.out) == out_before
    assert ami.state.resets == []


def test_a_master_is_refused_naming_the_control_plane_procedure(
        runner: CliRunner, tmp_path: Path, example_dir: Path, kube: FakeApiServer) -> None:
    res = runner.invoke(app, ["nodes", "add", str(example_dir / "dgxpod.yaml"), "master-1", "-o",
                              str(tmp_path / "out"), "--kubeconfig", str(kube.kubeconfig)])
    assert res.exit_code == 2
    assert "master-1 is a master" in res.stderr and "Replacing an unhealthy etcd member" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("names", "shown"), [
    (["worker-9"], "worker-9"),
    (["worker-0", "ghost", "ghost"], "ghost"),  # named once, though given twice
    ([""], "''"),
    (["a\nb"], "'a\\nb'"),  # one paragraph: the newline is shown, not printed
    (["w\u00f6rker"], "'w\u00f6rker'"),
    (["x" * 300], "'" + "x" * 60 + "...'"),
])
def test_a_name_the_inventory_lacks_is_exit_2_shown_safely_in_one_line(
        runner: CliRunner, tmp_path: Path, example_dir: Path, names: list[str], shown: str) -> None:
    inv = example_dir / "dgxpod.yaml"
    res = runner.invoke(app, ["nodes", "add", str(inv), *names, "-o", str(tmp_path / "out"),
                              "--kubeconfig", str(tmp_path / "none"), "--dry-run"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines() == [
        f"upi: error: {shown}: not a node of {inv}; write the new worker into the inventory's nodes: first "
        "(docs/day2.md)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "option"), [
    (["add", "-o", "OUT"], "--poll"), (["add", "-o", "OUT"], "--timeout"), (["remove"], "--poll")])
def test_a_zero_poll_or_timeout_is_exit_2_before_anything_is_touched(
        runner: CliRunner, tmp_path: Path, example_dir: Path, command: list[str], option: str) -> None:
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    res = runner.invoke(app, ["nodes", args[0], str(example_dir / "dgxpod.yaml"), "worker-0", *args[1:],
                              option, "0", "--kubeconfig", str(tmp_path / "none")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines() == [
        f"upi: error: {option} must be a positive duration (write 10s, 30m, 2h), not 0"]
    assert not (tmp_path / "out").exists()


def test_a_bmc_refusing_the_login_is_exit_1_naming_node_and_stage(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    write_credentials(example_dir / "bmc-admin.yaml", password="wrong-password")  # noqa: S106 - a test value
    res = add(runner, site, kube, "--timeout", "5s")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert "worker-2: stage boot:" in res.stderr and "401" in res.stderr  # type: ignore[attr-defined]
    assert "wrong-password" not in res.output  # type: ignore[attr-defined]
    assert ami.state.resets == [] and kube.approved() == set()


def test_the_gpu_step_needs_day_1s_gpu_operator_and_says_so(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    kubelet_joins(kube, ami)
    res = add(runner, site, kube, "--timeout", "60s", gpu=True)
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert ("worker-2: stage gpu: the cluster has no ClusterPolicy gpu-cluster-policy: install the GPU "
            "stack once with `upi gpu`") in res.stderr  # type: ignore[attr-defined]


def test_dry_run_checks_the_cluster_and_says_what_would_change_but_writes_pushes_boots_nothing(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    installed_cluster(kube)
    before, out_before = snapshot(site.root), snapshot(site.out)
    res = add(runner, site, kube, "--dry-run")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    err = res.stderr  # type: ignore[attr-defined]
    assert "ignition: the worker pointer config from secret openshift-machine-api/worker-user-data-managed " \
           "checked" in err
    assert "render: would change " in err and "dnsmasq/dhcp-pxe.conf" in err
    assert "tftp/grub.cfg-01-b8-ce-f6-10-33-48" in err
    assert snapshot(site.root) == before and snapshot(site.out) == out_before
    assert ami.state.resets == [] and ami.state.patches == []


def test_dry_run_of_an_rdma_dgx_in_a_tuned_pool_writes_and_sends_nothing(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake,
        kube: FakeApiServer) -> None:
    site = day2_site(runner, tmp_path, example_dir, tls, ami)
    doc = yaml.safe_load(site.inventory.read_text())
    for node in doc["nodes"]:
        if node.get("gpu"):
            node["rdma"] = {"interfaces": ["ens1f0np0", "0000:29:00.0"], "link_type": "ethernet",
                            "node_interface": "eno1"}
    doc["gpu_pool"] = {"name": "gpu", "taint": "none", "tuning": {"hugepages": [{"size": "1G", "count": 16}]}}
    site.inventory.write_text(yaml.safe_dump(doc))
    installed_cluster(kube)
    before, out_before = snapshot(site.root), snapshot(site.out)
    sent = len(kube.requests)
    res = add(runner, site, kube, "--dry-run", "--json", gpu=True)
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert json.loads(res.stdout)["nodes"][0]["name"] == "worker-2"  # type: ignore[attr-defined]
    assert snapshot(site.root) == before and snapshot(site.out) == out_before
    assert [r for r in kube.requests[sent:] if r[0] in ("PATCH", "PUT", "POST", "DELETE")] == []
    assert ami.state.resets == [] and ami.state.patches == []


def test_one_cluster_approves_the_new_dgxs_csrs_and_verifies_its_gpus(
        runner: CliRunner, tmp_path: Path, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    """Day 2 in ONE fake cluster: the GPU operators `upi gpu` installed, CSRs, the GPU step."""
    site: Site = pushed_site_with_bmc(runner, tmp_path, example_dir, tls, ami)
    cluster = start_cluster(tmp_path)
    try:
        day1 = runner.invoke(app, gpu_args(site.inventory, cluster, timeout="1"))
        assert day1.exit_code == 0, day1.output
        api = cluster.api
        assert api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy") is not None
        api.set_cluster_version(available=True, version=cluster.version)
        api.add_secret("openshift-machine-api", "worker-user-data-managed", {"userData": pointer(api.ca_pem)})
        write_new_worker(site, gpus=8)
        writes = len([r for r in api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")])
        kubelet_joins(api, ami, register=lambda: cluster.join(SimNode("worker-2", 8)))

        res = add(runner, site, api, "--json", "--timeout", "60s", gpu=True)

        assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
        doc = json.loads(res.stdout)  # type: ignore[attr-defined]
        node = doc["nodes"][0]
        assert (node["name"], node["stage"], node["ready"]) == ("worker-2", "done", True)
        assert node["gpu"].startswith("verified"), node  # then the pool's DCGM verdict
        assert doc["left_pending"] == ["client-intruder-9"]
        assert api.approved() == {"client-worker-2"} and api.conditions("client-intruder-9") == []
        labels = api.get("v1", "Node", "worker-2")["metadata"]["labels"]  # type: ignore[index]
        assert labels["nvidia.com/gpu.present"] == "true"  # the operators acted on the new node
        # Nothing cluster-wide re-applied: the day-2 writes are the CSR approval, validation and
        # DCGM pods, the Nodes' records and a token of day 1's metrics account (nothing persisted),
        # never an operator, policy or NFD object.
        after = [r for r in api.requests if r[0] in ("PATCH", "PUT", "POST", "DELETE")][writes:]
        assert any(r[1].endswith("/client-worker-2/approval") for r in after), after
        assert all(r[1].endswith(("/approval", "/serviceaccounts/upi-gpu-metrics/token"))
                   or "/pods" in r[1] or "/nodes/" in r[1] for r in after), after
        # A second run: no write but the pods it runs to verify and the metrics token.
        sent = len(api.requests)
        again = add(runner, site, api, "--json", "--timeout", "60s", gpu=True)
        assert again.exit_code == 0, again.output  # type: ignore[attr-defined]
        assert json.loads(again.stdout)["changed"] == []  # type: ignore[attr-defined]
        assert [r for r in api.requests[sent:] if r[0] in ("PATCH", "PUT", "POST", "DELETE")
                and "/pods" not in r[1] and not r[1].endswith("/token")] == []
    finally:
        cluster.stop()
    assert cluster.api.schema_violations == [] and cluster.api.controller_errors == []
