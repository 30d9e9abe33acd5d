"""`upi power` and `upi boot-metal`: flags checked, the BMC flows run, a table or JSON printed."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from upi import console
from upi.bmc import BmcError, boot_metal, power
from upi.bmc.redfish import PowerAction
from upi.csr.connect import connect, find_kubeconfig
from upi.errors import UsageError
from upi.inventory import Inventory, load_inventory
from upi.inventory.rules import bmc_files

ACTIONS = ("status", "on", "off", "restart")
SECURE_BOOT = "secure-boot"
SECURE_BOOT_ACTIONS = ("status", "on", "off")


def load(inventory: Path, names: Sequence[str]) -> Inventory:
    """The inventory, with the chosen nodes' BMC credentials and CA files checked (exit 2, located)."""
    return load_inventory(inventory, check_files=False,
                          extra_rules=[lambda inv: bmc_files(inv, names or None)])


def _failed(errors: dict[str, str]) -> None:
    if errors:
        raise BmcError("\n".join(errors[n] for n in errors))


def power_command(inventory: Path, nodes: Sequence[str], action: str, *, dry_run: bool,
                  as_json: bool) -> None:
    """Everything `upi power` does after parsing its arguments."""
    if nodes and nodes[-1] == SECURE_BOOT:
        secure_boot_command(inventory, nodes[:-1], action, dry_run=dry_run, as_json=as_json)
        return
    if action not in ACTIONS:
        raise UsageError(f"the last argument is the action, one of {', '.join(ACTIONS)} "
                         f"(or {SECURE_BOOT} {'|'.join(SECURE_BOOT_ACTIONS)}); got {action!r}")
    inv = load(inventory, nodes)
    act = None if action == "status" else cast(PowerAction, action)
    result = power(inv, nodes, act, dry_run=dry_run, warn=console.warn)
    order = [n.name for n in inv.nodes if n.name in result.states or n.name in result.errors]
    if as_json:
        console.print_json(result.as_json(order))
    else:
        rows = []
        for name in order:
            s = result.states.get(name)
            if s is None:
                rows.append([name, "error", "-", "-", ""])
                continue
            rows.append([name, s.power, str(s.override), s.secure_boot_text, result.sent.get(name, "")])
        console.print_table(None, ["node", "power", "boot override", "Secure Boot",
                                   "sent" if not dry_run else "plan"], rows)
    _failed(result.errors)


def secure_boot_command(inventory: Path, nodes: Sequence[str], action: str, *, dry_run: bool,
                        as_json: bool) -> None:
    """`upi power INVENTORY [NODE...] secure-boot status|on|off`."""
    from upi.bmc.secureboot import NEXT_BOOT, SecureBootAction, secure_boot

    if action not in SECURE_BOOT_ACTIONS:
        raise UsageError(f"after {SECURE_BOOT} comes one of {', '.join(SECURE_BOOT_ACTIONS)}; "
                         f"got {action!r}")
    inv = load(inventory, nodes)
    act = None if action == "status" else cast(SecureBootAction, action)
    result = secure_boot(inv, nodes, act, dry_run=dry_run, warn=console.warn)
    order = [n.name for n in inv.nodes if n.name in result.states or n.name in result.errors]
    if as_json:
        console.print_json(result.as_json(order))
    else:
        rows = []
        for name in order:
            s = result.states.get(name)
            rows.append([name, "error", "-", "-", ""] if s is None else
                        [name, s.enable_text, s.current or "-", s.mode or "-", result.sent.get(name, "")])
        console.print_table(None, ["node", "Secure Boot (next boot)", "current boot", "mode",
                                   "sent" if not dry_run else "plan"], rows)
    if act is not None and not dry_run and any(v != "none" for v in result.sent.values()):
        console.progress(f"Secure Boot: the change {NEXT_BOOT} (power restart, or boot-metal)")
    _failed(result.errors)


@dataclass(frozen=True)
class Watch:
    """`--watch`: follow the booted nodes until their Nodes register, flipping their PXE files."""

    kubeconfig: Path
    render_dir: Path
    timeout: float
    poll: float = 10.0


def watch_options(*, watch: bool, dry_run: bool, kubeconfig: Path | None, assets: Path | None,
                  render_dir: Path | None, timeout: float, poll: float = 10.0) -> Watch | None:
    """The --watch settings, checked before any BMC is touched."""
    if not watch:
        return None
    if dry_run:
        raise UsageError("--watch cannot be combined with --dry-run")
    if render_dir is None:
        raise UsageError("--watch flips each node's PXE file to local boot as it joins: name the "
                         "render dir with -o DIR")
    if timeout <= 0 or poll <= 0:
        raise UsageError("--timeout and --poll must be positive")
    found = find_kubeconfig(kubeconfig, assets)
    if found is None:
        raise UsageError("--watch needs a kubeconfig: pass --kubeconfig or --dir ASSETS")
    connect(found).close()  # an unusable kubeconfig is exit 2 now, before a BMC is touched
    return Watch(found, render_dir, timeout, poll)


def _follow(inventory: Path, inv: Inventory, names: list[str], watch: Watch) -> list[str]:
    from upi.localboot import JoinHooks, flip_as_they_join
    from upi.wait.nodes import node_readiness

    console.progress(f"watching {', '.join(names)} until their Nodes register "
                     f"(at most {watch.timeout / 60:g} min)")
    hooks = JoinHooks(note=console.progress, warn=console.warn,
                      registered=lambda: {s.name for s in node_readiness(watch.kubeconfig)})
    return flip_as_they_join(inventory, inv, watch.render_dir, names, hooks, threading.Event(),
                             poll=watch.poll, deadline=time.monotonic() + watch.timeout)


def boot_metal_command(inventory: Path, nodes: Sequence[str], *, dry_run: bool, as_json: bool,
                       watch: Watch | None = None) -> None:
    """Everything `upi boot-metal` does after parsing its arguments."""
    inv = load(inventory, nodes)
    result = boot_metal(inv, nodes, dry_run=dry_run, warn=console.warn)
    order = [n.name for n in inv.nodes if n.name in result.booted or n.name in result.errors]
    left = _follow(inventory, inv, list(result.booted), watch) if watch and result.booted else []
    if as_json:
        doc: list[dict[str, Any]] = [result.booted[n].as_json() if n in result.booted
                                     else {"node": n, "error": result.errors[n]} for n in order]
        if watch:
            for item in doc:
                if item["node"] in result.booted:
                    item["joined"] = item["node"] not in left
        console.print_json(doc)
    else:
        rows = []
        for name in order:
            b = result.booted.get(name)
            rows.append([name, "error", "-", "-"] if b is None
                        else [name, str(b.override), b.reset, b.power])
        console.print_table(None, ["node", "boot override", "reset", "power"], rows)
    if left:
        limit = watch.timeout / 60 if watch else 0
        result.errors.update({n: f"{n}: no Node registered within {limit:g} min" for n in left})
    _failed(result.errors)
