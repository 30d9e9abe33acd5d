"""Fake GPUDirect RDMA on the DGXs: NIC driver pods, the RDMA device plugin, nvidia-peermem, ib_write_bw pods.

A fake, hooked into the fake API server like tests/fake_gpu.py (a controller
run after every write and on every tick). It holds the installed state issue
26's verification reads, and runs the bandwidth test pods:

- NIC driver pods, as the Network Operator's DaemonSet makes them
  (Mellanox/network-operator manifests/state-ofed-driver/0050_ofed-driver-ds.yaml):
  name `mofed-<os><version>-<kernel hash>-ds-<suffix>`, labels `app` and
  `nvidia.com/ofed-driver: ""`, container `mofed-container` (and, with the
  Driver Toolkit on OpenShift, `openshift-driver-toolkit-ctr`). A driver that
  fails crash-loops with the log the test chooses.
- The RDMA shared device plugin's `rdma/<resourceName>` allocatable: the
  config's `rdmaHcaMax` (63 in the CSV's default NicClusterPolicy) on a node
  whose NIC driver is loaded, 0 otherwise.
- The GPU driver pod with `nvidia-peermem-ctr` when RDMA is enabled
  (NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml; controllers/
  object_controls.go transformPeerMemoryContainer drops the container when
  driver.rdma is off); the container logs what NVIDIA/gpu-driver-container
  rhel9/nvidia-driver `reload_nvidia_peermem` prints, and is ready only once
  the module loaded (its startup probe `probe_nvidia_peermem`).
- The scheduler for the test pods: node affinity on `metadata.name`, taints,
  and extended resources counted against what the node's other pods hold; a
  pod it cannot place stays Pending with PodScheduled False, reason
  Unschedulable, and the scheduler's message ("0/N nodes are available: ...",
  kubernetes pkg/scheduler/framework/types.go FitError.Error and the
  NodeResourcesFit / TaintToleration / NodeAffinity plugins' reasons).
- Multus: a pod asking for a known network (`k8s.v1.cni.cncf.io/networks`)
  gets the `k8s.v1.cni.cncf.io/network-status` annotation (the default
  network first, `default: true`, then `net1` on the secondary one with an
  address from its range); an unknown network leaves the pod ContainerCreating.
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
`measured` every pair whose client finished, as (server node, client node).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import fake_driver
from fake_gpu import KERNEL, RHCOS, FakeGpuCluster
from fake_perftest import PERFTEST_PORT, report

Obj = dict[str, Any]
POD_LABEL = "upi.openshift.io/rdma-bandwidth"  # what upi labels its test pods with (upi.gpu.rdma_perftest)
NIC_LABEL = "nvidia.com/ofed-driver"
DOCA_IMAGE = "nvcr.io/nvidia/mellanox/doca-driver:doca3.4.1-26.04-1.1.0.0-1-rhcos4.16-amd64"
DRIVER_IMAGE = "nvcr.io/nvidia/driver:580.95.05-rhcos4.16"
PEERMEM_WAITS = "waiting for mellanox ofed and nvidia drivers to be installed\n"
PEERMEM_LOADED = "successfully loaded nvidia-peermem module, now waiting for signal\n"
PEERMEM_FAILED = "failed to load nvidia-peermem module\n"


@dataclass
class RdmaSim:
    """A DGX's RDMA side: its fabric, its NIC driver, nvidia-peermem."""

    name: str
    fabric: str = "infiniband"
    gpus: int = 8
    rdma_devices: int = 63  # the shared device plugin's rdmaHcaMax
    nic_driver: bool = True  # False: a driver on the host (no NIC driver pod)
    nic_driver_error: str | None = None  # the NIC driver's log when it fails (CrashLoopBackOff)
    peermem: str = "loaded"  # loaded | absent (driver.rdma off) | failing
    taints: list[Obj] = field(default_factory=list)


