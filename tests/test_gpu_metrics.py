"""The GPU metrics proof (issue 31): the cluster's Prometheus has a utilisation series per GPU of every DGX.

Against the fake cluster's Thanos querier (tests/fake_thanos.py): its own
ingress CA, bearer tokens checked against what the fake API server issued
and the ClusterRoleBindings it holds, Prometheus's query API JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from certs import make_ca
from fake_gpu import FakeGpuCluster
from gpu_support import clean_cluster, gpu_args, gpu_inventory, start_cluster

from upi.cli import app

ACCOUNT = "system:serviceaccount:nvidia-gpu-operator:upi-gpu-metrics"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeGpuCluster]:
    yield from clean_cluster(tmp_path)


def _with_token(cluster: FakeGpuCluster, token: str) -> Path:
    """The cluster's kubeconfig whose user also carries a bearer token (as `oc login` writes one)."""
    doc = yaml.safe_load(cluster.kubeconfig.read_text())
    doc["users"][0]["user"]["token"] = token
    out = cluster.kubeconfig.with_name("kubeconfig-token")
    out.write_text(yaml.safe_dump(doc))
    return out


def _args(inv: Path, cluster: FakeGpuCluster, kubeconfig: Path, *extra: str) -> list[str]:
    args = gpu_args(inv, cluster, *extra)
    args[args.index("--kubeconfig") + 1] = str(kubeconfig)
    return args


def test_every_gpu_of_every_dgx_has_a_utilisation_series(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--json"))
    assert result.exit_code == 0, result.output
    nodes = {n["node"]: n["metrics"] for n in json.loads(result.stdout)["nodes"]}
    assert nodes == {"worker-0": "8/8 GPUs", "worker-1": "8/8 GPUs"}
    # The installer's kubeconfig has a client certificate, which the route does not take: a token of
    # upi's ServiceAccount bound to cluster-monitoring-view asked the querier.
    assert {who for _, who in cluster.thanos.queries} == {ACCOUNT}
    assert {q for q, _ in cluster.thanos.queries} == {"DCGM_FI_DEV_GPU_UTIL"}
    crb = cluster.api.get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding",
                          "upi-gpu-metrics-cluster-monitoring-view")
    assert crb is not None and crb["roleRef"]["name"] == "cluster-monitoring-view"
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "upi-gpu-metrics",
                                "namespace": "nvidia-gpu-operator"}]
    assert "worker-0: DCGM_FI_DEV_GPU_UTIL for 8/8 GPUs" in result.stderr
    # The token itself is never shown.
    for token in cluster.api.tokens:
        assert token not in result.output and token not in result.stderr


def test_series_that_take_a_few_scrapes_are_waited_for(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    cluster.thanos.lag = 1.0  # seconds after the exporters start before their first series
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
    assert result.exit_code == 0, result.output
    assert len(cluster.thanos.queries) > 2


def test_a_node_without_series_is_exit_1_naming_it(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    fake.thanos.missing = {"worker-1"}
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, timeout="0.05"))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert ("GPU step 'metrics' failed at Node worker-1: the cluster's Prometheus has no series of "
            "DCGM_FI_DEV_GPU_UTIL") in result.output
    assert "oc get pods -n nvidia-gpu-operator -l app=nvidia-dcgm-exporter" in result.output


def test_fewer_series_than_gpus_is_exit_1_naming_node_and_count(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    fake.thanos.short = {"worker-0": 7}
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake, timeout="0.05"))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert ("GPU step 'metrics' failed at Node worker-0: the cluster's Prometheus has series for 7/8 GPUs "
            "of DCGM_FI_DEV_GPU_UTIL") in result.output


