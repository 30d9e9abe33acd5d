"""An operator object's overrides in the inventory are checked against its CRD at validate.

`network_operator.nic_cluster_policy` and
`gpu_pool.tuning.performance_profile` go through one check
(upi/inventory/crdfields.py) against the field names upi carries
(tests/carried_facts.py): a field the CRD lacks, or a value of another shape
(a value, a list, an object) than the CRD's, is exit 2 naming the file, the
line, the field and the CRD, before anything is written or applied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rdma_support import rdma_inventory

from upi.cli import app

NIC = "the NicClusterPolicy CRD (mellanox.com/v1alpha1, nvidia-network-operator.v26.4.1)"


def _refused(runner, inv: Path, args: list[str], where: str) -> str:
    """The one problem line of a refused inventory, which names the file and the line of `where`."""
    result = runner.invoke(app, [*args, str(inv)] if args[0] == "validate" else args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    key = where.rsplit(".", 1)[1] + ":"
    line = next(n for n, text in enumerate(inv.read_text().splitlines(), 1) if text.strip().startswith(key))
    assert lines[0].startswith(f"upi: error: {inv}:{line}: {where}: "), result.output
    return " ".join(lines[0].split())


@pytest.mark.parametrize(("policy", "fragment"), [
    # A list where the CRD has an object, and an object where it has a list: the API server refuses both.
    ("{ofedDriver: [{version: a}]}", f"ofedDriver: {NIC} has an object at spec.ofedDriver"),
    ("{tolerations: {key: a}}", f"tolerations: {NIC} has a list at spec.tolerations (of objects with fields "
     "effect, key, operator, tolerationSeconds, value), not an object"),
    ("{tolerations: 5}", f"tolerations: {NIC} has a list at spec.tolerations"),
])
def test_a_nic_cluster_policy_override_of_another_shape_than_the_crds_is_refused(
        runner, tmp_path: Path, policy: str, fragment: str) -> None:
    inv = rdma_inventory(tmp_path, f"network_operator:\n  nic_cluster_policy: {policy}\n")
    assert fragment in _refused(runner, inv, ["validate"], "network_operator.nic_cluster_policy")


def test_a_performance_profile_of_another_shape_than_the_crds_is_refused(runner, tmp_path: Path) -> None:
    profile = "{cpu: {reserved: 0-1, isolated: 2-9}, additionalKernelArgs: nosmt}"
    extra = f"gpu_pool:\n  tuning:\n    performance_profile: {profile}\n"
    inv = rdma_inventory(tmp_path, extra, w0="", w1="")
    assert ("additionalKernelArgs: the PerformanceProfile CRD (performance.openshift.io/v2) has a list at "
            "spec.additionalKernelArgs (of values), not a value") in _refused(
                runner, inv, ["validate"], "gpu_pool.tuning.performance_profile")
