"""What tests add to the FAKE API server in-process, and read back: CSRs, Nodes, Pods, a day-2 cluster.

Tests add CSRs and Nodes in-process (add_csr, add_node) and see what was
approved (approved, conditions; fakeapi/subresources.py keeps the order).

An installed cluster for day 2: ClusterVersion `version` with
status.conditions[type=Available] (OpenShift docs, "ClusterVersion
[config.openshift.io/v1]", `oc get clusterversion`'s AVAILABLE column),
Secrets with base64 `data` (Kubernetes API reference, Secret v1 core),
Pods bound to nodes and the PodDisruptionBudgets a drain meets.
"""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Sequence

from fakeapi.kinds import Obj, now
from fakeapi.subresources import Subresources


class Cluster(Subresources):
    """The store seen and filled as a test does."""

    @property
    def csrs(self) -> dict[str, Obj]:
        """CSRs by name (the stored objects)."""
        k = self.kind("certificates.k8s.io/v1", "CertificateSigningRequest")
        with self.lock:  # the server's threads write to the store meanwhile
            return {name: o for (kk, _, name), o in self.objects.items() if kk == k}

    @property
    def nodes(self) -> dict[str, Obj]:
        """Nodes by name (the stored objects)."""
        k = self.kind("v1", "Node")
        with self.lock:
            return {name: o for (kk, _, name), o in self.objects.items() if kk == k}

    @property
    def pods(self) -> dict[tuple[str, str], Obj]:
        """Pods by (namespace, name) (the stored objects)."""
        k = self.kind("v1", "Pod")
        with self.lock:
            return {(ns, name): o for (kk, ns, name), o in self.objects.items() if kk == k}

    def add_csr(self, name: str, request_pem: bytes, *, signer: str, username: str,
                groups: Sequence[str], usages: Sequence[str]) -> None:
        """Create a pending CSR as the kubelet (or an attacker) would."""
        with self.lock:
            self.put({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                      "metadata": {"name": name},
                      "spec": {"request": base64.b64encode(request_pem).decode(), "signerName": signer,
                               "username": username, "groups": [*groups], "usages": [*usages], "uid": "1"},
                      "status": {}}, manager="kube-apiserver")
            self.created_at[name] = time.monotonic()

    def add_node(self, name: str, *, ready: bool | None = None, labels: dict[str, str] | None = None) -> None:
        """Register a Node (what a kubelet does once its client CSR is approved).

        `ready` sets its Ready condition as the kubelet reports it (None: no conditions yet).
        """
        st: Obj = {}
        if ready is not None:
            st["conditions"] = [{
                "type": "Ready", "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "kubelet is posting ready status" if ready else "container runtime "
                "network not ready", "lastHeartbeatTime": now(), "lastTransitionTime": now()}]
        self.put({"apiVersion": "v1", "kind": "Node",
                  "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                  "spec": {}, "status": st}, manager="kubelet")

    def set_cluster_version(self, *, available: bool, version: str = "4.16.3") -> None:
        """ClusterVersion `version` as the CVO reports it: Available True once installed.

        An existing ClusterVersion (a GPU cluster's) keeps its other fields.
        """
        cond = {"type": "Available", "status": "True" if available else "False",
                "lastTransitionTime": now(),
                "message": f"Done applying {version}" if available else "Working towards " + version}
        with self.lock:
            cv = self.get("config.openshift.io/v1", "ClusterVersion", "version") or {
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"clusterID": "00000000-0000-4000-8000-000000000001"}}
            st = cv.setdefault("status", {})
            st["conditions"] = [c for c in st.get("conditions", []) if c.get("type") != "Available"] + [cond]
            st["desired"] = {**st.get("desired", {}), "version": version}
            self.put(cv, manager="cluster-version-operator")

    def add_secret(self, namespace: str, name: str, data: dict[str, bytes]) -> None:
        """A Secret as the API returns it: each value base64 in `data`."""
        self.put({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": name, "namespace": namespace},
                  "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})

    def add_pod(self, namespace: str, name: str, node: str, *, labels: dict[str, str] | None = None,
                owner: str | None = None, empty_dir: bool = False) -> None:
        """A running Pod bound to `node`; `owner` the kind of its controller (ReplicaSet, DaemonSet)."""
        meta: Obj = {"name": name, "namespace": namespace, "labels": labels or {}}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
                                        "uid": f"uid-{name}-owner", "controller": True}]
        volumes = [{"name": "scratch", "emptyDir": {}}] if empty_dir else []
        mounts = [{"name": "scratch", "mountPath": "/scratch"}] if empty_dir else []
        self.put({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                  "spec": {"nodeName": node, "volumes": volumes,
                           "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                           "volumeMounts": mounts}]},
                  "status": {"phase": "Running"}})

    def add_pdb(self, namespace: str, name: str, match_labels: dict[str, str], *,
                disruptions_allowed: int) -> None:
        """A PodDisruptionBudget as the disruption controller keeps it (status.disruptionsAllowed)."""
        self.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": name, "namespace": namespace},
                  "spec": {"selector": {"matchLabels": match_labels}},
                  "status": {"disruptionsAllowed": disruptions_allowed}})

    def decide_directly(self, name: str, condition: str = "Approved") -> None:
        """Approve (or deny) a CSR as another approver, an admin or an earlier run did."""
        with self.lock:
            cur = copy.deepcopy(self.csrs[name])
            cur["status"]["conditions"] = [{"type": condition, "status": "True", "reason": "Other",
                                            "lastUpdateTime": now(), "lastTransitionTime": now()}]
            if condition == "Approved":
                self.approved_at[name] = time.monotonic()
                self.approval_order.append(name)
            self.put(cur, manager="other-approver")

    def touch_csr(self, name: str) -> None:
        """Another writer changed the CSR: its resourceVersion moves on."""
        with self.lock:
            self._touch((self.kind("certificates.k8s.io/v1", "CertificateSigningRequest"), "", name))

    def conditions(self, name: str) -> Sequence[str]:
        """The condition types of one CSR."""
        with self.lock:
            return [c["type"] for c in self.csrs[name]["status"].get("conditions", [])]

    def approved(self) -> set[str]:
        """Names of every approved CSR."""
        with self.lock:
            return set(self.approved_at)