def test_an_exporter_writing_lowercase_hostname_counts(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    cluster.thanos.node_label = "hostname"  # dcgm-exporter after its rename (NVIDIA/dcgm-exporter #655)
    result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert [n["metrics"] for n in json.loads(result.stdout)["nodes"]] == ["8/8 GPUs", "8/8 GPUs"]


def test_a_router_certificate_the_ingress_ca_did_not_sign_fails_tls(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    fake.thanos.publish_ca(make_ca("another-ingress-ca").cert_pem)
    try:
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert (f"GPU step 'metrics' failed at Thanos querier https://localhost:{fake.thanos.port}: its TLS "
            "certificate is not signed by the ingress CA (configmap "
            "openshift-config-managed/default-ingress-cert)") in result.output
    assert fake.thanos.queries == []
    assert "Traceback" not in result.output


def test_the_kubeconfigs_bearer_token_is_used_and_never_printed(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    token = "sha256~" + "Tq" * 21
    cluster.thanos.admin_tokens.add(token)
    kubeconfig = _with_token(cluster, token)
    result = runner.invoke(app, _args(gpu_inventory(tmp_path), cluster, kubeconfig, "--json"))
    assert result.exit_code == 0, result.output
    assert {who for _, who in cluster.thanos.queries} == {"kube:admin"}
    assert f"Bearer {token}" in cluster.thanos.tokens_seen
    # No ServiceAccount, no binding: the admin's own token reads metrics.
    assert cluster.api.get("v1", "ServiceAccount", "upi-gpu-metrics", "nvidia-gpu-operator") is None
    assert "querying with the kubeconfig's bearer token" in result.stderr
    assert token not in result.output and token not in result.stderr


def test_a_refused_token_is_exit_1_without_showing_it(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    token = "sha256~" + "Zx" * 21  # expired: the querier does not know it
    try:
        result = runner.invoke(app, _args(gpu_inventory(tmp_path), fake, _with_token(fake, token)))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert (f"GPU step 'metrics' failed at Thanos querier https://localhost:{fake.thanos.port}: HTTP 401"
            in result.output)
    assert "fix: the token was refused" in result.output
    assert token not in result.output


def test_metrics_off_asks_no_querier(runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path, "gpu_pool:\n  metrics: false\n")
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert cluster.thanos.queries == []
    assert cluster.api.get("v1", "ServiceAccount", "upi-gpu-metrics", "nvidia-gpu-operator") is None
    assert "gpu_pool.metrics is false: the GPU metrics are not checked" in result.stderr
    assert [n["metrics"] for n in json.loads(result.stdout)["nodes"]] == ["", ""]
    policy = cluster.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
    assert policy is not None and policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is False


def test_a_second_run_keeps_the_account_and_binding_unchanged(
        runner, tmp_path: Path, cluster: FakeGpuCluster) -> None:
    inv = gpu_inventory(tmp_path)
    assert runner.invoke(app, gpu_args(inv, cluster)).exit_code == 0
    result = runner.invoke(app, gpu_args(inv, cluster, "--json"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["changed"] is False


def test_a_prometheus_error_answer_is_named() -> None:
    from upi.gpu.metrics import _vector
    from upi.gpu.steps import GpuFailed

    raw = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode()
    with pytest.raises(GpuFailed, match="not a Prometheus query answer: parse error"):
        _vector(raw, "Thanos querier")
    ok = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"gpu": "0", "Hostname": "worker-0"}, "value": [1.0, "3"]}]}}
    assert _vector(json.dumps(ok).encode(), "q") == ok["data"]["result"]  # type: ignore[index]


def test_an_account_without_cluster_monitoring_view_is_403_named(runner, tmp_path: Path) -> None:
    fake = start_cluster(tmp_path)
    try:
        # A service account's token in the kubeconfig, as a CI job logged in with one: never bound.
        fake.api.put({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": "ci", "namespace": "default"}})
        code, doc = fake.api.token_request("default", "ci", {"spec": {"expirationSeconds": 3600}})
        assert code == 201
        token = doc["status"]["token"]
        result = runner.invoke(app, _args(gpu_inventory(tmp_path), fake, _with_token(fake, token)))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert (f"GPU step 'metrics' failed at Thanos querier https://localhost:{fake.thanos.port}: HTTP 403"
            in result.output)
    assert "fix: the account may not read metrics: bind it to cluster-monitoring-view" in result.output
    assert token not in result.output and fake.thanos.queries == []


@pytest.mark.parametrize(("said", "problem"), [
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate "
     "(_ssl.c:1006)", "its TLS certificate is not signed by the CA"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch, certificate is not "
     "valid for 'thanos'. (_ssl.c:1006)",
     "its TLS certificate is not for this host (Hostname mismatch, certificate is not valid for 'thanos'.)"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)",
     "its TLS certificate does not verify against the CA (certificate has expired)"),
], ids=["other-ca", "other-host", "expired"])
def test_a_tls_failure_says_which(said: str, problem: str) -> None:
    from upi.gpu.metrics import _tls_problem

    assert _tls_problem(said, "the CA") == problem


@pytest.mark.parametrize(("route", "said"), [
    (None, "the cluster has no Thanos querier route: cluster monitoring is not running"),
    ({"spec": {"host": "evil@example.com/x"}}, "the route's host: 'evil@example.com/x' is not a host name"),
    ({"spec": {}}, "the route's host: it has no host"),
], ids=["absent", "not-a-host", "no-host"])
def test_a_querier_route_upi_cannot_use_is_named(
        runner, tmp_path: Path, route: dict | None, said: str) -> None:
    fake = start_cluster(tmp_path)
    try:
        fake.api.delete("route.openshift.io/v1", "Route", "thanos-querier", "openshift-monitoring")
        if route is not None:
            meta = {"name": "thanos-querier", "namespace": "openshift-monitoring"}
            fake.api.put({"apiVersion": "route.openshift.io/v1", "kind": "Route", "metadata": meta, **route})
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), fake))
    finally:
        fake.stop()
    assert result.exit_code == 1, result.output
    assert f"GPU step 'metrics' failed at Route openshift-monitoring/thanos-querier: {said}" in result.output
    assert fake.thanos.queries == []
