"""What a pod shows when it does not run: an image it cannot pull, the driver's build and load logs.

The GPU Operator's driver pods are found by `app.kubernetes.io/component=nvidia-driver`,
the one label they carry in every mode: with the Driver Toolkit (OpenShift's
default) the operator renames the DaemonSet and its `app` label per RHCOS build
(`nvidia-driver-daemonset-<rhcos>`), so `app=nvidia-driver-daemonset` finds no pod;
with the NVIDIADriver CRD it is `<nvidiadriver name>-<hash>` (NVIDIA/gpu-operator
controllers/object_controls.go transformOpenShiftDriverToolkitContainer;
internal/state/testdata/golden/driver-openshift-drivertoolkit.yaml).
With the Driver Toolkit the build runs in `openshift-driver-toolkit-ctr` and the
load in `nvidia-driver-ctr`; without it `nvidia-driver-ctr` does both.
"""

from __future__ import annotations

from dataclasses import dataclass

from upi.gpu.kube import Kube
from upi.gpu.objects import Obj
from upi.gpu.steps import Diagnosis, classify_driver_log

DRIVER_LABELS = {"app.kubernetes.io/component": "nvidia-driver"}
# The build log first: a load failure means little when the build already failed.
DRIVER_CONTAINERS = ("openshift-driver-toolkit-ctr", "nvidia-driver-ctr")
# A container's waiting reasons that mean its image cannot be had (kubelet's images.Err*).
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                "RegistryUnavailable")


@dataclass(frozen=True)
class PullFailure:
    """A container waiting for an image it cannot pull."""

    container: str
    image: str
    reason: str
    message: str

    def text(self) -> str:
        """`the image X cannot be pulled (Reason: message)`."""
        said = f"{self.reason}: {self.message}" if self.message else self.reason
        return f"the image {self.image or '(unnamed)'} cannot be pulled ({said})"


def pull_failure(pod: Obj) -> PullFailure | None:
    """The first (init) container of `pod` waiting on an image pull, if any."""
    st = pod.get("status") or {}
    spec = pod.get("spec") or {}
    images = {c.get("name"): c.get("image", "") for c in
              (spec.get("initContainers") or []) + (spec.get("containers") or []) if isinstance(c, dict)}
    for status in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        if not isinstance(status, dict):
            continue
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in PULL_REASONS:
            name = str(status.get("name", "?"))
            return PullFailure(name, str(status.get("image") or images.get(name) or ""),
                               str(waiting["reason"]), str(waiting.get("message") or ""))
    return None


def _ready(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all(isinstance(s, dict) and s.get("ready") for s in statuses)


def _where(pod: Obj, namespace: str, container: str) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    return f"Pod {namespace}/{pod['metadata']['name']} ({container})" + (f" on {node}" if node else "")


def driver_diagnosis(kube: Kube, namespace: str, step: str, problem: str) -> Diagnosis | None:
    """Why a driver pod is not ready: an image it cannot pull, else what its build or load log says."""
    pods = [p for p in kube.find("v1", "Pod", namespace, labels=DRIVER_LABELS) if not _ready(p)]
    for pod in pods:
        pull = pull_failure(pod)
        if pull is not None:
            return Diagnosis(step, _where(pod, namespace, pull.container), problem, pull.text(),
                             fix="mirror the image (disconnected: oc-mirror and an ImageDigestMirrorSet) or "
                                 "fix the pull secret; oc describe pod shows the registry's answer")
    for pod in pods:
        containers = (pod.get("spec") or {}).get("containers") or []
        names = {c.get("name") for c in containers if isinstance(c, dict)}
        for container in (c for c in DRIVER_CONTAINERS if c in names):
            lines = kube.logs(pod["metadata"]["name"], namespace, container, tail=10)
            cause = classify_driver_log(lines)
            if cause:
                return Diagnosis(step, _where(pod, namespace, container), problem, cause, tuple(lines))
    return None
