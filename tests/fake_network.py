"""A FAKE NVIDIA Network Operator: what it does to a cluster once OLM has installed its CSV.

No operator runs here, so this acts on the fake API server's store as the real
one acts on a cluster, from the real CSV and CRDs (tests/data/network/: the
kinds are served only once the CSV's InstallPlan ran, and every object upi
sends is validated against the CRDs by tests/fake_apiserver.py). Upstream,
Mellanox/network-operator (fetched; the tag the CRDs come from, v26.4.1):

- api/v1alpha1/nicclusterpolicy_types.go: `status.state` is one of ready,
  notReady, ignore, error; `status.appliedStates[]` holds `{name, state, message}`
  per deployed component.
- pkg/state/state_ofed.go: the NIC driver's state is `state-OFED`; its DaemonSet
  (manifests/state-ofed-driver/0050_ofed-driver-ds.yaml) is named
  `mofed-<os id><os version>-<kernel hash>-ds` (hash: FNV-32a of the kernel,
  written with apimachinery's rand.SafeEncodeString, pkg/state/state_skel.go
  getStringHash), its pods labelled `app: mofed-...` and `nvidia.com/ofed-driver: ""`,
  the container `mofed-container`; the DaemonSet selects nodes by NFD's
  `feature.node.kubernetes.io/pci-15b3.present: "true"`, os-release ID/VERSION_ID
  and kernel-version.full labels (pkg/nodeinfo/attributes.go), and the
  NicClusterPolicy's `nodeAffinity`.
- pkg/state/state_rdma_shared_device_plugin.go: state `state-RDMA-device-plugin`,
  DaemonSet `rdma-shared-dp-ds`. The plugin (Mellanox/k8s-rdma-shared-dev-plugin
  pkg/types) reads `configList[]` of `{resourceName, rdmaHcaMax, selectors}` and
  offers `rdma/<resourceName>` with rdmaHcaMax shared slots on a node where a
  device matches every selector given (here: vendors, ifNames, linkTypes).
- pkg/state/state_ipoib_cni.go: `state-ipoib-cni`; state_ipoib_network.go and
  state_macvlan_network.go: an IPoIBNetwork / MacvlanNetwork gets
  `status.state: ready` and the NetworkAttachmentDefinition it made
  (`<networkNamespace>/<name>`) in `ipoibNetworkAttachmentDef` / `macvlanNetworkAttachmentDef`.

The driver container's log lines here are made up for the tests (a build, a
load, and on failure the build's own error output last): upi only shows the
last lines, it never parses them. The fault knobs: `failing[node]` makes that
node's driver container crash with that log; `hanging` keeps a node's driver
building forever (for the timeout path).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

from fake_apiserver import FakeApiServer, Obj

OLM = "operators.coreos.com/v1alpha1"
MELLANOX = "mellanox.com/v1alpha1"
NIC_POLICY = "nic-cluster-policy"
NFD = "feature.node.kubernetes.io/"
MLNX_LABEL = NFD + "pci-15b3.present"
OS_ID, OS_VERSION, KERNEL_FULL = (NFD + "system-os_release.ID", NFD + "system-os_release.VERSION_ID",
                                  NFD + "kernel-version.full")
DRIVER_LABEL = "nvidia.com/ofed-driver"
CONTAINER = "mofed-container"
# A DGX H100's eight ConnectX-7 InfiniBand ports, as RHCOS names them.
IB_PORTS = ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0"]
SAFE = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand alphanums (no vowels, no 0/1/3)

DRIVER_START = (
    "[INFO] Starting DOCA driver container\n[INFO] Kernel version: {kernel}\n"
    "[INFO] Building DOCA driver for kernel {kernel} with the Driver Toolkit\n")
DRIVER_LOADED = (
    "[INFO] Unloading storage modules\n[INFO] Restarting openibd (mlx5_core, mlx5_ib, ib_core)\n"
    "[INFO] DOCA driver loaded successfully\n[INFO] Driver container is ready; touching "
    "/run/mellanox/drivers/.driver-ready\n")
DRIVER_FAILED = "[ERROR] Driver installation failed\n"


def kernel_hash(kernel: str) -> str:
    """getStringHash: FNV-32a, its decimal digits mapped by rand.SafeEncodeString."""
    h = 0x811C9DC5
    for byte in kernel.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE[b % len(SAFE)] for b in str(h).encode())


@dataclass
class FakeNetworkOperator:
    """The Network Operator's controller over the fake store (a fake); `tick` runs after every write."""

    api: FakeApiServer
    ports: dict[str, list[str]] = field(default_factory=dict)  # node -> its fabric netdevs
    link: dict[str, str] = field(default_factory=dict)  # node -> infiniband | ether (default infiniband)
    failing: dict[str, str] = field(default_factory=dict)  # node -> the driver build's error output
    hanging: set[str] = field(default_factory=set)  # nodes whose driver never gets ready

    def driver_ready(self, node: str) -> bool:
        """Whether the NIC driver is loaded on the node (the GPU driver's peermem container waits for it)."""
        for pod in self.api.list("v1", "Pod"):
            labels = pod["metadata"].get("labels") or {}
            if DRIVER_LABEL in labels and pod["spec"].get("nodeName") == node:
                return all(s.get("ready") for s in (pod.get("status") or {}).get("containerStatuses") or [])
        return False

    def _csv(self) -> Obj | None:
        return next((c for c in self.api.list(OLM, "ClusterServiceVersion")
                     if c["metadata"]["name"].startswith("nvidia-network-operator.")
                     and (c.get("status") or {}).get("phase") == "Succeeded"), None)

    def tick(self) -> None:
        csv = self._csv()
        if csv is None:
            return
        ns = csv["metadata"]["namespace"]
        policy = self.api.get(MELLANOX, "NicClusterPolicy", NIC_POLICY)
        if policy is not None:
            self._policy(ns, policy)
        for kind, key in (("IPoIBNetwork", "ipoibNetworkAttachmentDef"),
                          ("MacvlanNetwork", "macvlanNetworkAttachmentDef")):
            for net in self.api.list(MELLANOX, kind):
                nad = f"{net['spec'].get('networkNamespace', 'default')}/{net['metadata']['name']}"
                st = {"state": "ready", key: nad}
                if net.get("status") != st:
                    self.api.set_status(MELLANOX, kind, net["metadata"]["name"], "", st)

    # --- the NicClusterPolicy's components ------------------------------------------------
    def _nodes(self, spec: Obj) -> list[Obj]:
        """Nodes the DaemonSets land on: NFD's Mellanox label, and the policy's nodeAffinity."""
        allowed: set[str] | None = None
        required = ((spec.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
                    or {})
        for term in required.get("nodeSelectorTerms") or []:
            for expr in term.get("matchExpressions") or []:
                if expr.get("key") == "kubernetes.io/hostname" and expr.get("operator") == "In":
                    allowed = (allowed or set()) | set(expr.get("values") or [])
        return [n for n in self.api.list("v1", "Node")
                if (n["metadata"].get("labels") or {}).get(MLNX_LABEL) == "true"
                and (allowed is None or n["metadata"]["name"] in allowed)]

    def _policy(self, ns: str, policy: Obj) -> None:
        spec = policy["spec"]
        nodes = self._nodes(spec)
        states: list[Obj] = []
        loaded: set[str] = set()
        if spec.get("ofedDriver"):
            state, loaded = self._ofed(ns, spec["ofedDriver"], nodes)
            states.append(state)
        if spec.get("rdmaSharedDevicePlugin"):
            states.append(self._device_plugin(spec["rdmaSharedDevicePlugin"], nodes, loaded, spec))
        if (spec.get("secondaryNetwork") or {}).get("ipoib"):
            states.append({"name": "state-ipoib-cni", "state": "ready"})
        overall = "ready" if all(s["state"] == "ready" for s in states) else "notReady"
        st = {"state": overall, "appliedStates": states}
        if policy.get("status") != st:
            self.api.set_status(MELLANOX, "NicClusterPolicy", NIC_POLICY, "", st)

    def _ofed(self, ns: str, drv: Obj, nodes: list[Obj]) -> tuple[Obj, set[str]]:
        image = f"{drv.get('repository')}/{drv.get('image')}:{drv.get('version')}"
        loaded: set[str] = set()
        waiting: list[str] = []
        for node in nodes:
            name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
            kernel = labels.get(KERNEL_FULL)
            if not kernel or not labels.get(OS_ID):  # the DaemonSet's nodeSelector needs NFD's labels
                waiting.append(name)
                continue
            app = f"mofed-{labels[OS_ID]}{labels.get(OS_VERSION, '')}-{kernel_hash(kernel)}"
            self._daemonset(ns, app, image)
            if self._driver_pod(ns, app, image, name, kernel):
                loaded.add(name)
            else:
                waiting.append(name)
        if not nodes:
            return {"name": "state-OFED", "state": "notReady",
                    "message": f"no node with a Mellanox NIC ({MLNX_LABEL})"}, loaded
        if waiting:
            return {"name": "state-OFED", "state": "notReady",
                    "message": f"driver pods not ready on: {', '.join(waiting)}"}, loaded
        return {"name": "state-OFED", "state": "ready"}, loaded

    def _daemonset(self, ns: str, app: str, image: str) -> None:
        ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": f"{app}-ds", "namespace": ns,
                           "labels": {"app": app, DRIVER_LABEL: "", "mofed-ds-format-version": "1"}},
              "spec": {"selector": {"matchLabels": {"app": app}},
                       "template": {"metadata": {"labels": {"app": app, DRIVER_LABEL: ""}},
                                    "spec": {"containers": [{"name": CONTAINER, "image": image}]}}}}
        if self.api.get("apps/v1", "DaemonSet", f"{app}-ds", ns) is None:
            self.api.put(ds)

    def _driver_pod(self, ns: str, app: str, image: str, node: str, kernel: str) -> bool:
        name = f"{app}-ds-{kernel_hash(node)[:5]}"
        if self.api.get("v1", "Pod", name, ns) is None:
            owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": f"{app}-ds", "uid": "",
                     "controller": True}
            self.api.put({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner],
                                       "labels": {"app": app, DRIVER_LABEL: "", "kernel": kernel}},
                          "spec": {"nodeName": node, "containers": [{"name": CONTAINER, "image": image}]}})
        log = DRIVER_START.format(kernel=kernel)
        running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
        if node in self.failing:
            log += self.failing[node] + DRIVER_FAILED
            status = {"name": CONTAINER, "image": image, "ready": False, "restartCount": 4,
                      "state": {"waiting": {"reason": "CrashLoopBackOff", "message": (
                          f"back-off 1m20s restarting failed container={CONTAINER}")}},
                      "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
        elif node in self.hanging:
            log += "[INFO] Compiling DOCA driver kernel modules...\n"
            status = {"name": CONTAINER, "image": image, "ready": False, "restartCount": 0, "state": running}
        else:
            log += DRIVER_LOADED
            status = {"name": CONTAINER, "image": image, "ready": True, "restartCount": 0, "state": running}
        st = {"phase": "Running", "containerStatuses": [status],
              "conditions": [{"type": "Ready", "status": "True" if status["ready"] else "False"}]}
        pod = self.api.get("v1", "Pod", name, ns) or {}
        if pod.get("status") != st:
            self.api.set_status("v1", "Pod", name, ns, st)
        self.api.pod_logs[(ns, name, CONTAINER)] = log
        return bool(status["ready"])

    def _device_plugin(self, plugin: Obj, nodes: list[Obj], loaded: set[str], spec: Obj) -> Obj:
        try:
            config = json.loads(plugin.get("config") or "{}")
        except json.JSONDecodeError as exc:
            return {"name": "state-RDMA-device-plugin", "state": "error", "message": f"bad config: {exc}"}
        for node in nodes:
            name = node["metadata"]["name"]
            offer: dict[str, str] = {}
            for entry in config.get("configList") or []:
                # The RDMA devices exist once the NIC driver is loaded (or with no ofedDriver, the inbox one).
                up = name in loaded or not spec.get("ofedDriver")
                found = up and self._matches(name, entry.get("selectors") or {})
                offer[f"rdma/{entry['resourceName']}"] = str(entry.get("rdmaHcaMax", 0)) if found else "0"
            have = node["status"].get("allocatable") or {}
            if any(have.get(k) != v for k, v in offer.items()):
                new = copy.deepcopy(node)
                new["status"]["allocatable"].update(offer)
                self.api.put(new)
        return {"name": "state-RDMA-device-plugin", "state": "ready"}

    def _matches(self, node: str, selectors: Obj) -> bool:
        """Whether one of the node's ConnectX ports passes every selector given."""
        link = self.link.get(node, "infiniband")
        for port in self.ports.get(node, IB_PORTS):
            if selectors.get("vendors") and "15b3" not in selectors["vendors"]:
                continue
            if selectors.get("ifNames") and port not in selectors["ifNames"]:
                continue
            if selectors.get("linkTypes") and link not in selectors["linkTypes"]:
                continue
            return True
        return False

