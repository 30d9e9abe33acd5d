"""The GPU Operator's driver DaemonSets and pods on OpenShift, as the real operator makes them (a fake).

Upstream, NVIDIA/gpu-operator:
- assets/state-driver/0500_daemonset.yaml: DaemonSet `nvidia-driver-daemonset`, labels
  `app: nvidia-driver-daemonset`, `app.kubernetes.io/component: nvidia-driver`,
  `nvidia.com/precompiled: "false"` (on the template too); init container
  `k8s-driver-manager`; containers `nvidia-driver-ctr` and `openshift-driver-toolkit-ctr`
  (the latter waits for the shared directory, then runs `ocp_dtk_entrypoint dtk-build-driver`);
  toleration of `nvidia.com/gpu`.
- controllers/object_controls.go, transformOpenShiftDriverToolkitContainer: with the Driver
  Toolkit the DaemonSet's name gets `-<RHCOS version>` and its `app` label (selector and
  template) becomes that name; `openshift.driver-toolkit: "true"` goes on the DaemonSet and the
  template, `openshift.driver-toolkit.rhcos: <version>` on the DaemonSet, and the node selector
  gains `feature.node.kubernetes.io/system-os_release.OSTREE_VERSION: <version>`. Without it
  (not requested, or the `openshift/driver-toolkit` imagestream missing) the DTK container is
  removed and the operator logs "OpenShift DriverToolkit was requested but could not be
  enabled (dependencies missing)". controllers/state_manager.go holds the label keys.
- The driver image is the CSV's related image `driver-image` unless the ClusterPolicy names
  `driver.repository`/`image`/`version`.

With `driver.rdma.enabled` the DaemonSet also runs `nvidia-peermem-ctr` (assets/state-driver/
0500_daemonset.yaml: command `nvidia-driver`, args `reload_nvidia_peermem`, probed by
`nvidia-driver probe_nvidia_peermem`; controllers/object_controls.go
transformPeerMemoryContainer removes it when RDMA is off). Its script
(NVIDIA/gpu-driver-container rhel9/nvidia-driver, reload_nvidia_peermem) waits for the NIC
driver's `/run/mellanox/drivers/.driver-ready` ("waiting for mellanox ofed and nvidia drivers to
be installed"), then loads the module ("successfully loaded nvidia-peermem module, now waiting
for signal"); until then the container is not ready, nor is the driver pod.

What the containers log follows NVIDIA/gpu-driver-container: rhel9/ocp_dtk_entrypoint
(`dtk-build-driver` in openshift-driver-toolkit-ctr builds and says "NVIDIA drivers generated";
`nv-ctr-run-with-dtk` in nvidia-driver-ctr waits for that, then runs `nvidia-driver load`) and
rhel9/nvidia-driver (_create_driver_package: "Compiling NVIDIA driver kernel modules...";
_load_driver: "Loading NVIDIA driver kernel modules..." then `modprobe nvidia`).
"""

from __future__ import annotations

import hashlib
from typing import Any

Obj = dict[str, Any]

COMPONENT = "app.kubernetes.io/component"
OSTREE_LABEL = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
DTK_LABEL = "openshift.driver-toolkit"
DTK_RHCOS_LABEL = "openshift.driver-toolkit.rhcos"
SHARED_DIR = "/mnt/shared-nvidia-driver-toolkit"
DRIVER_MANAGER_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"

DTK_BUILD_START = (
    "Running dtk-build-driver\nStart building nvidia.ko driver ...\n#\n"
    "# Executing nvidia-driver build script ...\n#\nDRIVER_ARCH is x86_64\n"
    "Compiling NVIDIA driver kernel modules...\n")
DTK_BUILD_DONE = (
    "Relinking NVIDIA driver kernel modules...\nBuilding NVIDIA driver package nvidia-modules-5.14.0...\n"
    "#\n# nvidia-driver build script completed.\n#\n"
    "NVIDIA drivers generated, inform nvidia-driver-ctr container about it and sleep forever.\n")
DRIVER_WAITS = (
    "Running nv-ctr-run-with-dtk\nFast path not detected: building driver and modules\n"
    "Waiting for openshift-driver-toolkit-ctr container to build the precompiled driver ...\n")
