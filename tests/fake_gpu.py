"""Fake GPU day-2 operators: what NFD and the NVIDIA GPU Operator do to a cluster, OLM installing them.

This is a fake, not a mock: it implements the operators' behaviour against the
objects in the fake API server, so upi's flow meets the same state changes a
real cluster would show. Sources: NVIDIA's OpenShift GPU Operator docs
(install-nfd, install-gpu-ocp, troubleshooting-gpu-ocp); OLM's
operator-framework/operator-lifecycle-manager (tests/fake_olm.py, the CSVs
the real ones' facts, tests/data/); NVIDIA/gpu-operator for the driver pods
(tests/fake_driver.py); what validation images print (tests/fake_images.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fake_driver
import fake_images
import yaml
from fake_apiserver import FakeApiServer, Obj
from fake_mco import FakeMco
from fake_network import FakeNetworkOperator
from fake_olm import MARKETPLACE, OLM, FakeOlm
from fake_rdma import POD_LABEL, FakeRdma
from fake_thanos import FakeThanos

NFD_PREFIX = "feature.node.kubernetes.io/"
# MIG devices per GPU of the uniform `all-<profile>` layouts on an H100/H200 (80/141 GB).
MIG_SLICES = {"1g.10gb": 7, "1g.18gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
# nfd-worker's defaults when the config names none (upstream pci source).
DEFAULT_CLASSES = ["03", "0b40", "12"]
DEFAULT_FIELDS = ["class", "vendor"]


def nfd_labels(config_data: str | None, devices: list[dict[str, str]]) -> dict[str, str]:
    """The PCI labels nfd-worker publishes for `devices` under a worker config.

    A device counts when its class starts with a whitelisted class; the label
    joins the device's `deviceLabelFields` values with `_`.
    """
    config = (yaml.safe_load(config_data) if config_data else None) or {}
    pci: dict[str, Any] = ((config.get("sources") or {}).get("pci")) or {}
    classes = [str(c) for c in pci.get("deviceClassWhitelist") or DEFAULT_CLASSES]
    fields = [str(f) for f in pci.get("deviceLabelFields") or DEFAULT_FIELDS]
    labels = {}
    for dev in devices:
        if any(dev["class"].startswith(c) for c in classes):
            name = "_".join(dev[f] for f in fields)
            labels[f"{NFD_PREFIX}pci-{name}.present"] = "true"
    return labels


# --- the fake cluster: API server + OLM + NFD + GPU Operator + pod runner ----------------

NVIDIA_PCI = {"class": "0302", "vendor": "10de", "device": "2330"}
MELLANOX_PCI = {"class": "0207", "vendor": "15b3", "device": "101d"}
# What modprobe prints when Secure Boot refuses the unsigned module (in nvidia-driver-ctr's log).
DRIVER_LOAD_FAIL = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
RHCOS = "416.94.202406251923-0"  # the nodes' RHCOS build (NFD's OSTREE_VERSION label)
# The kubelet's uname -r in status.nodeInfo.kernelVersion (k8s core/v1 NodeSystemInfo): RHCOS 4.16's kernel.
KERNEL = "5.14.0-427.26.1.el9_4.x86_64"
DTK_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "5e" * 32
REGISTRY_STALL = (
    "Waiting for the build-dockercfg secret of serviceaccount nvidia-driver in nvidia-gpu-operator\n"
    "OpenShift DriverToolkit was requested but could not be enabled: image registry has no storage\n"
)


@dataclass
class SimNode:
    """A simulated machine: its PCI devices and what goes wrong on it."""

    name: str
    gpus: int = 0
    ready: bool = True
    secure_boot: bool = False
    allocatable_gpus: int | None = None  # None: every GPU is offered
    validation_fails: str | None = None  # what a CUDA program prints here when CUDA cannot start
    build_error: str | None = None  # the driver build fails with this compiler output
    load_error: str | None = None  # the built driver fails to load with this modprobe output
    driver_image_pull: bool = False  # the driver image cannot be pulled on this node
    mig_fails: bool = False  # the MIG manager cannot apply the node's layout
    validation_hangs: bool = False  # the validation image cannot be pulled on this node
    diag_fails: tuple[int, str] | None = None  # (GPU index, DCGM test) that fails `dcgmi diag` here
    peermem_fails: bool = False  # nvidia-peermem never loads here (the peermem script keeps waiting)
    rhcos: str = RHCOS
    product: str = "NVIDIA-H100-80GB-HBM3"
    devices: list[dict[str, str]] = field(default_factory=list)


class FakeGpuCluster:
    """An OpenShift cluster as the GPU day-2 flow meets it, over the real protocol (a fake).

    `csv_succeeds[pkg] = False` keeps a CSV Installing forever; `registry_storage=False`
    is the bare-metal default that stalls the driver build on 4.15+.
    """

    def __init__(self, workdir: Path, nodes: list[SimNode], *, version: str = "4.16.12") -> None:
        self.api = FakeApiServer(workdir)
        self.nodes = {n.name: n for n in nodes}
        self.version = version
        self.registry_storage = True
        self.peermem_restarts: list[str] = []  # GPU driver pods replaced because the rdma setting changed
        self.validation_pods: list[Obj] = []
        self.diag_pods: list[Obj] = []  # upi's DCGM diagnostic pods (`dcgmi diag`)
        self.most_validation_pods_at_once = 0  # upi's validation pods seen together in one tick
        self.foreign_pods: set[str] = {POD_LABEL}  # labels of pods another fake runs (tests/fake_rdma.py)
        self._mig_seen: dict[str, str] = {}
        self._mig_lag: dict[str, int] = {}
        self.mig_lag = 0  # controller runs before the MIG manager notices a changed profile
        self.olm = FakeOlm(self.api)  # Subscriptions, InstallPlans and CSVs (tests/fake_olm.py)
        self._seed()
        self.mco = FakeMco(self.api)  # the GPU pool's MachineConfigPool rollout (tests/fake_mco.py)
        self.mco.seed()
        # The cluster's monitoring: the Thanos querier route over the GPU series (tests/fake_thanos.py).
        self.thanos = FakeThanos(workdir / "thanos", self.api, {n.name: n.gpus for n in nodes})
        self.thanos.seed()
        # The operators' CRDs exist only once OLM has run their InstallPlans.
        self.api.withhold("nfd.openshift.io/v1", "NodeFeatureDiscovery")
        self.api.withhold("nvidia.com/v1", "ClusterPolicy")
        for kind in ("NicClusterPolicy", "NicNodePolicy", "HostDeviceNetwork", "IPoIBNetwork",
                     "MacvlanNetwork"):
            self.api.withhold("mellanox.com/v1alpha1", kind)
        # The Network Operator (tests/fake_network.py) before the GPU Operator: peermem waits for its driver.
        self.network = FakeNetworkOperator(self.api)
        # upi's RDMA bandwidth test pods: SCC admission, scheduler, Multus over the networks above, perftest.
        self.rdma = FakeRdma(self.api)
        self.api.controllers += [self.mco.tick, self.olm.tick, self._nfd, self.network.tick,
                                 self._gpu_operator, self._pods, self.rdma.tick]

    def start(self) -> FakeGpuCluster:
        self.api.start()
        self.thanos.start()
        return self

    def stop(self) -> None:
        self.api.stop()  # first: its controllers stop acting the moment the test is done
        self.thanos.stop()

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig

    @property
    def csv_succeeds(self) -> dict[str, bool]:
        """Per package, whether its CSV may succeed (tests/fake_olm.py)."""
        return self.olm.csv_succeeds

    @property
    def approved_plans(self) -> list[str]:
        """The InstallPlans OLM ran once approved, in order (tests/fake_olm.py)."""
        return self.olm.approved_plans

    # --- seed: what an installed OpenShift cluster already holds ---------------------
    def _seed(self) -> None:
        put = self.api.put
        for ns in ("openshift", MARKETPLACE, "default"):
            put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        put(
            {
                "apiVersion": "config.openshift.io/v1",
                "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"channel": "stable-4.16"},
                "status": {
                    "desired": {"version": self.version},
                    "history": [{"state": "Completed", "version": self.version}],
                },
            }
        )
        put(
            {
                "apiVersion": "imageregistry.operator.openshift.io/v1",
                "kind": "Config",
                "metadata": {"name": "cluster"},
                "spec": {"managementState": "Managed", "storage": {"pvc": {"claim": "registry"}}},
            }
        )
        put(
            {
                "apiVersion": "image.openshift.io/v1",
                "kind": "ImageStream",
                "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
                # One tag per RHCOS build, as the release payload ships it (gpu-operator
                # controllers/object_controls.go ocpHasDriverToolkitImageStream reads them).
                "spec": {"tags": [{"name": t, "from": {"kind": "DockerImage", "name": DTK_IMAGE}}
                                  for t in sorted({*(n.rhcos for n in self.nodes.values()), "latest"})]},
            }
        )
        self.olm.seed()  # the catalogs and their packages (tests/fake_olm.py)
        for sim in self.nodes.values():
            self._register(sim)

    def _register(self, sim: SimNode) -> None:
        """The machine's kubelet registers its Node (its PCI devices are what NFD will find)."""
        sim.devices = [dict(NVIDIA_PCI)] * sim.gpus + [dict(MELLANOX_PCI)]
        self.api.put(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": sim.name,
                    "labels": {"kubernetes.io/hostname": sim.name, "node-role.kubernetes.io/worker": ""},
                },
                "spec": {},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True" if sim.ready else "False"}],
                    "allocatable": {"cpu": "224", "memory": "2063772Mi", "pods": "250"},
                    "nodeInfo": {"osImage": "Red Hat Enterprise Linux CoreOS 416.94",
                                 "kernelVersion": KERNEL},
                },
            }
        )

    def join(self, sim: SimNode) -> None:
        """A machine added on day 2 joins: its Node registers, then the operators act on it as on any."""
        with self.api.lock:
            self._register(sim)
            self.nodes[sim.name] = sim
            self.thanos.gpus[sim.name] = sim.gpus  # its dcgm-exporter is scraped like any node's

    def set_registry_storage(self, configured: bool) -> None:
        spec = (
            {"managementState": "Managed", "storage": {"pvc": {"claim": "registry"}}}
            if configured
            else {"managementState": "Managed", "storage": {}}
        )
        cfg = self.api.get("imageregistry.operator.openshift.io/v1", "Config", "cluster")
        assert cfg is not None
        cfg["spec"] = spec
        self.api.put(cfg)
        self.registry_storage = configured

    # --- NFD: label nodes by their PCI devices -------------------------------------------
    def _nfd(self) -> None:
        if not self.olm.operator_ready("nfd."):
            return
        for nfd in self.api.list("nfd.openshift.io/v1", "NodeFeatureDiscovery"):
            config = (nfd["spec"].get("workerConfig") or {}).get("configData")
            for sim in self.nodes.values():
                if self.api.get("v1", "Node", sim.name) is None:
                    continue  # not joined (yet): a node `upi nodes add` brings in later
                # nfd-worker's system source publishes os-release's OSTREE_VERSION on RHCOS.
                found = nfd_labels(config, sim.devices)
                # The system and kernel sources' labels (the Network Operator's driver selects by them).
                system = {f"{NFD_PREFIX}system-os_release.ID": "rhcos",
                          f"{NFD_PREFIX}system-os_release.VERSION_ID": self._os_version(),
                          f"{NFD_PREFIX}kernel-version.full": KERNEL}
                self._label(sim.name, {**found, **system, fake_driver.OSTREE_LABEL: sim.rhcos})

    def _label(self, name: str, labels: dict[str, str], allocatable: dict[str, str] | None = None) -> None:
        node = self.api.get("v1", "Node", name)
        assert node is not None
        new = copy.deepcopy(node)
        new["metadata"].setdefault("labels", {}).update(labels)
        if allocatable:
            new["status"]["allocatable"].update(allocatable)
        if new != node:
            self.api.put(new)

    # --- the GPU Operator: ClusterPolicy -> driver, labels, allocatable --------------------
    def _gpu_operator(self) -> None:
        if not self.olm.operator_ready("gpu-operator-certified."):
            return
        policy = self.api.get("nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy")
        if policy is None:
            return
        ns = next(
            c["metadata"]["namespace"]
            for c in self.api.list(OLM, "ClusterServiceVersion")
            if c["metadata"]["name"].startswith("gpu-operator-certified.")
        )
        ok = True
        for sim in self.nodes.values():
            node = self.api.get("v1", "Node", sim.name)
            if node is None:
                continue  # not joined (yet)
            labels = node["metadata"].get("labels") or {}
            if not any(labels.get(k) == "true" for k in PCI_FORMS):
                continue
            if not self._driver_pod(ns, policy, sim, labels.get(fake_driver.OSTREE_LABEL)):
                ok = False
                continue
            count = sim.gpus if sim.allocatable_gpus is None else sim.allocatable_gpus
            labels = {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": sim.product,
                "nvidia.com/gpu.count": str(sim.gpus),
                "nvidia.com/cuda.driver.major": "580",
            }
            allocatable = {"nvidia.com/gpu": str(count)}
            self._mig(ns, sim, labels, allocatable, ((policy["spec"].get("mig") or {}).get("strategy")))
            self._label(sim.name, labels, allocatable)
        state = "ready" if ok else "notReady"
        if (policy.get("status") or {}).get("state") != state:
            self.api.set_status(
                "nvidia.com/v1", "ClusterPolicy", "gpu-cluster-policy", "", {"state": state, "namespace": ns}
            )

    def _mig(self, ns: str, sim: SimNode, labels: dict[str, str], allocatable: dict[str, str],
             strategy: str | None) -> None:
        """The MIG manager: apply the node's nvidia.com/mig.config, pending first, then success or failed."""
        node = self.api.get("v1", "Node", sim.name) or {}
        current = node.get("metadata", {}).get("labels") or {}
        profile = current.get("nvidia.com/mig.config")
        if not profile or profile == "all-disabled":
            return
        if self._mig_seen.get(sim.name) != profile:  # a new layout: the manager starts on it
            lag = self._mig_lag.get(sim.name, 0)
            if lag < self.mig_lag:  # not noticed yet: the node keeps its old layout and state
                self._mig_lag[sim.name] = lag + 1
                labels.update({k: v for k, v in current.items()
                               if k in ("nvidia.com/gpu.product", "nvidia.com/mig.config.state")})
                allocatable.update({k: v for k, v in node["status"]["allocatable"].items()
                                    if k.startswith("nvidia.com/")})
                return
            self._mig_lag.pop(sim.name, None)
            self._mig_seen[sim.name] = profile
            labels["nvidia.com/mig.config.state"] = "pending"
            return
        per_gpu = MIG_SLICES.get(profile.removeprefix("all-"))
        if sim.mig_fails or per_gpu is None:
            labels["nvidia.com/mig.config.state"] = "failed"
            self._mig_manager_pod(ns, sim.name, profile)
            return
        labels["nvidia.com/mig.config.state"] = "success"
        devices = int(allocatable["nvidia.com/gpu"]) * per_gpu
        if strategy == "mixed":
            name = f"nvidia.com/mig-{profile.removeprefix('all-')}"
            allocatable.update({"nvidia.com/gpu": "0", name: str(devices)})
        else:
            allocatable["nvidia.com/gpu"] = str(devices)
            labels["nvidia.com/gpu.product"] = f"{sim.product}-MIG-{profile.removeprefix('all-')}"

    def _mig_manager_pod(self, ns: str, node: str, profile: str) -> None:
        # Labelled as gpu-operator assets/state-mig-manager/0600_daemonset.yaml labels its pods.
        name = f"nvidia-mig-manager-{node}"
        if self.api.get("v1", "Pod", name, ns) is None:
            self.api.put({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": {"app": "nvidia-mig-manager"}},
                "spec": {"nodeName": node, "containers": [
                    {"name": "nvidia-mig-manager",
                     "image": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"}]},
                "status": {"phase": "Running"},
            })
        self.api.pod_logs[(ns, name, "nvidia-mig-manager")] = (
            f"Updating to MIG config: {profile}\nApplying MIG mode change...\n"
            "Error: unable to reset GPU 0000:1b:00.0: In use by another client\n"
            "Changing the 'nvidia.com/mig.config.state' node label to 'failed'\n")

    def _os_version(self) -> str:
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return f"{major}.{minor}"

    def _os_tag(self) -> str:
        # The driver image's tag suffix by release (NVIDIA's OpenShift docs).
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return f"rhcos{major}.{minor}" if (major, minor) <= (4, 18) else "rhel9.6"

    def _stalled(self) -> str | None:
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return REGISTRY_STALL if (major, minor) >= (4, 15) and not self.registry_storage else None

    def _driver_pod(self, ns: str, policy: Obj, sim: SimNode, rhcos: str | None) -> bool:
        """The node's driver pod, as the operator's DaemonSet makes it; whether its driver is loaded."""
        requested = ((policy["spec"].get("operator") or {}).get("use_ocp_driver_toolkit")) is True
        stream = self.api.get("image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift")
        tags = {t["name"] for t in ((stream or {}).get("spec") or {}).get("tags") or []}
        dtk = requested and rhcos is not None and rhcos in tags
        csv = next(c for c in self.api.list(OLM, "ClusterServiceVersion", ns)
                   if c["metadata"]["name"].startswith("gpu-operator-certified."))
        image = fake_driver.driver_image(policy, csv["spec"]["relatedImages"], self._os_tag())
        gpudirect = (policy["spec"].get("driver") or {}).get("rdma") or {}
        rdma = gpudirect.get("enabled") is True
        # useHostMofed: the host's own mlx5 driver, which the peermem script takes as loaded.
        # (Asked only with rdma on: only the peermem container reads it, and the NIC driver pods'
        # scan costs a list of every pod per node.)
        nic_ready = rdma and not sim.peermem_fails and (
            gpudirect.get("useHostMofed") is True or self.network.driver_ready(sim.name))
        ds = fake_driver.daemonset(ns, rhcos if dtk else None, image, DTK_IMAGE if dtk else None,
                                   peermem=rdma)
        have = self.api.get("apps/v1", "DaemonSet", ds["metadata"]["name"], ns)
        if have is None or have["spec"] != ds["spec"]:  # the operator keeps its DaemonSet as the policy says
            self.api.put(ds)
        ds = self.api.get("apps/v1", "DaemonSet", ds["metadata"]["name"], ns) or ds
        pod = fake_driver.pod_for(ds, sim.name)
        name = pod["metadata"]["name"]
        load_error = DRIVER_LOAD_FAIL if sim.secure_boot else sim.load_error
        st, logs = fake_driver.run(pod, build_error=sim.build_error, load_error=load_error,
                                   image_pull_fails=sim.driver_image_pull, stalled=self._stalled(),
                                   nic_driver_ready=nic_ready)
        old = self.api.get("v1", "Pod", name, ns)
        if old is not None and [c["name"] for c in old["spec"]["containers"]] != [
                c["name"] for c in pod["spec"]["containers"]]:
            self.api.delete("v1", "Pod", name, ns)  # a changed template: the DaemonSet replaces its pod
            self.peermem_restarts.append(name)
            old = None
        if old is None:
            self.api.put(pod)
        current = self.api.get("v1", "Pod", name, ns) or {}
        if current.get("status") != st:
            self.api.set_status("v1", "Pod", name, ns, st)
        for container, text in logs.items():
            self.api.pod_logs[(ns, name, container)] = text
        return all(s["ready"] for s in st["containerStatuses"])

    # --- the pod runner ----------------------------------------------------------------
    def _pods(self) -> None:
        pods = self.api.list("v1", "Pod")
        upi_pods = sum(1 for p in pods if p["metadata"]["name"].startswith("upi-gpu-validate"))
        self.most_validation_pods_at_once = max(self.most_validation_pods_at_once, upi_pods)
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Running"):
                continue
            if pod["metadata"].get("ownerReferences"):
                continue  # a DaemonSet's pod: the operator fake runs it (_driver_pod)
            if self.foreign_pods & set(pod["metadata"].get("labels") or {}):
                continue  # another fake's pod (the RDMA bandwidth tests: tests/fake_rdma.py)
            self._run(pod)

    def _run(self, pod: Obj) -> None:
        spec, meta = pod["spec"], pod["metadata"]
        node_name = spec.get("nodeName") or (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
        limits = [(c.get("resources") or {}).get("limits") or {} for c in spec.get("containers", [])]
        wanted: dict[str, int] = {}
        for lim in limits:
            for res, qty in lim.items():
                if res.startswith("nvidia.com/"):
                    wanted[res] = wanted.get(res, 0) + int(qty)
        wants = sum(wanted.values())
        node = self.api.get("v1", "Node", node_name) if node_name else None
        sim = self.nodes.get(node_name or "")
        offer = ((node or {}).get("status") or {}).get("allocatable", {})
        short = [res for res, n in wanted.items() if n > int(offer.get(res, "0"))]
        if node is None or sim is None or short:
            lacking = (short or ["nvidia.com/gpu"])[0]
            msg = f"0/{len(self.nodes)} nodes are available: 1 Insufficient {lacking}."
            st = {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}
                ],
            }
            if (pod.get("status") or {}) != st:
                self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], st)
            return
        c = spec["containers"][0]
        container, image = c["name"], c.get("image", "")
        try:
            out = fake_images.run(image, c.get("command"), gpus=wants, cuda_error=sim.validation_fails,
                                  diag_fails=sim.diag_fails,
                                  gpu_name=((node.get("metadata") or {}).get("labels") or {}).get(
                                      "nvidia.com/gpu.product", sim.product).replace("-", " "))
        except fake_images.UnsupportedCommand as exc:
            self.api.controller_errors.append(str(exc))
            return
        if sim.validation_hangs or not out.pulled:
            # kubelet retries the pull with a back-off: ErrImagePull, then ImagePullBackOff.
            message = out.message or f'Back-off pulling image "{image}"'
            st = {"phase": "Pending",
                  "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                                  "message": f"containers with unready status: [{container}]"}],
                  "containerStatuses": [{"name": container, "ready": False, "restartCount": 0,
                                         "image": image, "imageID": "",
                                         "state": {"waiting": {"reason": "ImagePullBackOff",
                                                               "message": message}}}]}
            if pod.get("status") != st:
                self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], st)
            return
        (self.diag_pods if c.get("command", [""])[0] == "dcgmi" else self.validation_pods).append(pod)
        phase = "Succeeded" if out.exit_code == 0 else "Failed"
        self.api.pod_logs[(meta["namespace"], meta["name"], container)] = out.log
        terminated = {"exitCode": out.exit_code, "reason": out.reason, **({"message": out.message}
                                                                          if out.message else {})}
        self.api.set_status("v1", "Pod", meta["name"], meta["namespace"], {
            "phase": phase,
            "containerStatuses": [{"name": container, "image": image, "ready": False, "restartCount": 0,
                                   "state": {"terminated": terminated}}],
        })

    def dump(self) -> str:
        """Everything in the store, for a failing test's message."""
        return json.dumps(
            {f"{k.kind}/{ns}/{n}": o.get("status") for (k, ns, n), o in self.api.objects.items()}, indent=1
        )


PCI_FORMS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
