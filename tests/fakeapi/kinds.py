"""The kinds the FAKE API server serves: group, version, plural, scope, /status, short names.

Discovery (tests/kube_wire.py) is generated from this table, and URL paths are
routed through it (fakeapi/handler.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from kube_wire import status

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One resource type the server serves."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = True
    short_names: tuple[str, ...] = ()  # what discovery lists, so `kubectl get csr` resolves

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def not_found(self, name: str) -> Obj:
        res = f"{self.plural}.{self.group}" if self.group else self.plural
        return status(404, "NotFound", f'{res} "{name}" not found')


KINDS = [
    Kind("", "v1", "Namespace", "namespaces", False, short_names=("ns",)),
    Kind("", "v1", "Node", "nodes", False, short_names=("no",)),
    Kind("", "v1", "Pod", "pods", True, short_names=("po",)),
    Kind("", "v1", "Secret", "secrets", True, False),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, short_names=("pdb",)),
    Kind("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", False,
         short_names=("csr",)),
    Kind("apps", "v1", "DaemonSet", "daemonsets", True),
    Kind("config.openshift.io", "v1", "ClusterVersion", "clusterversions", False),
    Kind("imageregistry.operator.openshift.io", "v1", "Config", "configs", False),
    Kind("image.openshift.io", "v1", "ImageStream", "imagestreams", True),
    Kind("operators.coreos.com", "v1alpha1", "CatalogSource", "catalogsources", True),
    Kind("operators.coreos.com", "v1alpha1", "Subscription", "subscriptions", True),
    Kind("operators.coreos.com", "v1alpha1", "InstallPlan", "installplans", True),
    Kind("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "clusterserviceversions", True),
    Kind("operators.coreos.com", "v1", "OperatorGroup", "operatorgroups", True),
    Kind("packages.operators.coreos.com", "v1", "PackageManifest", "packagemanifests", True),
    Kind("nfd.openshift.io", "v1", "NodeFeatureDiscovery", "nodefeaturediscoveries", True),
    Kind("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", False),
    # The NVIDIA Network Operator's CRDs (tests/data/network/): all cluster-scoped, with /status.
    Kind("mellanox.com", "v1alpha1", "NicClusterPolicy", "nicclusterpolicies", False),
    Kind("mellanox.com", "v1alpha1", "NicNodePolicy", "nicnodepolicies", False),
    Kind("mellanox.com", "v1alpha1", "HostDeviceNetwork", "hostdevicenetworks", False),
    Kind("mellanox.com", "v1alpha1", "IPoIBNetwork", "ipoibnetworks", False),
    Kind("mellanox.com", "v1alpha1", "MacvlanNetwork", "macvlannetworks", False),
    Kind("machineconfiguration.openshift.io", "v1", "MachineConfigPool", "machineconfigpools", False),
    Kind("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs", False, False),
    Kind("machineconfiguration.openshift.io", "v1", "KubeletConfig", "kubeletconfigs", False),
    Kind("performance.openshift.io", "v2", "PerformanceProfile", "performanceprofiles", False),
    Kind("config.openshift.io", "v1", "ImageDigestMirrorSet", "imagedigestmirrorsets", False),
    Kind("config.openshift.io", "v1", "ImageTagMirrorSet", "imagetagmirrorsets", False),
    Kind("config.openshift.io", "v1", "OperatorHub", "operatorhubs", False),
    # The GPU metrics proof (tests/fake_thanos.py): the querier's route, the ingress CA, RBAC, tokens.
    Kind("route.openshift.io", "v1", "Route", "routes", True),
    Kind("", "v1", "ConfigMap", "configmaps", True, False),
    Kind("", "v1", "ServiceAccount", "serviceaccounts", True, False),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, False),
    # The RDMA bandwidth test's SCC grant (upi.gpu.rdma.test_account_objects; tests/fake_rdma.py reads it).
    Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, False),
]
BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
BY_API = {(k.api_version, k.kind): k for k in KINDS}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