class FakeRdma:
    """The RDMA side of a fake GPU cluster (a fake): installed state plus the bandwidth pods' runner."""

    def __init__(self, cluster: FakeGpuCluster, sims: list[RdmaSim], *,
                 resource: str = "rdma_shared_device_a", networks: dict[str, str] | None = None,
                 gpu_namespace: str = "nvidia-gpu-operator",
                 network_namespace: str = "nvidia-network-operator") -> None:
        self.api = api = cluster.api
        cluster.foreign_pods.add(POD_LABEL)  # the GPU fake's pod runner leaves the test pods to this one
        self.sims = {s.name: s for s in sims}
        self.resource = f"rdma/{resource}"
        # Secondary networks Multus knows (`ns/name`) -> the first three octets of their range.
        self.networks = networks or {f"{network_namespace}/rdma-ib": "192.168.100",
                                     f"{network_namespace}/rdma-roce": "192.168.200"}
        self.gpu_namespace, self.network_namespace = gpu_namespace, network_namespace
        self.bandwidth: dict[frozenset[str], float] = {}  # per pair of nodes; default_gbps otherwise
        self.default_gbps = 392.0
        self.report_gbits = True
        self.hangs: set[frozenset[str]] = set()  # pairs whose test never ends
        self.link_down: set[frozenset[str]] = set()  # pairs whose QPs cannot connect (write_bw.c)
        self.unpullable: set[str] = set()  # images the registry does not hold (a disconnected mirror lacks)
        self.overlaps: list[tuple[str, list[str]]] = []
        self.measured: list[tuple[str, str]] = []
        self.most_servers_at_once = 0  # test servers that existed together (pairs of a round run at once)
        self.pods_seen: dict[str, Obj] = {}  # every test pod as created, by name
        self._bound: dict[str, str] = {}  # test pod -> node it runs on
        self._ips: dict[str, str] = {}  # test pod -> its secondary address
        self._age: dict[str, int] = {}
        self._seed()
        api.controllers.append(self.tick)

    # --- installed state --------------------------------------------------------------
    def _seed(self) -> None:
        for ns in (self.gpu_namespace, self.network_namespace):
            self.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for sim in self.sims.values():
            node = self.api.get("v1", "Node", sim.name)
            assert node is not None, f"FakeRdma: {sim.name} is not a node of the fake cluster"
            loaded = sim.nic_driver_error is None
            node["status"]["allocatable"].update({"nvidia.com/gpu": str(sim.gpus),
                                                  self.resource: str(sim.rdma_devices if loaded else 0)})
            node["metadata"].setdefault("labels", {})["nvidia.com/gpu.present"] = "true"
            if sim.taints:
                node["spec"]["taints"] = sim.taints
            self.api.put(node)
            if sim.nic_driver:
                self._nic_pod(sim)
            self._gpu_driver_pod(sim)

    def _nic_pod(self, sim: RdmaSim) -> None:
        kernel_hash = hashlib.sha256(KERNEL.encode()).hexdigest()[:8]  # getStringHash(kernel)
        app = f"mofed-rhcos4.16-{kernel_hash}"
        name = f"{app}-ds-{hashlib.sha256(sim.name.encode()).hexdigest()[:5]}"
        ns = self.network_namespace
        containers = [{"name": "mofed-container", "image": DOCA_IMAGE},
                      {"name": "openshift-driver-toolkit-ctr", "image": "quay.io/openshift-release-dev/dtk"}]
        self.api.put({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app, NIC_LABEL: ""},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": f"{app}-ds", "uid": "", "controller": True}]},
            "spec": {"nodeName": sim.name, "hostNetwork": True, "containers": containers},
        })
        failed = sim.nic_driver_error is not None
        mofed = _state("mofed-container", DOCA_IMAGE, not failed, crashing=failed)
        dtk = _state("openshift-driver-toolkit-ctr", containers[1]["image"], True)
        self.api.set_status("v1", "Pod", name, ns, {"phase": "Running", "containerStatuses": [mofed, dtk]})
        self.api.pod_logs[(ns, name, "mofed-container")] = sim.nic_driver_error or (
            "Starting driver container\nLoading driver modules\nDriver container is ready\n")

    def _gpu_driver_pod(self, sim: RdmaSim) -> None:
        ds = fake_driver.daemonset(self.gpu_namespace, RHCOS, DRIVER_IMAGE, DRIVER_IMAGE)
        if sim.peermem != "absent":  # transformPeerMemoryContainer keeps it only with driver.rdma enabled
            ds["spec"]["template"]["spec"]["containers"].append(
                {"name": "nvidia-peermem-ctr", "image": DRIVER_IMAGE, "command": ["nvidia-driver"],
                 "args": ["reload_nvidia_peermem"]})
        pod = fake_driver.pod_for(ds, sim.name)
        name = pod["metadata"]["name"]
        self.api.put(pod)
        st, logs = fake_driver.run(pod, build_error=None, load_error=None, image_pull_fails=False,
                                   stalled=None)
        if sim.peermem != "absent":
            ok = sim.peermem == "loaded" and sim.nic_driver_error is None
            st["containerStatuses"].append(_state("nvidia-peermem-ctr", DRIVER_IMAGE, ok,
                                                  crashing=sim.peermem == "failing"))
            logs["nvidia-peermem-ctr"] = PEERMEM_WAITS + (PEERMEM_LOADED if ok else PEERMEM_FAILED
                                                          if sim.peermem == "failing" else PEERMEM_WAITS)
        self.api.set_status("v1", "Pod", name, self.gpu_namespace, st)
        for container, text in logs.items():
            self.api.pod_logs[(self.gpu_namespace, name, container)] = text

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
        for i, net in enumerate(n.strip() for n in wanted.split(",") if n.strip()):
            prefix = self.networks.get(net)
            if prefix is None:  # Multus cannot find the NetworkAttachmentDefinition: no sandbox
                self._waiting(pod, "ContainerCreating", "")
                return
            ip = f"{prefix}.{len(self._ips) + 10}"
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


def _state(name: str, image: str, ready: bool, *, crashing: bool = False) -> Obj:
    if crashing:
        return {"name": name, "image": image, "ready": False, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": f"back-off 1m20s restarting failed container={name}"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
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