DRIVER_LOAD_STEPS = (
    "Parsing kernel module parameters...\nLoading ipmi and i2c_core kernel modules...\n"
    "Loading NVIDIA driver kernel modules...\n+ modprobe nvidia NVreg_CoherentGPUMemoryMode=driver\n")
DRIVER_LOAD = "openshift-driver-toolkit-ctr started.\n#\n# Executing nvidia-driver load script ...\n#\n" + (
    DRIVER_LOAD_STEPS)
DRIVER_LOADED = (
    "+ modprobe nvidia-uvm\n+ modprobe nvidia-modeset\n+ set +o xtrace -o nounset\n"
    "Starting NVIDIA persistence daemon...\nMounting NVIDIA driver rootfs...\nDone, now waiting for signal\n")
PEERMEM = "nvidia-peermem-ctr"
PEERMEM_WAITS = "waiting for mellanox ofed and nvidia drivers to be installed\n"
PEERMEM_LOADED = "successfully loaded nvidia-peermem module, now waiting for signal\n"
DTK_WAITS_FOR_SHARED_DIR = "Waiting for nvidia-driver-ctr container to prepare the shared directory ...\n"


def driver_image(policy: Obj, related: list[dict[str, str]], os_tag: str) -> str:
    """The image of nvidia-driver-ctr: the ClusterPolicy's, else the CSV's `driver-image`."""
    drv = (policy.get("spec") or {}).get("driver") or {}
    if drv.get("repository") and drv.get("image") and drv.get("version"):
        return f"{drv['repository']}/{drv['image']}:{drv['version']}-{os_tag}"
    return next(r["image"] for r in related if r["name"] == "driver-image")


def _suffix(*parts: str) -> str:
    # A DaemonSet's pod gets generateName `<ds>-` and five random characters; stable here.
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:5]


def daemonset(ns: str, rhcos: str | None, image: str, dtk_image: str | None, peermem: bool = False) -> Obj:
    """The driver DaemonSet: per RHCOS version with the Driver Toolkit (`rhcos` set), else the plain one.

    `peermem`: driver.rdma.enabled, the nvidia-peermem sidecar is in.
    """
    name = f"nvidia-driver-daemonset-{rhcos}" if rhcos else "nvidia-driver-daemonset"
    labels = {"app": name, "nvidia.com/precompiled": "false", COMPONENT: "nvidia-driver"}
    template_labels = dict(labels)
    selector = {"nvidia.com/gpu.deploy.driver": "true"}
    containers: list[Obj] = [{"name": "nvidia-driver-ctr", "image": image,
                              "command": ["ocp_dtk_entrypoint"] if rhcos else ["nvidia-driver"],
                              "args": ["nv-ctr-run-with-dtk"] if rhcos else ["init"]}]
    if rhcos:
        labels.update({DTK_LABEL: "true", DTK_RHCOS_LABEL: rhcos})
        template_labels[DTK_LABEL] = "true"
        selector[OSTREE_LABEL] = rhcos
        containers.append({"name": "openshift-driver-toolkit-ctr", "image": dtk_image or image,
                           "command": ["bash", "-xc"],
                           "args": [f"until [ -f {SHARED_DIR}/dir_prepared ]; do sleep 10; done; "
                                    f"exec {SHARED_DIR}/ocp_dtk_entrypoint dtk-build-driver"]})
    if peermem:
        containers.append({"name": PEERMEM, "image": image, "command": ["nvidia-driver"],
                           "args": ["reload_nvidia_peermem"]})
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": template_labels}, "spec": {
                "nodeSelector": selector,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "initContainers": [{"name": "k8s-driver-manager", "image": DRIVER_MANAGER_IMAGE,
                                    "command": ["driver-manager"], "args": ["uninstall_driver"]}],
                "containers": containers}},
        },
    }


def pod_for(ds: Obj, node: str) -> Obj:
    """The DaemonSet's pod on `node` (before any status)."""
    meta, template = ds["metadata"], ds["spec"]["template"]
    labels = {**template["metadata"]["labels"], "controller-revision-hash": _suffix(meta["name"], "rev"),
              "pod-template-generation": "1"}
    spec = {k: v for k, v in template["spec"].items() if k != "nodeSelector"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{meta['name']}-{_suffix(meta['name'], node)}", "namespace": meta["namespace"],
                     "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta["name"],
                                          "uid": meta.get("uid", ""), "controller": True}]},
        "spec": {**spec, "nodeName": node, "restartPolicy": "Always"},
    }


