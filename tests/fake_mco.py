"""A FAKE machine config operator (and the Node Tuning Operator's part of it) for the GPU pool.

No MCO runs here, so this does to the fake API server's objects what the real
controllers do, each behaviour after its upstream source
(openshift/machine-config-operator, read through the search tool):

- kubelet config controller (pkg/controller/kubelet-config): a KubeletConfig
  whose `machineConfigPoolSelector` matches a pool's labels becomes a
  MachineConfig `99-<pool>-generated-kubelet` of that pool's role, and the
  KubeletConfig's status gets a `Success` condition; one that matches no pool
  (or that the controller cannot turn into a config) gets a `Failure`
  condition with the error (`Error: could not find any MachineConfigPool set
  for KubeletConfig <name>`) and no MachineConfig.
- render controller (pkg/controller/render): the MachineConfigs a pool's
  `machineConfigSelector` selects, merged in name order, become
  `rendered-<pool>-<hash of their content>`; the pool's
  `spec.configuration` names it and lists its sources.
- node controller (pkg/controller/node): a node belongs to the pool whose
  `nodeSelector` it matches (a custom pool wins over `worker`); nodes get
  the new `desiredConfig` one at a time (maxUnavailable 1), and the pool's
  status counts (machineCount, updatedMachineCount, readyMachineCount,
  unavailableMachineCount, degradedMachineCount) and conditions (Updated,
  Updating, NodeDegraded, Degraded) follow calculateStatus in status.go;
  `status.configuration` moves to the new config once every node runs it.
- machine config daemon (pkg/daemon, docs/MachineConfigDaemon.md): a node
  whose desiredConfig differs from its currentConfig goes `state: Working`
  (drain, write, reboot), then `currentConfig` = desired and `state: Done`;
  a node that cannot apply it goes `state: Degraded` with a
  `machineconfiguration.openshift.io/reason` annotation. The annotation names
  are pkg/daemon/constants/constants.go's.
- Node Tuning Operator (openshift/cluster-node-tuning-operator, the
  PerformanceProfile controller): a PerformanceProfile becomes a
  MachineConfig `50-performance-<name>` of the pool its
  `machineConfigPoolSelector` picks (hugepages as kernel arguments).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from fake_apiserver import FakeApiServer, Obj, now

MCO = "machineconfiguration.openshift.io/v1"
PAO = "performance.openshift.io/v2"
ROLE = "machineconfiguration.openshift.io/role"
CURRENT = "machineconfiguration.openshift.io/currentConfig"
DESIRED = "machineconfiguration.openshift.io/desiredConfig"
STATE = "machineconfiguration.openshift.io/state"
REASON = "machineconfiguration.openshift.io/reason"
# How many controller ticks a node spends Working (drain, write, reboot) before it is Done.
REBOOT_TICKS = 3


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist)."""
    if not selector:
        return False  # the MCO treats an empty selector as selecting nothing
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


