"""`upi power` and `upi boot-metal` as library functions: every chosen node at once, every failure kept."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from upi.bmc.credentials import read_credentials
from upi.bmc.redfish import ONCE, PXE, UEFI, BmcError, BootOverride, PowerAction, Redfish, SystemState, Target
from upi.errors import UpiError, UsageError
from upi.facts.boot import secure_boot_nodes
from upi.inventory.model import Inventory, Machine, Node

T = TypeVar("T")
Warn = Callable[[str], None]
POWER_ON_WAIT = 120.0  # seconds boot-metal waits for PowerState On after its reset
POLL = 2.0


def _ignore(message: str) -> None:
    """A warning nobody listens to."""


def target_of(inv: Inventory, node: Node) -> Target:
    """The BMC of a metal node as the client needs it (paths resolved against the inventory)."""
    bmc = node.bmc
    if bmc is None:
        raise UsageError(f"{node.name} has no bmc section in {inv.source}")
    verify: bool | str = bmc.verify_tls
    if isinstance(verify, str):
        verify = str(inv.resolve(verify))
    return Target(node.name, bmc.address, inv.resolve(bmc.credentials_file), bmc.system_id, verify,
                  bmc.timeout)


def chosen_nodes(inv: Inventory, names: Sequence[str]) -> list[Node]:
    """The metal nodes with a BMC named on the command line (all of them when none is named)."""
    by_name = {n.name: n for n in inv.nodes}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: not a node of {inv.source} "
                         f"(nodes: {', '.join(by_name)})")
    if names:
        nodes = [by_name[n] for n in dict.fromkeys(names)]
        lacking = [n.name for n in nodes if n.bmc is None or n.machine_kind is not Machine.metal]
        if lacking:
            raise UsageError(f"{', '.join(lacking)}: no bmc section (only bare-metal nodes with "
                             f"nodes[].bmc in {inv.source} are driven over Redfish)")
        return nodes
    nodes = [n for n in inv.nodes if n.bmc is not None and n.machine_kind is Machine.metal]
    if not nodes:
        raise UsageError(f"{inv.source}: no node has a bmc section; add nodes[].bmc "
                         "(docs/metal.md)")
    return nodes


def open_bmc(target: Target, warn: Warn) -> Redfish:
    """A session with the node's BMC; a BMC whose TLS is not verified is said so, every time."""
    if target.verify is False:
        warn(f"{target.where}: TLS certificate NOT verified (verify_tls: false)")
    try:
        credentials = read_credentials(target.credentials_file)
    except ValueError as exc:
        raise BmcError(f"{target.node}: {exc}") from None
    return Redfish(target, credentials)


def in_parallel(nodes: Sequence[Node], job: Callable[[Node], T]) -> tuple[dict[str, T], dict[str, str]]:
    """`job(node)` for every node at once: results and error messages, both by node name."""
    results: dict[str, T] = {}
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
        futures = {n.name: pool.submit(job, n) for n in nodes}
        for name, future in futures.items():
            exc = future.exception()
            if exc is None:
                results[name] = future.result()
            elif isinstance(exc, UpiError):
                errors[name] = str(exc)
            else:
                raise exc
    return results, errors


@dataclass
class PowerResult:
    """What `upi power` saw and did, per node."""

    states: dict[str, SystemState] = field(default_factory=dict)
    sent: dict[str, str] = field(default_factory=dict)  # node -> reset sent, or what would be
    errors: dict[str, str] = field(default_factory=dict)

    def as_json(self, order: Sequence[str]) -> list[dict[str, Any]]:
        """One object per node, in inventory order."""
        out = []
        for name in order:
            item: dict[str, Any] = {"node": name}
            if name in self.states:
                item.update(self.states[name].as_json())
            if name in self.sent:
                item["reset"] = self.sent[name]
            if name in self.errors:
                item["error"] = self.errors[name]
            out.append(item)
        return out


def _planned(state: SystemState, action: PowerAction) -> str:
    on = state.power in ("On", "PoweringOn")
    if action == "on":
        return "none" if on else "On"
    if action == "off":
        return "ForceOff" if state.power not in ("Off", "PoweringOff") else "none"
    return "ForceRestart" if on else "On"


def power(inv: Inventory, names: Sequence[str], action: PowerAction | None, *, dry_run: bool = False,
          warn: Warn = _ignore) -> PowerResult:
    """Read every chosen node's state; with `action`, power it on, off or restart it (not with dry_run)."""
    nodes = chosen_nodes(inv, names)

    def job(node: Node) -> tuple[SystemState, str | None]:
        bmc = open_bmc(target_of(inv, node), warn)
        try:
            if action is None:
                return bmc.state(), None
            if dry_run:
                state = bmc.state()
                return state, f"would send {_planned(state, action)}"
            sent = bmc.power(action)
            return bmc.state(), sent
        finally:
            bmc.close()

    done, errors = in_parallel(nodes, job)
    result = PowerResult(errors=errors)
    for name, (state, sent) in done.items():
        result.states[name] = state
        if sent is not None:
            result.sent[name] = sent
    _warn_unsigned(inv, result.states, warn)
    return result


