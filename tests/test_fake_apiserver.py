"""The fake API server behaves like the real one where upi gpu depends on it.

Driven through upi.gpu.kube.Kube over TLS with client certificates, as upi
talks to a real cluster; where another client (kubectl, a controller) plays
its part, lightkube does, with its own generic resources.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fake_apiserver import FakeApiServer
from fake_gpu import FakeGpuCluster, nfd_labels
from gpu_support import sim_nodes

from upi.csr.connect import connect
from upi.errors import ClusterError
from upi.gpu.kube import Kube

SUB = "operators.coreos.com/v1alpha1"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Kube]]:
    fake = FakeApiServer(tmp_path / "kube").start()
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    conn = connect(fake.kubeconfig)
    yield fake, Kube(conn)
    conn.close()
    fake.stop()


def resource(api_version: str, kind: str):
    """lightkube's generic resource of a kind upi uses (another client than upi's own)."""
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    from upi.gpu.kube import KINDS

    plural, namespaced = KINDS[(api_version, kind)]
    group, _, version = api_version.rpartition("/")
    make = create_namespaced_resource if namespaced else create_global_resource
    return make(group, version, kind, plural)


@pytest.fixture
def kubectl(server):
    """A lightkube client of the same kubeconfig: another field manager than upi."""
    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig

    fake, _ = server
    client = Client(KubeConfig.from_file(fake.kubeconfig).get())
    yield client
    client.close()


def _sub(**spec: object) -> dict:
    return {
        "apiVersion": SUB,
        "kind": "Subscription",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"name": "pkg", "source": "cat", "sourceNamespace": "m", **spec},
    }


def test_apply_creates_then_a_same_apply_changes_nothing(server) -> None:
    fake, kube = server
    first = kube.apply(_sub(channel="stable"))
    assert first.created and first.changed
    again = kube.apply(_sub(channel="stable"))
    assert not again.changed
    assert again.obj["metadata"]["resourceVersion"] == first.obj["metadata"]["resourceVersion"]
    moved = kube.apply(_sub(channel="fast"))
    assert moved.changed and moved.obj["spec"]["channel"] == "fast"
    assert any(r[2].startswith("application/apply-patch+yaml") for r in fake.requests if r[0] == "PATCH")


def test_apply_drops_fields_the_manager_no_longer_sets(server) -> None:
    _, kube = server
    kube.apply(_sub(channel="stable", startingCSV="pkg.v1"))
    out = kube.apply(_sub(channel="stable"))
    assert "startingCSV" not in out.obj["spec"]


def test_apply_conflicts_with_another_managers_field(server, kubectl) -> None:
    _, kube = server
    from lightkube.types import PatchType

    kube.apply(_sub(channel="stable"))
    kubectl.patch(
        resource(SUB, "Subscription"),
        "s",
        {"spec": {"channel": "other"}},
        namespace="ns",
        patch_type=PatchType.MERGE,
        field_manager="kubectl",
    )
    with pytest.raises(ClusterError, match='conflict with "kubectl": .spec.channel'):
        kube.apply(_sub(channel="stable"))


def test_unknown_field_and_wrong_type_are_rejected_by_the_real_schema(server) -> None:
    fake, kube = server
    with pytest.raises(ClusterError, match="Additional properties are not allowed"):
        kube.apply(_sub(channel="stable", chanel="typo"))
    with pytest.raises(ClusterError, match="is not of type 'string'"):
        kube.apply(_sub(channel=7))
    assert len(fake.schema_violations) == 2


def test_status_is_a_subresource(server) -> None:
    fake, kube = server
    kube.apply(_sub(channel="stable"))
    fake.set_status(
        SUB, "Subscription", "s", "ns", {"lastUpdated": "2026-01-01T00:00:00Z", "state": "AtLatestKnown"}
    )
    out = kube.merge_patch(SUB, "Subscription", "s", "ns", {"status": {"state": "hacked"}})
    assert out["status"]["state"] == "AtLatestKnown"


def test_watch_streams_changes(server, kubectl) -> None:
    fake, _ = server
    seen: list[tuple[str, str]] = []

    def watch() -> None:
        for event, obj in kubectl.watch(resource("v1", "Namespace"), server_timeout=2):
            seen.append((event, obj["metadata"]["name"]))
            if obj["metadata"]["name"] == "later":
                return

    thread = threading.Thread(target=watch)
    thread.start()
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "later"}})
    thread.join(timeout=5)
    assert ("ADDED", "ns") in seen and ("ADDED", "later") in seen


def test_pod_logs_and_missing_objects(server) -> None:
    fake, kube = server
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]},
        }
    )
    fake.pod_logs[("ns", "p", "c")] = "one\ntwo\nthree\n"
    assert kube.logs("p", "ns", tail=2) == ["two", "three"]
    assert kube.get(SUB, "Subscription", "nope", "ns") is None
    kube.delete(SUB, "Subscription", "nope", "ns")  # gone already is fine


@pytest.mark.parametrize(
    ("fields", "label"),
    [(["vendor"], "pci-10de"), (["class", "vendor"], "pci-0302_10de"), (None, "pci-0302_10de")],
)
def test_nfd_labels_follow_device_label_fields(fields, label) -> None:
    config = yaml.safe_dump(
        {"sources": {"pci": {"deviceClassWhitelist": ["03"], "deviceLabelFields": fields}}}
    )
    labels = nfd_labels(config, [{"class": "0302", "vendor": "10de", "device": "2330"}])
    assert labels == {f"feature.node.kubernetes.io/{label}.present": "true"}


def test_olm_waits_for_approval_and_uses_the_real_csv(tmp_path: Path) -> None:
    fake = FakeGpuCluster(tmp_path / "kube", sim_nodes()).start()
    try:
        fake.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nvidia-gpu-operator"}})
        fake.api.put(
            {
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "g", "namespace": "nvidia-gpu-operator"},
                "spec": {"targetNamespaces": ["nvidia-gpu-operator"]},
            }
        )
        fake.api.put(
            {
                "apiVersion": SUB,
                "kind": "Subscription",
                "metadata": {"name": "gpu-operator-certified", "namespace": "nvidia-gpu-operator"},
                "spec": {
                    "name": "gpu-operator-certified",
                    "channel": "v26.3",
                    "installPlanApproval": "Manual",
                    "source": "certified-operators",
                    "sourceNamespace": "openshift-marketplace",
                },
            }
        )
        fake.api.run_controllers()
        plans = fake.api.list(SUB, "InstallPlan", "nvidia-gpu-operator")
        assert [p["status"]["phase"] for p in plans] == ["RequiresApproval"]
        assert fake.api.list(SUB, "ClusterServiceVersion") == []
        plan = plans[0]
        plan["spec"]["approved"] = True
        fake.api.put(plan)
        for _ in range(5):
            fake.api.run_controllers()
        csv = fake.api.get(
            SUB, "ClusterServiceVersion", "gpu-operator-certified.v26.3.1", "nvidia-gpu-operator"
        )
        assert csv is not None and csv["status"]["phase"] == "Succeeded"
        kinds = [e["kind"] for e in json.loads(csv["metadata"]["annotations"]["alm-examples"])]
        assert "ClusterPolicy" in kinds
    finally:
        fake.stop()
    assert fake.api.schema_violations == [] and fake.api.controller_errors == []


# --- the one server: CSRs, discovery, tables, drains, credentials ------------------------------

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def _csr(fake: FakeApiServer, node: str = "worker-0") -> str:
    from csr_cases import client

    spec = client(node)
    fake.add_csr(spec.name, spec.pem, **spec.kwargs())  # type: ignore[arg-type]
    return spec.name


def _approval(rv: str, *types: str) -> dict:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"resourceVersion": rv}, "spec": {"signerName": "changed-by-the-client"},
            "status": {"conditions": [{"type": t, "status": "True", "reason": "Test"} for t in types]}}


def test_csr_approval_replaces_conditions_only_and_a_stale_version_is_409(server) -> None:
    fake, kube = server
    name = _csr(fake)
    http = kube.conn.http
    url = f"{fake.url}{CSR_PATH}/{name}"
    stale = http.get(url).json()["metadata"]["resourceVersion"]
    fake.touch_csr(name)  # another writer moved it on
    conflict = http.put(f"{url}/approval", json=_approval(stale, "Approved"))
    assert conflict.status_code == 409 and conflict.json()["reason"] == "Conflict"
    assert fake.conditions(name) == [] and fake.approved() == set()

    current = http.get(url).json()["metadata"]["resourceVersion"]
    assert http.put(f"{url}/approval", json=_approval(current, "Approved", "Denied")).status_code == 422
    done = http.put(f"{url}/approval", json=_approval(current, "Approved"))
    assert done.status_code == 200, done.text
    assert fake.conditions(name) == ["Approved"] and fake.approval_order == [name]
    assert done.json()["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"  # spec kept
    assert int(done.json()["metadata"]["resourceVersion"]) > int(current)
    assert http.get(f"{fake.url}{CSR_PATH}/nope").status_code == 404
    other = _csr(fake, "worker-1")
    unconditional = _approval("", "Denied")
    del unconditional["metadata"]["resourceVersion"]  # no version: the real server updates unconditionally
    assert http.put(f"{fake.url}{CSR_PATH}/{other}/approval", json=unconditional).status_code == 200
    assert fake.conditions(other) == ["Denied"]


def test_discovery_lists_every_served_kind_with_its_subresources_and_not_a_withheld_one(server) -> None:
    from fake_apiserver import KINDS

    fake, kube = server
    fake.withhold("nvidia.com/v1", "ClusterPolicy")
    http = kube.conn.http
    groups = http.get(f"{fake.url}/apis").json()["groups"]
    served = {"v1": http.get(f"{fake.url}/api/v1").json()["resources"]}
    for g in groups:
        for v in g["versions"]:
            served[v["groupVersion"]] = http.get(f"{fake.url}/apis/{v['groupVersion']}").json()["resources"]
    names = {(gv, r["name"]) for gv, rs in served.items() for r in rs}
    for k in KINDS:
        if k.kind != "ClusterPolicy":
            assert (k.api_version, k.plural) in names, k
    assert "nvidia.com" not in {g["name"] for g in groups}
    for sub in ("pods/eviction", "pods/log", "pods/status", "nodes/status"):
        assert ("v1", sub) in names
    assert ("certificates.k8s.io/v1", "certificatesigningrequests/approval") in names
    csr = next(r for r in served["certificates.k8s.io/v1"] if r["name"] == "certificatesigningrequests")
    assert (csr["namespaced"], csr["shortNames"]) == (False, ["csr"])
    assert http.get(f"{fake.url}/api").json()["versions"] == ["v1"]
    olm = next(g for g in groups if g["name"] == "operators.coreos.com")
    assert olm["preferredVersion"]["version"] == "v1"  # GA before alpha, as the real server orders them
    assert [v["version"] for v in olm["versions"]] == ["v1", "v1alpha1"]


def test_kubectl_asks_for_tables_and_gets_the_kinds_columns(server) -> None:
    fake, kube = server
    name = _csr(fake)
    fake.add_node("worker-0", ready=True)
    http = kube.conn.http
    csrs = http.get(f"{fake.url}{CSR_PATH}", headers={"Accept": TABLE}).json()
    assert csrs["kind"] == "Table"
    assert [c["name"] for c in csrs["columnDefinitions"]] == [
        "Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]
    assert csrs["rows"][0]["cells"][0] == name and csrs["rows"][0]["cells"][-1] == "Pending"
    one = http.get(f"{fake.url}/api/v1/nodes/worker-0", headers={"Accept": TABLE}).json()
    assert [c["name"] for c in one["columnDefinitions"]] == ["Name", "Status", "Roles", "Age", "Version"]
    assert one["rows"][0]["cells"][:3] == ["worker-0", "Ready", "<none>"]
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    spaces = http.get(f"{fake.url}/api/v1/namespaces", headers={"Accept": TABLE}).json()
    assert [c["name"] for c in spaces["columnDefinitions"]] == ["Name", "Created At"]
    assert http.get(f"{fake.url}/api/v1/nodes").json()["kind"] == "NodeList"


def test_eviction_honours_the_pdb_and_takes_one_disruption_each_time(server) -> None:
    fake, kube = server
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    for pod in ("web-1", "web-2", "web-3"):
        fake.add_pod("apps", pod, "worker-0", labels={"app": "web"}, owner="ReplicaSet")
    fake.add_pod("apps", "other", "worker-1", labels={"app": "other"})
    fake.add_pdb("apps", "web", {"app": "web"}, disruptions_allowed=1)
    http = kube.conn.http

    def evict(pod: str, **body: object) -> int:
        doc = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "apps"},
               **body}
        return http.post(f"{fake.url}/api/v1/namespaces/apps/pods/{pod}/eviction", json=doc).status_code

    on_node = http.get(f"{fake.url}/api/v1/pods", params={"fieldSelector": "spec.nodeName=worker-0"}).json()
    assert sorted(p["metadata"]["name"] for p in on_node["items"]) == ["web-1", "web-2", "web-3"]
    assert http.get(f"{fake.url}/api/v1/pods", params={"fieldSelector": "spec.color=red"}).status_code == 400
    assert evict("web-1") == 201
    assert evict("web-2") == 429  # the one allowed disruption is spent
    assert fake.get("policy/v1", "PodDisruptionBudget", "web", "apps")["status"]["disruptionsAllowed"] == 0
    assert ("apps", "web-1") not in fake.pods and ("apps", "web-2") in fake.pods
    assert evict("other") == 201  # no budget selects it
    assert evict("web-2", metadata={"name": "web-3"}) == 400
    assert evict("gone") == 404
    fake.add_pdb("apps", "web-too", {"app": "web"}, disruptions_allowed=5)
    assert evict("web-3") == 500  # two budgets: the eviction API refuses to choose
    assert fake.evictions == [("apps", "web-1", 201), ("apps", "web-2", 429), ("apps", "other", 201),
                              ("apps", "gone", 404), ("apps", "web-3", 500)]


def test_no_credentials_is_401_and_a_known_bearer_token_is_accepted(server, tmp_path: Path) -> None:
    import ssl

    import httpx2 as httpx

    fake, _ = server
    fake.user_tokens.add("sha256~good")
    with httpx.Client(verify=ssl.create_default_context(cadata=fake.ca_pem.decode())) as anon:
        assert anon.get(f"{fake.url}/api/v1/nodes").status_code == 401
        bad = anon.get(f"{fake.url}/api/v1/nodes", headers={"Authorization": "Bearer sha256~bad"})
        good = anon.get(f"{fake.url}/api/v1/nodes", headers={"Authorization": "Bearer sha256~good"})
    assert bad.status_code == 401 and good.status_code == 200


def test_watch_sends_raw_lines_ends_on_drop_and_sees_deletes(server) -> None:
    fake, kube = server
    name = _csr(fake)
    http = kube.conn.http
    rv = http.get(f"{fake.url}{CSR_PATH}").json()["metadata"]["resourceVersion"]
    lines: list[str] = []
    params = {"watch": "true", "resourceVersion": rv}

    def watch() -> None:
        with http.stream("GET", f"{fake.url}{CSR_PATH}", params=params) as r:
            for line in r.iter_lines():
                lines.append(line)

    thread = threading.Thread(target=watch)
    thread.start()
    end = time.monotonic() + 10
    while fake.watches_served < 1 and time.monotonic() < end:
        time.sleep(0.05)
    fake.add_raw_event(b"not json\n")
    fake.delete("certificates.k8s.io/v1", "CertificateSigningRequest", name)
    while len(lines) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    fake.drop_watches()
    thread.join(timeout=5)
    assert not thread.is_alive()  # the stream ended with the dropped watches
    assert lines[0] == "not json"
    deleted = json.loads(lines[1])
    assert (deleted["type"], deleted["object"]["metadata"]["name"]) == ("DELETED", name)


def test_real_kubectl_reads_the_kinds_through_discovery(server, tmp_path: Path) -> None:
    from conftest import require

    from upi.runner import run

    fake, _ = server
    kubectl = require("kubectl")
    _csr(fake, "worker-3")
    fake.add_node("worker-3", ready=True)
    fake.add_pdb("ns", "web", {"app": "web"}, disruptions_allowed=0)
    env_base = [kubectl, "--kubeconfig", str(fake.kubeconfig), "--cache-dir", str(tmp_path / "cache")]
    resources = run([*env_base, "api-resources", "--no-headers"], timeout=30).stdout
    assert {"certificatesigningrequests", "poddisruptionbudgets", "clusterversions"} <= {
        line.split()[0] for line in resources.splitlines()}
    assert run([*env_base, "get", "csr", "-o", "name"], timeout=30).stdout == \
        "certificatesigningrequest.certificates.k8s.io/client-worker-3\n"
    assert run([*env_base, "get", "no"], timeout=30).stdout.splitlines()[1].split()[:3] == [
        "worker-3", "Ready", "<none>"]
    assert run([*env_base, "get", "pdb", "-n", "ns", "-o", "name"], timeout=30).stdout == \
        "poddisruptionbudget.policy/web\n"


def test_real_kubectl_drain_cordons_and_evicts_through_the_pdb(server, tmp_path: Path) -> None:
    """`kubectl drain` finds the Eviction API by discovery, cordons with a strategic merge patch,
    selects the node's pods by field, and is held back by the budget until it allows a disruption."""
    from conftest import require

    from upi.runner import run

    fake, _ = server
    kubectl = require("kubectl")
    fake.add_node("worker-0", ready=True)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
    fake.add_pod("apps", "web-1", "worker-0", labels={"app": "web"}, owner="ReplicaSet")
    fake.add_pod("apps", "elsewhere", "worker-1", labels={"app": "web"}, owner="ReplicaSet")
    fake.add_pdb("apps", "web", {"app": "web"}, disruptions_allowed=0)
    base = [kubectl, "--kubeconfig", str(fake.kubeconfig), "--cache-dir", str(tmp_path / "cache")]
    drain = [*base, "drain", "worker-0", "--timeout", "2s", "--grace-period", "0"]

    blocked = run(drain, timeout=60, check=False)
    assert blocked.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in blocked.stderr
    assert fake.nodes["worker-0"]["spec"]["unschedulable"] is True  # cordoned first
    assert ("apps", "web-1") in fake.pods and {c for *_, c in fake.evictions} == {429}

    fake.set_status("policy/v1", "PodDisruptionBudget", "web", "apps", {"disruptionsAllowed": 1})
    done = run(drain, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "pod/web-1 evicted" in done.stdout and "node/worker-0 drained" in done.stdout
    assert sorted(fake.pods) == [("apps", "elsewhere")] and fake.evictions[-1] == ("apps", "web-1", 201)


@pytest.mark.parametrize(("method", "path"), [
    ("DELETE", "/api/v1/namespaces/ns/pods/p"),  # DeleteOptions, as kubectl sends them
    ("DELETE", "/api/v1/namespaces/ns/pods"),  # no name: 405, the body read all the same
    ("POST", "/api/v1/namespaces/ns/pods/p"),
])
def test_a_request_body_the_server_does_not_need_is_still_read_off_the_connection(
        server, method: str, path: str) -> None:
    fake, kube = server
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
              "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]}})
    http = kube.conn.http
    body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    http.request(method, f"{fake.url}{path}", content=body, headers={"Content-Type": "application/json"})
    after = http.get(f"{fake.url}/api/v1/namespaces/ns/pods")  # the same kept-alive connection
    assert after.status_code == 200 and after.json()["kind"] == "PodList"


@pytest.mark.parametrize(("seconds", "shown"), [
    (5, "5s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600 + 60, "3h1m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (50 * 3600, "2d2h"), (9 * 86400, "9d"), (800 * 86400, "2y70d"),
])
def test_ages_read_as_kubectl_prints_them(seconds: int, shown: str) -> None:
    import datetime as dt

    from kube_wire import age

    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    then = (now - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert age(then, now) == shown
