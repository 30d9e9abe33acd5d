"""The PerformanceProfile facts upi carries (upi/inventory/performance-profile.json), from tests/data/.

`gpu_pool.tuning.performance_profile` is a PerformanceProfile spec written in
the inventory; validate checks its keys against the CRD before render writes
it under gpu/ or `upi gpu` applies it, as network_operator.nic_cluster_policy
is checked. upi carries the spec's field names only (the storage version's
openAPIV3Schema, from tests/data/tuning/, names only, as tests/rdma_facts.py
does for the NicClusterPolicy). tests/test_gpu_pool.py fails when the file
drifts from tests/data/; `python tests/tuning_facts.py` rewrites it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rdma_facts import field_tree

HERE = Path(__file__).resolve().parent
CRD = HERE / "data" / "tuning" / "crd-performance.openshift.io_performanceprofiles.json"
TARGET = HERE.parent / "upi" / "inventory" / "performance-profile.json"


def build() -> dict[str, Any]:
    crd = json.loads(CRD.read_text())
    version = next(v for v in crd["versions"] if v["storage"])
    spec = version["openAPIV3Schema"]["properties"]["spec"]
    origin = crd["origin"]
    return {
        "origin": {"project": origin["project"], "version": origin["version"], "licence": origin["licence"],
                   "files": [origin["file"]]},
        "apiVersion": f"{crd['group']}/{version['name']}",
        "specFields": field_tree(spec),
    }


def text() -> str:
    return json.dumps(build(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text())
    sys.exit(0)