def _warn_unsigned(inv: Inventory, states: dict[str, SystemState], warn: Warn) -> None:
    """GPU nodes with Secure Boot on whose NVIDIA driver would be built on the node (unsigned)."""
    from upi.gpu.precompiled import driver_mode
    from upi.inventory.gpu import settings

    setting = settings(inv).driver
    reported = {name: s.secure_boot for name, s in states.items()}
    if driver_mode(inv, reported) == "precompiled":
        return
    gpu = {n.name for n in inv.nodes if n.gpu}
    for name, state in states.items():
        if state.secure_boot and name in gpu:
            warn(f"{name}: Secure Boot is on, but the NVIDIA driver is built on the node, unsigned "
                 f"(gpu.driver: {setting}): the kernel refuses it and the GPU step will fail; set "
                 "gpu.driver: precompiled, or turn Secure Boot off (upi power INVENTORY NODE "
                 "secure-boot off)")


@dataclass(frozen=True)
class MetalBoot:
    """What boot-metal did for one node."""

    node: str
    override: BootOverride
    reset: str
    power: str
    secure_boot: bool | None

    def as_json(self) -> dict[str, Any]:
        """One object for --json."""
        return {"node": self.node, "boot_override": self.override.as_json(), "reset": self.reset,
                "power": self.power, "secure_boot": self.secure_boot}


@dataclass
class BootMetalResult:
    """Per node: what was done, or why not."""

    booted: dict[str, MetalBoot] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _boot_one(bmc: Redfish, dry_run: bool, warn: Warn, power_wait: float, node: Node,
              handed_shim: bool) -> MetalBoot:
    name = bmc.target.node
    before = bmc.state()
    if before.secure_boot and not handed_shim:
        # The firmware would refuse the plain GRUB the render hands this node: never power it on.
        raise BmcError(
            f"{name}: the BMC reports Secure Boot on, but the render hands this node the plain GRUB "
            f"(secure_boot: {str(node.secure_boot_mode).lower()}), which Secure Boot firmware "
            "refuses: set secure_boot: true on the node, stage the signed loaders (`upi images "
            "INVENTORY -o DIR --iso RHCOS-LIVE.iso`), `upi render` and `upi push`; or turn Secure "
            "Boot off in its firmware")
    if dry_run:
        reset = "ForceRestart" if before.power in ("On", "PoweringOn") else "On"
        return MetalBoot(name, BootOverride(ONCE, PXE, UEFI), f"would send {reset}", before.power,
                         before.secure_boot)
    override = bmc.one_time_pxe()
    if override.enabled not in (None, ONCE):
        warn(f"{name}: asked for a one-time override, the BMC reports {override.enabled}: the node "
             "network-boots until the override is cleared (its PXE file turns to local boot once "
             "it is installed)")
    reset = bmc.power("restart")
    state = _wait_power_on(bmc, power_wait)
    return MetalBoot(name, override, reset, state.power, state.secure_boot)



def _wait_power_on(bmc: Redfish, wait: float) -> SystemState:
    deadline = time.monotonic() + wait
    while True:
        state = bmc.state()
        if state.power == "On" or time.monotonic() >= deadline:
            break
        time.sleep(POLL)
    if state.power != "On":
        raise BmcError(f"{bmc.target.where}: reset sent, but PowerState is still {state.power} after "
                       f"{wait:g} s")
    return state


def boot_metal(inv: Inventory, names: Sequence[str], *, dry_run: bool = False, warn: Warn = _ignore,
               power_wait: float = POWER_ON_WAIT) -> BootMetalResult:
    """One-time UEFI network boot and a power on / force restart, for every chosen node at once."""
    nodes = chosen_nodes(inv, names)
    secure = secure_boot_nodes(inv)  # handed shim + signed GRUB by the render

    def job(node: Node) -> MetalBoot:
        bmc = open_bmc(target_of(inv, node), warn)
        try:
            return _boot_one(bmc, dry_run, warn, power_wait, node, node.name in secure)
        finally:
            bmc.close()

    done, errors = in_parallel(nodes, job)
    _warn_unsigned(inv, {n: SystemState(n, "", b.power, b.override, b.secure_boot, None)
                         for n, b in done.items()}, warn)
    return BootMetalResult(done, errors)
