"""What the real API server refuses in core objects: metadata of every kind, Pods and Nodes (for the fake).

CRD kinds are checked against their schemas (tests/kube_schema.py); core kinds have no
CRD, so their rules are written out here, following kubernetes/kubernetes:
- staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go (ValidateObjectMeta:
  name or generateName, labels, annotations and their 256 KiB total) and
  staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go (IsQualifiedName,
  IsValidLabelValue, IsDNS1123Label, IsDNS1123Subdomain and their messages);
- pkg/apis/core/validation/validation.go: validateContainers (name, unique, image required),
  validateRestartPolicy, ValidateResourceRequirements (an extended resource is an integer, a
  request needs a limit and must equal it), validateTolerations, ValidatePodUpdate (a Pod's
  spec is immutable but for images, activeDeadlineSeconds and added tolerations),
  ValidateNode (taint effects);
- staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go: how each error reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

Obj = dict[str, Any]
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character, at most 63 characters")
ANNOTATIONS_LIMIT = 256 * 1024
RESTART_POLICIES = ("Always", "OnFailure", "Never")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Resources the scheduler lets a pod overcommit: the native ones (no domain, or *kubernetes.io/).
_NATIVE = re.compile(r"^([^/]*|([^/]*\.)?kubernetes\.io/.*)$")


def _q(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_q(value)}: {detail}"


def qualified_name(path: str, key: str) -> list[str]:
    """IsQualifiedName: `[prefix/]name`, the prefix a DNS subdomain, the name 63 characters at most."""
    prefix, _, name = key.rpartition("/")
    errs = []
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errs.append(invalid(path, key, "prefix part a lowercase RFC 1123 subdomain must consist of lower "
                                       "case alphanumeric characters, '-' or '.'"))
    if not name or len(name) > 63 or not _NAME.match(name):
        errs.append(invalid(path, key, "name part must consist of alphanumeric characters, '-', '_' or '.', "
                                       "and must start and end with an alphanumeric character, "
                                       "at most 63 characters"))
    return errs


def label_errors(path: str, labels: Any) -> list[str]:
    if not isinstance(labels, dict):
        return [invalid(path, labels, "must be a map of strings")]
    errs = []
    for key, value in labels.items():
        errs += qualified_name(path, str(key))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errs.append(invalid(path, value, LABEL_VALUE_RULE))
    return errs


def meta_errors(obj: Obj) -> list[str]:
    """ValidateObjectMeta: a name (or generateName), valid labels and annotation keys, <= 256 KiB of them."""
    meta = obj.get("metadata") or {}
    errs = []
    if not meta.get("name") and not meta.get("generateName"):
        errs.append("metadata.name: Required value: name or generateName is required")
    errs += label_errors("metadata.labels", meta.get("labels") or {})
    notes = meta.get("annotations") or {}
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        return [*errs, invalid("metadata.annotations", notes, "must be a map of strings")]
    for key in notes:
        errs += qualified_name("metadata.annotations", str(key))
    if sum(len(k) + len(v) for k, v in notes.items()) > ANNOTATIONS_LIMIT:
        errs.append(f"metadata.annotations: Too long: must have at most {ANNOTATIONS_LIMIT} bytes")
    return errs


def _integer(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def resource_errors(path: str, resources: Obj) -> list[str]:
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    errs = []
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, qty in values.items():
            if not _NATIVE.match(name) and not _integer(qty):
                errs.append(invalid(f"{path}.{kind}[{name}]", qty, "must be an integer"))
    for name, qty in requests.items():
        if _NATIVE.match(name):
            continue
        if name not in limits:
            errs.append(f"{path}.limits: Required value: Limit must be set for non overcommitable resources")
        elif str(qty) != str(limits[name]):
            errs.append(invalid(f"{path}.requests[{name}]", str(qty),
                                f"must be equal to {name} limit of {limits[name]}"))
    return errs


def _container_errors(path: str, containers: Any, seen: set[str]) -> list[str]:
    errs = []
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        where = f"{path}[{i}]"
        name = c.get("name") if isinstance(c, dict) else None
        if not name:
            errs.append(f"{where}.name: Required value")
        elif not _DNS_LABEL.match(str(name)) or len(str(name)) > 63:
            errs.append(invalid(f"{where}.name", name, "a lowercase RFC 1123 label must consist of lower "
                                                        "case alphanumeric characters or '-'"))
        elif name in seen:
            errs.append(f'{where}.name: Duplicate value: "{name}"')
        seen.add(str(name))
        if not isinstance(c, dict) or not c.get("image"):
            errs.append(f"{where}.image: Required value")
        errs += resource_errors(f"{where}.resources", (c or {}).get("resources") or {})
    return errs


def pod_errors(pod: Obj) -> list[str]:
    """ValidatePodCreate's rules for what upi and the fake write."""
    spec = pod.get("spec") or {}
    errs = meta_errors(pod)
    if not spec.get("containers"):
        errs.append("spec.containers: Required value")
    seen: set[str] = set()
    errs += _container_errors("spec.initContainers", spec.get("initContainers") or [], seen)
    errs += _container_errors("spec.containers", spec.get("containers") or [], seen)
    policy = spec.get("restartPolicy", "Always")
    if policy not in RESTART_POLICIES:
        errs.append(f'spec.restartPolicy: Unsupported value: "{policy}": supported values: '
                    + ", ".join(f'"{p}"' for p in RESTART_POLICIES))
    errs += label_errors("spec.nodeSelector", spec.get("nodeSelector") or {})
    for i, t in enumerate(spec.get("tolerations") or []):
        if t.get("operator") == "Exists" and t.get("value"):
            errs.append(invalid(f"spec.tolerations[{i}].operator", t.get("value"),
                                "value must be empty when `operator` is 'Exists'"))
        if t.get("effect", "") not in ("", *TAINT_EFFECTS):
            errs.append(f'spec.tolerations[{i}].effect: Unsupported value: "{t.get("effect")}"')
    return errs


def _mutable_fields_cleared(spec: Obj) -> Obj:
    out = json.loads(json.dumps(spec))
    for key in ("containers", "initContainers"):
        for c in out.get(key) or []:
            c.pop("image", None)
    out.pop("activeDeadlineSeconds", None)
    out.pop("tolerations", None)
    return out


def pod_update_errors(old: Obj, new: Obj) -> list[str]:
    """ValidatePodUpdate: a Pod's spec changes only in images, activeDeadlineSeconds and tolerations."""
    if _mutable_fields_cleared(old.get("spec") or {}) != _mutable_fields_cleared(new.get("spec") or {}):
        return ["spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                "(only additions to existing tolerations)"]
    return []


def node_errors(node: Obj) -> list[str]:
    errs = meta_errors(node)
    for i, t in enumerate((node.get("spec") or {}).get("taints") or []):
        if t.get("effect") not in TAINT_EFFECTS:
            errs.append(f'spec.taints[{i}].effect: Unsupported value: "{t.get("effect")}": supported values: '
                        + ", ".join(f'"{e}"' for e in TAINT_EFFECTS))
        errs += qualified_name(f"spec.taints[{i}].key", str(t.get("key", "")))
    return errs


def core_errors(kind: str, obj: Obj, old: Obj | None = None) -> list[str]:
    """Every way `obj` (replacing `old`, if any) breaks the API server's own validation."""
    if kind == "Pod":
        return pod_errors(obj) + (pod_update_errors(old, obj) if old is not None else [])
    if kind == "Node":
        return node_errors(obj)
    return meta_errors(obj)
