"""Fake GPUDirect RDMA bandwidth tests on the DGXs: SCC admission, the scheduler, Multus, ib_write_bw pods.

A fake, hooked into the fake API server by tests/fake_gpu.py (a controller
run after every write and on every tick). It is the one place that runs
upi's bandwidth test pods; everything they rely on comes from the other fakes
of the same cluster, never from here: the NIC driver pods (`mofed-*`, label
`nvidia.com/ofed-driver`, container `mofed-container`), the RDMA shared
device plugin's `rdma/<resourceName>` allocatable and the IPoIB/macvlan
networks are tests/fake_network.py's (the Network Operator); the GPU driver
pod's `nvidia-peermem-ctr` is tests/fake_gpu.py's (the GPU Operator).

- OpenShift's SCC admission for pods that add a capability, run as root or
  privileged: admitted only when the pod's ServiceAccount is bound (RoleBinding
  in its namespace, or a ClusterRoleBinding) to the ClusterRole
  `system:openshift:scc:privileged` (openshift-docs
  modules/security-context-constraints-rbac.adoc: one `use` ClusterRole per
  SCC). Otherwise 403 Forbidden in the admission's words, one entry per SCC
  provider tried, as clusters print it (openshift/origin issue 12741,
  bank-vaults/bank-vaults issue 706, WASdev/websphere-liberty-operator issue
  692): `pods "<name>" is forbidden: unable to validate against any security
  context constraint: [provider "anyuid": Forbidden: not usable by user or
  serviceaccount, provider restricted-v2: .containers[0].capabilities.add:
  Invalid value: "IPC_LOCK": capability may not be added, ...]`.
- The scheduler for the test pods: node affinity on `metadata.name`, taints,
  and extended resources counted against what the node's other pods hold; a
  pod it cannot place stays Pending with PodScheduled False, reason
  Unschedulable, and the scheduler's message ("0/N nodes are available: ...",
  kubernetes pkg/scheduler/framework/types.go FitError.Error and the
  NodeResourcesFit / TaintToleration / NodeAffinity plugins' reasons).
- Multus: a pod asking for a network the Network Operator made
  (`k8s.v1.cni.cncf.io/networks` naming the NetworkAttachmentDefinition an
  IPoIBNetwork/MacvlanNetwork reports in its status) gets the
  `k8s.v1.cni.cncf.io/network-status` annotation (the default network first,
  `default: true`, then `net1` on the secondary one with an address from the
  network's whereabouts range); an unknown network leaves the pod ContainerCreating.
  So does a network in another namespace that is not one of OpenShift's Multus
  global namespaces: the cluster-network-operator renders Multus with
  `namespaceIsolation: true` and `globalNamespaces:
  default,openshift-multus,openshift-sriov-network-operator`, and multus-cni's
  GetNetworkDelegates (pkg/k8sclient/k8sclient.go) refuses the sandbox: "namespace
  isolation enabled, annotation violates permission, pod is in namespace A but
  refers to target namespace B" (`isolated` records each such pod).
- `ib_write_bw` (linux-rdma/perftest; its output in tests/fake_perftest.py):
  the server waits for a client; the client, given the server's address,
  prints perftest's report table with the figure the test chose for the pair
  (`bandwidth`), both then exit 0.
  What perftest prints when it cannot run: no RDMA device in the container
  (" Unable to find the Infiniband/RoCE device", write_bw.c), no GPU
  ("There are no available device(s) that support CUDA", cuda_memory.c), no
  IPC_LOCK ("Couldn't allocate MR", perftest_resources.c), nobody listening
  ("Couldn't connect to <ip>:18515", perftest_communication.c).

`overlaps` records every time one node held two test pods at once;
`measured` every pair whose client finished, as (server node, client node);
`refused` every pod SCC admission refused.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from fake_apiserver import FakeApiServer
from fake_perftest import PERFTEST_PORT, report
from kube_wire import status

Obj = dict[str, Any]
POD_LABEL = "upi.openshift.io/rdma-bandwidth"  # what upi labels its test pods with (upi.gpu.rdma_perftest)
MELLANOX = "mellanox.com/v1alpha1"
SCC_ROLE = "system:openshift:scc:privileged"
# The restricted-v2 SCC's UID range in a fresh namespace (openshift.io/sa.scc.uid-range annotation).
UID_RANGE = "[1000680000, 1000689999]"
# Where any pod may find a NetworkAttachmentDefinition (OpenShift's Multus config, above).
MULTUS_GLOBAL = ("default", "openshift-multus", "openshift-sriov-network-operator")


class FakeRdma:
    """The bandwidth test pods' side of the fake cluster (a fake): admission, placement, Multus, perftest."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.bandwidth: dict[frozenset[str], float] = {}  # per pair of nodes; default_gbps otherwise
        self.default_gbps = 392.0
        self.report_gbits = True
        self.hangs: set[frozenset[str]] = set()  # pairs whose test never ends
        self.link_down: set[frozenset[str]] = set()  # pairs whose QPs cannot connect (write_bw.c)
        self.unpullable: set[str] = set()  # images the registry does not hold (a disconnected mirror lacks)
        self.overlaps: list[tuple[str, list[str]]] = []
        self.measured: list[tuple[str, str]] = []
        self.refused: list[str] = []  # pods SCC admission refused (their generateName or name)
        self.most_servers_at_once = 0  # test servers that existed together (pairs of a round run at once)
        self.pods_seen: dict[str, Obj] = {}  # every test pod as created, by name
        self.isolated: list[str] = []  # pods Multus refused a network of another namespace (their name)
        self._bound: dict[str, str] = {}  # test pod -> node it runs on
        self._ips: dict[str, str] = {}  # test pod -> its secondary address
        self._age: dict[str, int] = {}
        api.admission.append(self.admit)

    # --- SCC admission ----------------------------------------------------------------------
    def admit(self, kind: Any, ns: str, pod: Obj) -> tuple[int, Obj] | None:
        """SCC admission of a pod: restricted-v2 for everyone, privileged for accounts bound to it."""
        if kind.kind != "Pod":
            return None
        spec = pod.get("spec") or {}
        errors: list[str] = []
        for i, c in enumerate(spec.get("containers") or []):
            ctx = c.get("securityContext") or {}
            for cap in (ctx.get("capabilities") or {}).get("add") or []:  # first, as in the issues' quotes
                if cap != "NET_BIND_SERVICE":  # restricted-v2's allowedCapabilities
                    errors.append(f'.containers[{i}].capabilities.add: Invalid value: "{cap}": capability '
                                  "may not be added")
            if ctx.get("privileged"):
                errors.append(f".containers[{i}].privileged: Invalid value: true: Privileged containers "
                              "are not allowed")
            if ctx.get("runAsUser") == 0:
                errors.append(f".containers[{i}].runAsUser: Invalid value: 0: must be in the ranges: "
                              f"{UID_RANGE}")
        account = spec.get("serviceAccountName") or "default"
        if not errors or self._may_use_privileged(ns, account):
            return None
        meta = pod.get("metadata") or {}
        name = meta.get("generateName") or meta.get("name", "")
        self.refused.append(name)
        unusable = 'Forbidden: not usable by user or serviceaccount'
        providers = [f'provider "anyuid": {unusable}', *(f"provider restricted-v2: {e}" for e in errors),
                     f'provider "hostnetwork-v2": {unusable}', f'provider "privileged": {unusable}']
        return 403, status(403, "Forbidden", f'pods "{name}" is forbidden: unable to validate against any '
                           f"security context constraint: [{', '.join(providers)}]")

    def _may_use_privileged(self, ns: str, account: str) -> bool:
        if self.api.get("v1", "ServiceAccount", account, ns) is None:
            return False  # a pod naming a missing account is refused anyway (ServiceAccount admission)
        bindings = [*self.api.list("rbac.authorization.k8s.io/v1", "RoleBinding", ns),
                    *self.api.list("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")]
        for b in bindings:
            ref = b.get("roleRef") or {}
            if (ref.get("kind"), ref.get("name")) != ("ClusterRole", SCC_ROLE):
                continue
            wanted = ("ServiceAccount", account, ns)
            subjects = b.get("subjects") or []
            if any((s.get("kind"), s.get("name"), s.get("namespace")) == wanted for s in subjects):
                return True
        return False

    # --- Multus: the networks the Network Operator made --------------------------------------
    def networks(self) -> dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network]:
        """`ns/name` of each NetworkAttachmentDefinition an IPoIB/macvlan network reports -> its range."""
        out: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
        for kind, key in (("IPoIBNetwork", "ipoibNetworkAttachmentDef"),
                          ("MacvlanNetwork", "macvlanNetworkAttachmentDef")):
            for net in self.api.list(MELLANOX, kind):
                nad = (net.get("status") or {}).get(key)
                if nad:
                    ipam = json.loads(net["spec"].get("ipam") or "{}")
                    out[nad] = ipaddress.ip_network(ipam["range"], strict=False)
        return out

    # --- the test pods --------------------------------------------------------------------
    def tick(self) -> None:
        pods = [p for p in self.api.list("v1", "Pod") if POD_LABEL in (p["metadata"].get("labels") or {})]
        live = {p["metadata"]["name"] for p in pods}
        servers = sum(1 for p in pods if p["metadata"]["labels"][POD_LABEL] == "server")
        self.most_servers_at_once = max(self.most_servers_at_once, servers)
        for gone in [n for n in self._bound if n not in live]:
            del self._bound[gone]  # deleted: its node's resources are free again
        for listed in pods:
            pod = self.api.get("v1", "Pod", listed["metadata"]["name"], listed["metadata"]["namespace"])
            if pod is None:
                continue
            self.pods_seen.setdefault(pod["metadata"]["name"], pod)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                self._bound.pop(pod["metadata"]["name"], None)
            elif pod["metadata"]["name"] not in self._bound:
                self._schedule(pod)
            elif pod["metadata"]["labels"][POD_LABEL] == "client" and phase == "Running":
                self._run_client(pod)

    def _schedule(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        node_name = _pinned_to(spec)
        nodes = self.api.list("v1", "Node")
        node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
        msg = self._unschedulable(pod, node, len(nodes))
        if msg is not None:
            st = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]}
            if pod.get("status") != st:
                self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], st)
            return
        assert node_name is not None
        busy = [n for n, where in self._bound.items() if where == node_name]
        if busy:
            self.overlaps.append((node_name, [*busy, meta["name"]]))
        self._bound[meta["name"]] = node_name
        self._start(pod, node_name)

    def _unschedulable(self, pod: Obj, node: Obj | None, total: int) -> str | None:
        """The scheduler's FitError text, or None when the pod fits its node.

        Each node's reason, counted and sorted as text (FitError.Error,
        sortReasonsHistogram), then what preemption found: victims could not
        make room for a taint or a node affinity ("not helpful"), nor for
        resources held by pods of the same priority ("No preemption victims").
        """
        reasons: dict[str, int] = {}
        preemption: dict[str, int] = {}
        useless = "Preemption is not helpful for scheduling"
        no_victims = "No preemption victims found for incoming pod"
        others = total - (node is not None)
        if others:
            reasons["node(s) didn't match Pod's node affinity/selector"] = others
            preemption[useless] = others
        if node is not None:
            untolerated = [t for t in (node.get("spec") or {}).get("taints") or []
                           if t.get("effect") in ("NoSchedule", "NoExecute")
                           and not any(_tolerates(tol, t) for tol in pod["spec"].get("tolerations") or [])]
            short = self._short(node, pod)
            if untolerated:
                t = untolerated[0]
                reasons[f"node(s) had untolerated taint {{{t['key']}: {t.get('value', '')}}}"] = 1
                preemption[useless] = preemption.get(useless, 0) + 1
            elif short:
                reasons[f"Insufficient {short}"] = 1
                preemption[no_victims] = 1
            else:
                return None

        def text(counts: dict[str, int]) -> str:
            return ", ".join(sorted(f"{n} {why}" for why, n in counts.items()))
        return (f"0/{total} nodes are available: {text(reasons)}. "
                f"preemption: 0/{total} nodes are available: {text(preemption)}.")

    def _short(self, node: Obj, pod: Obj) -> str | None:
        """The first extended resource the pod asks for beyond what the node has left."""
        held: dict[str, int] = {}
        for other in self.api.list("v1", "Pod"):
            if self._bound.get(other["metadata"]["name"]) == node["metadata"]["name"]:
                for res, qty in _requests(other).items():
                    held[res] = held.get(res, 0) + qty
        offer = (node.get("status") or {}).get("allocatable") or {}
        for res, qty in _requests(pod).items():
            if "/" in res and qty > int(offer.get(res, "0")) - held.get(res, 0):
                return res
        return None

    def _start(self, pod: Obj, node: str) -> None:
        """Multus attaches the networks, then the container starts (or cannot: an unknown network)."""
        meta = pod["metadata"]
        image = pod["spec"]["containers"][0]["image"]
        if image in self.unpullable:  # kubelet retries with a back-off (as tests/fake_gpu.py's runner)
            self._waiting(pod, "ImagePullBackOff", f'Back-off pulling image "{image}"')
            return
        wanted = (meta.get("annotations") or {}).get("k8s.v1.cni.cncf.io/networks", "")
        status: list[Obj] = [{"name": "ovn-kubernetes", "interface": "eth0", "default": True, "dns": {},
                              "ips": [f"10.128.{len(self._bound)}.{len(self._ips) + 10}"]}]
        known = self.networks()
        for i, net in enumerate(n.strip() for n in wanted.split(",") if n.strip()):
            target = net.partition("/")[0] if "/" in net else meta["namespace"]
            if target != meta["namespace"] and target not in MULTUS_GLOBAL:  # namespaceIsolation
                self.isolated.append(meta["name"])
                self._waiting(pod, "ContainerCreating", "")
                return
            cidr = known.get(net)
            if cidr is None:  # Multus cannot find the NetworkAttachmentDefinition: no sandbox
                self._waiting(pod, "ContainerCreating", "")
                return
            ip = str(cidr.network_address + len(self._ips) + 10)
            self._ips[meta["name"]] = ip
            status.append({"name": net, "interface": f"net{i + 1}", "ips": [ip], "dns": {},
                           "mac": "02:00:00:00:00:" + f"{len(self._ips):02x}"})
        current = self.api.get("v1", "Pod", meta["name"], meta["namespace"])
        assert current is not None
        notes = current["metadata"].setdefault("annotations", {})
        notes["k8s.v1.cni.cncf.io/network-status"] = json.dumps(status)
        self.api.put(current)
        container = pod["spec"]["containers"][0]
        self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], {
            "phase": "Running", "podIP": status[0]["ips"][0],
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [_state(container["name"], container["image"], True)]})
        if meta["labels"][POD_LABEL] == "server":
            self.api.pod_logs[(meta["namespace"], meta["name"], container["name"])] = (
                "\n************************************\n* Waiting for client to connect... *\n"
                "************************************\n")
        else:
            error = self._cannot_run(pod)
            if error is not None:
                self._end(pod, error, 1)

    def _waiting(self, pod: Obj, reason: str, message: str) -> None:
        meta, c = pod["metadata"], pod["spec"]["containers"][0]
        waiting = {"reason": reason, **({"message": message} if message else {})}
        st = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
              "containerStatuses": [{"name": c["name"], "ready": False, "restartCount": 0, "imageID": "",
                                     "image": c["image"], "state": {"waiting": waiting}}]}
        if pod.get("status") != st:
            self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], st)

    def _cannot_run(self, pod: Obj) -> str | None:
        container = pod["spec"]["containers"][0]
        argv = container.get("command") or []
        requests = _requests(pod)
        if not argv or argv[0] != "ib_write_bw":
            return f"the fake runs ib_write_bw only, not {argv!r}"
        if not any(r.startswith("rdma/") for r in requests):
            return " Unable to find the Infiniband/RoCE device\n"
        if "--use_cuda=0" in argv and not requests.get("nvidia.com/gpu"):
            return "initializing CUDA\nThere are no available device(s) that support CUDA\n"
        caps = ((container.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        if "IPC_LOCK" not in caps:
            return "Couldn't allocate MR\n"
        server = self._server_at(argv[-1])
        if server is None:
            return f"Couldn't connect to {argv[-1]}:{PERFTEST_PORT}\n Unable to init the socket connection\n"
        return None

    def _server_at(self, ip: str) -> Obj | None:
        for name, addr in self._ips.items():
            pod = self.pods_seen.get(name)
            if addr == ip and pod is not None and pod["metadata"]["labels"][POD_LABEL] == "server":
                current = self.api.get("v1", "Pod", name, pod["metadata"]["namespace"])
                if current is not None and (current.get("status") or {}).get("phase") == "Running":
                    return current
        return None

    def _run_client(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        argv = pod["spec"]["containers"][0]["command"]
        server = self._server_at(argv[-1])
        if server is None:
            self._end(pod, f"Couldn't connect to {argv[-1]}:{PERFTEST_PORT}\n", 1)
            return
        pair = frozenset((self._bound[server["metadata"]["name"]], self._bound[name]))
        if pair in self.hangs:
            return
        if pair in self.link_down:  # the addresses were exchanged over TCP, the RDMA link does not come up
            self._end(pod, " Unable to Connect the HCA's through the link\n", 1)
            self._end(server, " Unable to Connect the HCA's through the link\n", 1)
            return
        self._age[name] = self._age.get(name, 0) + 1
        if self._age[name] < 2:  # the test runs for a tick
            return
        gbps = self.bandwidth.get(pair, self.default_gbps)
        self.measured.append((self._bound[server["metadata"]["name"]], self._bound[name]))
        self._end(pod, report(argv, gbps, self.report_gbits), 0)
        self._end(server, report(argv, gbps, self.report_gbits, server=True), 0)

    def _end(self, pod: Obj, log: str, code: int) -> None:
        meta = pod["metadata"]
        container = pod["spec"]["containers"][0]
        key = (meta["namespace"], meta["name"], container["name"])
        self.api.pod_logs[key] = self.api.pod_logs.get(key, "") + log
        self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": container["name"], "image": container["image"], "ready": False,
                                   "restartCount": 0, "state": {"terminated": {
                                       "exitCode": code, "reason": "Completed" if code == 0 else "Error"}}}]})
        self._bound.pop(meta["name"], None)


def _state(name: str, image: str, ready: bool) -> Obj:
    return {"name": name, "image": image, "ready": ready, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


def _pinned_to(spec: Obj) -> str | None:
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field_ in term.get("matchFields") or []:
            pinned = (field_.get("key"), field_.get("operator")) == ("metadata.name", "In")
            if pinned and field_.get("values"):
                return str(field_["values"][0])
    return (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")


def _tolerates(tol: Obj, taint: Obj) -> bool:
    """core/v1 Toleration.ToleratesTaint: key (or Exists without key), value for Equal, effect if set."""
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if tol.get("key") and tol["key"] != taint.get("key"):
        return False
    if tol.get("operator", "Equal") == "Exists":
        return True
    return bool(tol.get("value", "") == taint.get("value", ""))


def _requests(pod: Obj) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in pod["spec"].get("containers") or []:
        for res, qty in ((c.get("resources") or {}).get("limits") or {}).items():
            if "/" in res:
                out[res] = out.get(res, 0) + int(qty)
    return out
