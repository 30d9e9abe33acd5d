"""The facts files upi carries under upi/inventory/, each rebuilt from tests/data/.

upi renders operator objects without a cluster and checks the inventory's
overrides against their CRDs before anything is applied (upi/inventory/crdfields.py);
for that it carries small files of facts, each built here from the extracted
upstream files in tests/data/ (origin and licence recorded in each):

  network-operator.json    the Network Operator CSV's default NicClusterPolicy
                           (alm-examples), its related images, the package's
                           default channel, the NicClusterPolicy spec's fields
  performance-profile.json the PerformanceProfile spec's fields
  cluster-policy.json      the ClusterPolicy spec's fields

A spec's fields are its CRD's storage version's openAPIV3Schema, names only
(the tree crdfields.py describes). tests/test_carried_facts.py fails when a
carried file drifts from what tests/data/ holds; `python tests/carried_facts.py`
rewrites them all.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from upi.inventory.crdfields import OPEN

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TARGET_DIR = HERE.parent / "upi" / "inventory"


def field_tree(schema: dict[str, Any]) -> Any:
    """A schema's field names, nested, as upi/inventory/crdfields.py reads them."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return OPEN  # the API server keeps any field below, known or not
    if schema.get("type") == "array":
        items = schema.get("items")
        return [field_tree(items) if isinstance(items, dict) else OPEN]
    props = schema.get("properties")
    if props:
        return {k: field_tree(v) for k, v in sorted(props.items())}
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        return {OPEN: field_tree(values)}  # a map: any key, each value of this shape
    if values is not None or schema.get("type") == "object":
        return OPEN
    return {}


def _load(area: str, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / area / name).read_text())
    return loaded


def _spec(crd: dict[str, Any]) -> tuple[str, Any]:
    """A CRD's apiVersion (group/storage version) and its spec's field tree."""
    version = next(v for v in crd["versions"] if v["storage"])
    return f"{crd['group']}/{version['name']}", field_tree(version["openAPIV3Schema"]["properties"]["spec"])


def network_operator() -> dict[str, Any]:
    """The NVIDIA Network Operator (Mellanox/network-operator v26.4.1 bundle)."""
    csv = _load("network", "csv-nvidia-network-operator.json")
    crd = _load("network", "crd-mellanox.com_nicclusterpolicies.json")
    bundle = _load("network", "bundle-annotations.json")
    api_version, fields = _spec(crd)
    example = next(e for e in csv["almExamples"] if e["kind"] == "NicClusterPolicy")
    return {
        "origin": {"project": csv["origin"]["project"], "version": csv["origin"]["version"],
                   "licence": csv["origin"]["licence"],
                   "files": [csv["origin"]["file"], crd["origin"]["file"], bundle["origin"]["file"]]},
        "package": bundle["package"],
        "defaultChannel": bundle["defaultChannel"],
        "csv": csv["name"],
        "suggestedNamespace": csv["suggestedNamespace"],
        "apiVersion": api_version,
        "nicClusterPolicy": example,
        "relatedImages": {r["name"]: r["image"] for r in csv["relatedImages"]},
        "specFields": fields,
    }


def performance_profile() -> dict[str, Any]:
    """The Node Tuning Operator's PerformanceProfile (part of OpenShift: no CSV)."""
    crd = _load("tuning", "crd-performance.openshift.io_performanceprofiles.json")
    api_version, fields = _spec(crd)
    origin = crd["origin"]
    return {
        "origin": {"project": origin["project"], "version": origin["version"], "licence": origin["licence"],
                   "files": [origin["file"]]},
        "apiVersion": api_version,
        "specFields": fields,
    }


def cluster_policy() -> dict[str, Any]:
    """The GPU Operator's ClusterPolicy: the CRD, and the CSV that owns it (the one upi's default is from)."""
    crd = _load("gpu", "crd-nvidia.com_clusterpolicies.json")
    csv = _load("gpu", "csv-gpu-operator-certified.json")
    api_version, fields = _spec(crd)
    owned = next(c for c in csv["ownedCRDs"] if c["kind"] == "ClusterPolicy")
    assert api_version == f"{crd['group']}/{owned['version']}", "the CSV owns another ClusterPolicy version"
    origin = crd["origin"]
    version = f"{origin['version']}; {csv['origin']['version']}"
    return {
        "origin": {"project": origin["project"], "version": version,
                   "licence": origin["licence"], "files": [origin["file"], csv["origin"]["file"]]},
        "csv": csv["name"],
        "apiVersion": api_version,
        "specFields": fields,
    }


# Every carried facts file and its builder.
CARRIED: dict[str, Callable[[], dict[str, Any]]] = {
    "network-operator.json": network_operator,
    "performance-profile.json": performance_profile,
    "cluster-policy.json": cluster_policy,
}


def text(name: str) -> str:
    """The carried file `name` as its builder writes it."""
    return json.dumps(CARRIED[name](), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    for carried in CARRIED:
        (TARGET_DIR / carried).write_text(text(carried))
    sys.exit(0)