def _max_unavailable(value: int | str | None, count: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return max(1, count * int(value[:-1]) // 100)
    return int(value or 1)


class FakeMco:
    """The machine config operator's controllers and daemons over a FakeApiServer's store."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.degrades: dict[str, str] = {}  # node -> the reason its daemon gives for Degraded
        self.kubelet_fails: dict[str, str] = {}  # KubeletConfig -> the controller's Failure message
        self.working_ticks: dict[str, int] = {}
        self.reboots: list[str] = []  # nodes in the order they rebooted into a new config
        self.most_updating = 0  # the most nodes of one pool updating at once

    # --- seed: an installed cluster's pools -------------------------------------------
    def seed(self) -> None:
        for role in ("master", "worker"):
            self.api.put({"apiVersion": MCO, "kind": "MachineConfig",
                          "metadata": {"name": f"00-{role}", "labels": {ROLE: role}},
                          "spec": {"config": {"ignition": {"version": "3.4.0"}}}})
            self.api.put({
                "apiVersion": MCO, "kind": "MachineConfigPool",
                "metadata": {"name": role, "labels": {
                    f"pools.operator.machineconfiguration.openshift.io/{role}": "",
                    "machineconfiguration.openshift.io/mco-built-in": ""}},
                "spec": {"machineConfigSelector": {"matchLabels": {ROLE: role}},
                         "nodeSelector": {"matchLabels": {f"node-role.kubernetes.io/{role}": ""}}},
            })
        self.tick()
        # Installed nodes already run their pool's config.
        for node in self.api.list("v1", "Node"):
            pool = self._pool_of(node)
            if pool is not None:
                rendered = pool["spec"]["configuration"]["name"]
                notes = {CURRENT: rendered, DESIRED: rendered, STATE: "Done"}
                self._annotate(node["metadata"]["name"], notes)
        self.tick()

    def tick(self) -> None:
        self._kubelet_configs()
        self._performance_profiles()
        for pool in self.api.list(MCO, "MachineConfigPool"):
            self._render(pool)
        for pool in self.api.list(MCO, "MachineConfigPool"):
            self._roll(pool)

    # --- kubelet config controller ----------------------------------------------------
    def _kubelet_configs(self) -> None:
        for kc in self.api.list(MCO, "KubeletConfig"):
            name = kc["metadata"]["name"]
            selector = kc["spec"].get("machineConfigPoolSelector") or {}
            matched = [p for p in self.api.list(MCO, "MachineConfigPool")
                       if _matches(selector, p["metadata"].get("labels") or {})]
            missing = f"Error: could not find any MachineConfigPool set for KubeletConfig {name}"
            failure = self.kubelet_fails.get(name) or (None if matched else missing)
            if failure:  # the controller's Failure condition (kubelet_config_controller.go)
                want = {"conditions": [{"type": "Failure", "status": "True", "message": failure,
                                        "lastTransitionTime": now()}],
                        "observedGeneration": kc["metadata"].get("generation", 1)}
                if [c.get("message") for c in (kc.get("status") or {}).get("conditions") or []] != [failure]:
                    self.api.set_status(MCO, "KubeletConfig", name, "", want)
                continue
            for pool in self.api.list(MCO, "MachineConfigPool"):
                selector = kc["spec"].get("machineConfigPoolSelector") or {}
                if _matches(selector, pool["metadata"].get("labels") or {}):
                    name = pool["metadata"]["name"]
                    self._put_mc(f"99-{name}-generated-kubelet", name,
                                 {"config": {"ignition": {"version": "3.4.0"},
                                             "kubelet": kc["spec"].get("kubeletConfig") or {}}})
            want = {"conditions": [{"type": "Success", "status": "True", "message": "Success",
                                    "lastTransitionTime": now()}],
                    "observedGeneration": kc["metadata"].get("generation", 1)}
            st = kc.get("status") or {}
            if st.get("observedGeneration") != want["observedGeneration"]:
                self.api.set_status(MCO, "KubeletConfig", kc["metadata"]["name"], "", want)

    def _performance_profiles(self) -> None:
        for pp in self.api.list(PAO, "PerformanceProfile"):
            spec = pp["spec"]
            for pool in self.api.list(MCO, "MachineConfigPool"):
                if _matches({"matchLabels": spec.get("machineConfigPoolSelector") or {}},
                            pool["metadata"].get("labels") or {}):
                    args = [f"hugepagesz={p['size']} hugepages={p['count']}"
                            for p in (spec.get("hugepages") or {}).get("pages") or []]
                    self._put_mc(f"50-performance-{pp['metadata']['name']}", pool["metadata"]["name"],
                                 {"kernelArguments": args, "config": {"ignition": {"version": "3.4.0"},
                                                                       "cpu": spec.get("cpu")}})

    def _put_mc(self, name: str, role: str, spec: Obj) -> None:
        have = self.api.get(MCO, "MachineConfig", name)
        if have is None or have.get("spec") != spec:
            self.api.put({"apiVersion": MCO, "kind": "MachineConfig",
                          "metadata": {"name": name, "labels": {ROLE: role}}, "spec": spec})

    # --- render controller ----------------------------------------------------------
    def _render(self, pool: Obj) -> None:
        name = pool["metadata"]["name"]
        selector = pool["spec"].get("machineConfigSelector") or {}
        sources = sorted((mc for mc in self.api.list(MCO, "MachineConfig")
                          if not mc["metadata"]["name"].startswith("rendered-")
                          and _matches(selector, mc["metadata"].get("labels") or {})),
                         key=lambda mc: mc["metadata"]["name"])
        if not sources:
            return
        merged: Obj = {"config": {}, "kernelArguments": []}
        for mc in sources:
            merged["config"] |= mc["spec"].get("config") or {}
            merged["kernelArguments"] += mc["spec"].get("kernelArguments") or []
        digest = hashlib.sha256(json.dumps(merged, sort_keys=True).encode()).hexdigest()[:32]
        rendered = f"rendered-{name}-{digest}"
        if self.api.get(MCO, "MachineConfig", rendered) is None:
            self.api.put({"apiVersion": MCO, "kind": "MachineConfig", "metadata": {"name": rendered},
                          "spec": merged})
        configuration = {"name": rendered, "source": [
            {"apiVersion": MCO, "kind": "MachineConfig", "name": mc["metadata"]["name"]} for mc in sources]}
        if pool["spec"].get("configuration") != configuration:
            new = copy.deepcopy(pool)
            new["spec"]["configuration"] = configuration
            self.api.put(new, manager="machine-config-controller")

    # --- node controller + daemons -------------------------------------------------------
    def _pool_of(self, node: Obj, every: list[Obj] | None = None) -> Obj | None:
        labels = node["metadata"].get("labels") or {}
        every = self.api.list(MCO, "MachineConfigPool") if every is None else every
        pools = [p for p in every if _matches(p["spec"].get("nodeSelector") or {}, labels)]
        custom = [p for p in pools if p["metadata"]["name"] not in ("worker", "master")]
        return (custom or pools or [None])[0]

    def _annotate(self, name: str, notes: dict[str, Any]) -> None:
        node = self.api.get("v1", "Node", name)
        assert node is not None
        new = copy.deepcopy(node)
        ann = new["metadata"].setdefault("annotations", {})
        ann.update({k: v for k, v in notes.items() if v is not None})
        for k in [k for k, v in notes.items() if v is None]:
            ann.pop(k, None)
        if new != node:
            self.api.put(new, manager="machine-config-daemon")

    def _roll(self, pool: Obj) -> None:
        target = (pool["spec"].get("configuration") or {}).get("name")
        if not target:
            return
        pool_name = pool["metadata"]["name"]
        every = self.api.list(MCO, "MachineConfigPool")  # once a tick, not once a node
        nodes = [n for n in self.api.list("v1", "Node") if (self._pool_of(n, every) or {}).get("metadata", {})
                 .get("name") == pool_name]
        for node in nodes:
            self._daemon(node, (pool.get("status") or {}).get("configuration", {}).get("name") or target)
        nodes = [self.api.get("v1", "Node", n["metadata"]["name"]) or n for n in nodes]
        notes = {n["metadata"]["name"]: n["metadata"].get("annotations") or {} for n in nodes}
        busy = [n for n, a in notes.items() if a.get(DESIRED) != a.get(CURRENT) or a.get(STATE) != "Done"]
        # Up to maxUnavailable nodes update at once (default 1; a percentage of the pool rounds
        # down, at least 1: the node controller's getAllCandidateMachines / maxUnavailable).
        room = _max_unavailable(pool["spec"].get("maxUnavailable"), len(nodes)) - len(busy)
        todo = sorted(n for n, a in notes.items() if a.get(DESIRED) != target and n not in busy)
        for name in todo[:max(0, room)]:
            self._annotate(name, {DESIRED: target})
        self.most_updating = max(self.most_updating, len(busy) + len(todo[:max(0, room)]))
        self._status(pool, target, nodes)

    def _daemon(self, node: Obj, running: str) -> None:
        name = node["metadata"]["name"]
        ann = node["metadata"].get("annotations") or {}
        if CURRENT not in ann:
            # The daemon (re)starting on a node whose annotations were lost writes what the node runs.
            self._annotate(name, {CURRENT: running, DESIRED: ann.get(DESIRED, running), STATE: "Done"})
            return
        desired, current, state = ann.get(DESIRED), ann.get(CURRENT), ann.get(STATE)
        if not desired or desired == current or state == "Degraded":
            return
        if state != "Working":
            self._annotate(name, {STATE: "Working"})
            self.working_ticks[name] = 0
            return
        self.working_ticks[name] = self.working_ticks.get(name, 0) + 1
        if name in self.degrades:
            self._annotate(name, {STATE: "Degraded", REASON: self.degrades[name]})
            return
        if self.working_ticks[name] >= REBOOT_TICKS:
            self.reboots.append(name)
            self._annotate(name, {CURRENT: desired, STATE: "Done", REASON: None})

    def _status(self, pool: Obj, target: str, nodes: list[Obj]) -> None:
        notes = [n["metadata"].get("annotations") or {} for n in nodes]
        ready = [all(c.get("status") == "True" for c in (n.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Ready") for n in nodes]
        updated = [a.get(CURRENT) == a.get(DESIRED) == target and a.get(STATE) == "Done" for a in notes]
        degraded = [a.get(STATE) == "Degraded" for a in notes]
        names = [n["metadata"]["name"] for n in nodes]
        count = len(nodes)
        done = all(updated)
        bad = [f'Node {n} is reporting: "{a.get(REASON, "")}"'
               for n, a, d in zip(names, notes, degraded, strict=True) if d]
        old = pool.get("status") or {}

        def cond(kind: str, on: bool, message: str = "") -> Obj:
            was = next((c for c in old.get("conditions") or [] if c.get("type") == kind), {})
            same = was.get("status") == ("True" if on else "False")
            since = was.get("lastTransitionTime") if same else now()
            return {"type": kind, "status": "True" if on else "False", "lastTransitionTime": since or now(),
                    "message": message, "reason": ""}

        msg_bad = f"{len(bad)} nodes are reporting degraded status on sync: " + ", ".join(bad) if bad else ""
        st = {
            "observedGeneration": pool["metadata"].get("generation", 1),
            "configuration": ({"name": target} if done else old.get("configuration") or {"name": target}),
            "machineCount": count,
            "updatedMachineCount": sum(updated),
            "readyMachineCount": sum(u and r for u, r in zip(updated, ready, strict=True)),
            "unavailableMachineCount": sum(not (u and r) and a.get(DESIRED) != a.get(CURRENT)
                                           for u, r, a in zip(updated, ready, notes, strict=True)),
            "degradedMachineCount": sum(degraded),
            "conditions": [
                cond("Updated", done, f"All nodes are updated with {target}" if done else ""),
                cond("Updating", not done and not bad,
                     "" if done else f"All nodes are updating to {target}"),
                cond("NodeDegraded", bool(bad), msg_bad),
                cond("Degraded", bool(bad), msg_bad),
            ],
        }
        def shape(status: Obj) -> object:  # a status without its timestamps: rewrite only on a change
            conds = [(c["type"], c["status"], c["message"]) for c in status.get("conditions") or []]
            return ({k: v for k, v in status.items() if k != "conditions"}, conds)

        if shape(old) != shape(st):
            self.api.set_status(MCO, "MachineConfigPool", pool["metadata"]["name"], "", st)
