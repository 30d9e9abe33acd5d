"""The fake API server behaves like the real one where upi gpu depends on it.

Driven through upi.gpu.kube.Kube over TLS with client certificates, as upi
talks to a real cluster; where another client (kubectl, a controller) plays
its part, lightkube does, with its own generic resources.
"""

from __future__ import annotations

import json
import threading
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
