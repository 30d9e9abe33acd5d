"""The Network Operator facts upi carries (upi/inventory/network-operator.json), from tests/data/.

upi renders the NicClusterPolicy without a cluster, and checks the inventory's
overrides against the CRD before anything is applied; for that it carries a
small file of facts: the CSV's default NicClusterPolicy (alm-examples), the
images it names, the package's default channel, and the NicClusterPolicy
spec's field names (the CRD's openAPIV3Schema, names only). tests/test_rdma_render.py
fails when that file drifts from what tests/data/ holds;
`python tests/rdma_facts.py` rewrites it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "network"
TARGET = HERE.parent / "upi" / "inventory" / "network-operator.json"
OPEN = "*"  # any key below (a map, or x-kubernetes-preserve-unknown-fields)


def field_tree(schema: dict[str, Any]) -> Any:
    """An object schema's field names, nested; OPEN where any key goes; {} for a leaf."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return field_tree(schema["items"])
    props = schema.get("properties")
    if props:
        return {k: field_tree(v) for k, v in sorted(props.items())}
    if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema or (
            schema.get("type") == "object"):
        return OPEN
    return {}


def build() -> dict[str, Any]:
    csv = json.loads((DATA / "csv-nvidia-network-operator.json").read_text())
    crd = json.loads((DATA / "crd-mellanox.com_nicclusterpolicies.json").read_text())
    bundle = json.loads((DATA / "bundle-annotations.json").read_text())
    version = next(v for v in crd["versions"] if v["storage"])
    spec = version["openAPIV3Schema"]["properties"]["spec"]
    example = next(e for e in csv["almExamples"] if e["kind"] == "NicClusterPolicy")
    return {
        "origin": {"project": csv["origin"]["project"], "version": csv["origin"]["version"],
                   "licence": csv["origin"]["licence"],
                   "files": [csv["origin"]["file"], crd["origin"]["file"], bundle["origin"]["file"]]},
        "package": bundle["package"],
        "defaultChannel": bundle["defaultChannel"],
        "csv": csv["name"],
        "suggestedNamespace": csv["suggestedNamespace"],
        "apiVersion": f"{crd['group']}/{version['name']}",
        "nicClusterPolicy": example,
        "relatedImages": {r["name"]: r["image"] for r in csv["relatedImages"]},
        "specFields": field_tree(spec),
    }


def text() -> str:
    return json.dumps(build(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text())
    sys.exit(0)
