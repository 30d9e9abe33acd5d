"""`upi status`'s GPU pool stages: tuned (on the pool's rendered config) and diagnosed (DCGM passed).

Tuned: the node carries the pool's role label and the machine config daemon
says it runs the config the pool targets: `currentConfig` and `desiredConfig`
both the MachineConfigPool's `spec.configuration.name` (`rendered-<pool>-...`)
with `state` Done (MCO pkg/daemon/constants; upi.gpu.pool waits on the same).
No source keeps when that happened: the time is unknown.

Diagnosed: the verdict `upi gpu` keeps on the Node after its DCGM run
(upi.gpu.dcgm.DIAGNOSED): an annotation, like the GPU verification's, so it
lives with the node, is read by every admin's `upi status` whichever machine
ran `upi gpu`, and shows in `oc describe node`. A failed diagnosis is a note
that names the GPU and the test.
"""

from __future__ import annotations

from typing import Any

from upi.errors import UpiError
from upi.gpu.dcgm import DIAGNOSED, passed_at
from upi.gpu.pool import CURRENT, DESIRED, MCO, REASON, STATE, role_label
from upi.inventory.gpupool import pool_settings
from upi.inventory.model import Inventory

Stages = dict[str, Any]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_pool(api: Any, inv: Inventory, problems: list[str]) -> Any:
    """The GPU pool's MachineConfigPool; None when absent (nothing tuned) or unreadable (a problem)."""
    from upi.csr.api import ApiStatus

    name = pool_settings(inv).name
    try:
        return api.request("GET", f"/apis/{MCO}/machineconfigpools/{name}")
    except ApiStatus as exc:
        if exc.code != 404:
            problems.append(str(exc))
    except UpiError as exc:
        problems.append(str(exc))
    return None


def pool_stages(inv: Inventory, nodes: list[dict[str, Any]], pool: Any) -> tuple[
        Stages, Stages, dict[str, tuple[tuple[str, str], ...]]]:
    """(tuned, diagnosed, notes) by GPU node name, from the Nodes and the pool."""
    from upi.status.cluster import parse_time

    settings = pool_settings(inv)
    label = role_label(settings)
    target = _dict(_dict(_dict(pool).get("spec")).get("configuration")).get("name")
    gpu = {n.name for n in inv.nodes if n.gpu}
    tuned: Stages = {}
    diagnosed: Stages = {}
    notes: dict[str, tuple[tuple[str, str], ...]] = {}
    for obj in nodes:
        meta = _dict(obj.get("metadata"))
        name = meta.get("name")
        if not isinstance(name, str) or name not in gpu:
            continue
        notes_here: list[tuple[str, str]] = []
        ann = _dict(meta.get("annotations"))
        in_pool = label in _dict(meta.get("labels"))
        on_target = isinstance(target, str) and ann.get(CURRENT) == ann.get(DESIRED) == target
        if in_pool and on_target and ann.get(STATE) == "Done":
            tuned[name] = None
        elif in_pool and ann.get(STATE) == "Degraded":
            notes_here.append(("tuned", "the machine config daemon reports it Degraded: "
                                        f"{ann.get(REASON) or 'no reason given'}"))
        value = ann.get(DIAGNOSED)
        kept = passed_at(value)
        if kept is not None:
            diagnosed[name] = parse_time(kept[0])
        elif isinstance(value, str) and value.startswith("failed"):
            said = value.removeprefix("failed ")
            notes_here.append(("diagnosed", f"its last DCGM diagnosis failed at {said}"))
        if notes_here:
            notes[name] = tuple(notes_here)
    return tuned, diagnosed, notes
