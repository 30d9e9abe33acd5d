"""`upi power` and `upi boot-metal`: flags checked, the BMC flows run, a table or JSON printed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from upi import console
from upi.bmc import BmcError, boot_metal, power
from upi.bmc.redfish import PowerAction
from upi.errors import UsageError
from upi.inventory import Inventory, load_inventory
from upi.inventory.rules import bmc_files

ACTIONS = ("status", "on", "off", "restart")


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
    if action not in ACTIONS:
        raise UsageError(f"the last argument is the action, one of {', '.join(ACTIONS)}; got {action!r}")
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


def boot_metal_command(inventory: Path, nodes: Sequence[str], *, dry_run: bool, as_json: bool) -> None:
    """Everything `upi boot-metal` does after parsing its arguments."""
    inv = load(inventory, nodes)
    result = boot_metal(inv, nodes, dry_run=dry_run, warn=console.warn)
    order = [n.name for n in inv.nodes if n.name in result.booted or n.name in result.errors]
    if as_json:
        console.print_json([result.booted[n].as_json() if n in result.booted
                            else {"node": n, "error": result.errors[n]} for n in order])
    else:
        rows = []
        for name in order:
            b = result.booted.get(name)
            rows.append([name, "error", "-", "-"] if b is None
                        else [name, str(b.override), b.reset, b.power])
        console.print_table(None, ["node", "boot override", "reset", "power"], rows)
    _failed(result.errors)
