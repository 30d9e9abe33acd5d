"""The in-cluster form of the approver: RBAC, the inventory and a Deployment running --watch."""

from __future__ import annotations

from typing import Any

import yaml

from upi.csr.decide import CLIENT_SIGNER, SERVING_SIGNER

NAMESPACE = "upi-approve-csr"
NAME = "upi-approve-csr"
CERTS = "certificates.k8s.io"


def cluster_role() -> dict[str, Any]:
    """Exactly what approving needs (csr.md), plus listing Nodes for the no-second-client-CSR rule."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": NAME},
            "rules": [
                {"apiGroups": [CERTS], "resources": ["certificatesigningrequests"],
                 "verbs": ["get", "list", "watch"]},
                {"apiGroups": [CERTS], "resources": ["certificatesigningrequests/approval"],
                 "verbs": ["update"]},
                {"apiGroups": [CERTS], "resources": ["signers"],
                 "resourceNames": [CLIENT_SIGNER, SERVING_SIGNER], "verbs": ["approve"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
            ]}


def _deployment(image: str) -> dict[str, Any]:
    container = {
        "name": "approver", "image": image,
        "command": ["upi", "approve-csr", "/etc/upi/inventory.yaml", "--watch", "--json"],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "inventory", "mountPath": "/etc/upi", "readOnly": True}],
    }
    # Workers join through this approver, so it must run on the control plane.
    pod = {"serviceAccountName": NAME, "priorityClassName": "system-cluster-critical",
           "nodeSelector": {"node-role.kubernetes.io/master": ""},
           "tolerations": [{"key": "node-role.kubernetes.io/master", "operator": "Exists",
                            "effect": "NoSchedule"}],
           "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [container],
           "volumes": [{"name": "inventory", "configMap": {"name": NAME}}]}
    labels = {"app.kubernetes.io/name": NAME}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def manifests(inventory_text: str, image: str) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, the inventory ConfigMap, Deployment."""
    meta = {"name": NAME, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        cluster_role(),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
         "data": {"inventory.yaml": inventory_text}},
        _deployment(image),
    ]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the inventory) as literal blocks, readable in the ConfigMap."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def manifests_yaml(inventory_text: str, image: str) -> str:
    """The manifests as one multi-document YAML stream, for `oc apply -f -`."""
    return yaml.dump_all(manifests(inventory_text, image), Dumper=_Dumper, sort_keys=False,
                         default_flow_style=False)