def _running(name: str, image: str, ready: bool) -> Obj:
    return {"name": name, "image": image, "ready": ready, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


def _crashing(name: str, image: str) -> Obj:
    return {"name": name, "image": image, "ready": False, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": f"back-off 40s restarting failed container={name}"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}


def _pulling(name: str, image: str) -> Obj:
    return {"name": name, "image": image, "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff",
                                  "message": f'Back-off pulling image "{image}"'}}}


def run(pod: Obj, *, build_error: str | None, load_error: str | None, image_pull_fails: bool,
        stalled: str | None, nic_driver_ready: bool = False) -> tuple[Obj, dict[str, str]]:
    """The pod's status and its containers' logs: what the real containers show in each case.

    `build_error`: the compiler's output (the build fails); `load_error`: modprobe's (the
    module is built but refused); `image_pull_fails`: nvidia-driver-ctr's image cannot be
    pulled; `stalled`: a build that never starts, with what the build container printed.
    """
    containers = {c["name"]: c["image"] for c in pod["spec"]["containers"]}
    dtk = "openshift-driver-toolkit-ctr" in containers
    drv_image = containers["nvidia-driver-ctr"]
    init = [{"name": "k8s-driver-manager", "image": DRIVER_MANAGER_IMAGE, "ready": True,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
    logs: dict[str, str] = {}
    statuses: list[Obj]
    if image_pull_fails:
        statuses = [_pulling("nvidia-driver-ctr", drv_image)]
        if dtk:
            dtk_image = containers["openshift-driver-toolkit-ctr"]
            statuses.append(_running("openshift-driver-toolkit-ctr", dtk_image, False))
            logs["openshift-driver-toolkit-ctr"] = DTK_WAITS_FOR_SHARED_DIR
        phase = "Pending"
    elif dtk:
        dtk_image = containers["openshift-driver-toolkit-ctr"]
        if stalled is not None:
            logs["openshift-driver-toolkit-ctr"] = stalled
            logs["nvidia-driver-ctr"] = DRIVER_WAITS
            statuses = [_running("nvidia-driver-ctr", drv_image, False),
                        _running("openshift-driver-toolkit-ctr", dtk_image, False)]
        elif build_error is not None:
            logs["openshift-driver-toolkit-ctr"] = DTK_BUILD_START + build_error
            logs["nvidia-driver-ctr"] = DRIVER_WAITS
            statuses = [_running("nvidia-driver-ctr", drv_image, False),
                        _crashing("openshift-driver-toolkit-ctr", dtk_image)]
        else:
            logs["openshift-driver-toolkit-ctr"] = DTK_BUILD_START + DTK_BUILD_DONE
            logs["nvidia-driver-ctr"] = DRIVER_WAITS + DRIVER_LOAD + (load_error or DRIVER_LOADED)
            driver = _crashing("nvidia-driver-ctr", drv_image) if load_error else _running(
                "nvidia-driver-ctr", drv_image, True)
            statuses = [driver, _running("openshift-driver-toolkit-ctr", dtk_image, True)]
        phase = "Running"
    else:
        # One container builds and loads (`nvidia-driver init`).
        text = "DRIVER_ARCH is x86_64\nCompiling NVIDIA driver kernel modules...\n"
        if stalled is not None or build_error is not None:
            text += stalled or build_error or ""
        else:
            text += DRIVER_LOAD_STEPS + (load_error or DRIVER_LOADED)
        logs["nvidia-driver-ctr"] = text
        failed = build_error is not None or load_error is not None
        statuses = [_crashing("nvidia-driver-ctr", drv_image) if failed
                    else _running("nvidia-driver-ctr", drv_image, stalled is None)]
        phase = "Running"
    # nvidia-peermem-ctr loads once both drivers are: the NIC driver's flag (tests/fake_network.py) and ours.
    if PEERMEM in containers:
        loaded = nic_driver_ready and all(s["ready"] for s in statuses)
        statuses.append(_running(PEERMEM, containers[PEERMEM], loaded))
        logs[PEERMEM] = PEERMEM_WAITS + (PEERMEM_LOADED if loaded else "")
    ready = all(s["ready"] for s in statuses)
    status = {"phase": phase, "initContainerStatuses": init, "containerStatuses": statuses,
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return status, logs
