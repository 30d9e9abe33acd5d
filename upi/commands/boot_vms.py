"""`upi boot-vms`: flags checked, the library called, its result printed."""

from __future__ import annotations

from pathlib import Path

from upi import console
from upi.errors import UsageError, VmError
from upi.inventory import load_inventory
from upi.render import domain_xml
from upi.vms import Action, BootResult, StatusBoard, boot_vms, destroy_vm
from upi.vms.plan import targets


def run(inventory: Path, *, connect: str | None, watch: bool, dry_run: bool, replace: bool,
        destroy: str | None, timeout: float, as_json: bool) -> None:
    """Everything `upi boot-vms` does after parsing its flags."""
    if destroy and (watch or replace):
        raise UsageError("--destroy cannot be combined with --watch or --replace")
    if watch and dry_run:
        raise UsageError("--watch cannot be combined with --dry-run")
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {timeout:g}")
    inv = load_inventory(inventory, check_files=False)
    specs = targets(inv, connect)
    if destroy:
        with StatusBoard(specs, live=False, quiet=as_json) as board:
            gone = destroy_vm(inv, destroy, connect=connect, dry_run=dry_run, report=board)
        if as_json:
            console.print_json({"name": gone.name, "hypervisor": gone.uri, "dry_run": dry_run,
                                "domain": gone.domain_removed, "disk": gone.disk_removed})
        return
    if not specs:
        console.say(f"{inventory}: no node has machine: vm; nothing to boot")
        return
    with StatusBoard(specs, live=None if not dry_run else False, quiet=as_json or dry_run) as board:
        result = boot_vms(inv, connect=connect, replace=replace, watch=watch, dry_run=dry_run,
                          timeout=timeout, report=board)
    _print(result, dry_run=dry_run, as_json=as_json)
    if result.not_back:
        raise VmError(f"timed out after {timeout:g} s; not running from disk yet: "
                      + ", ".join(result.not_back))


def _print(result: BootResult, *, dry_run: bool, as_json: bool) -> None:
    if as_json:
        doc = result.as_json()
        if dry_run:
            for item, plan in zip(doc, result.plans, strict=True):
                item["xml"] = domain_xml(plan.spec)
        console.print_json(doc)
        return
    if dry_run:
        for plan in result.plans:
            console.say(f"# {plan.spec.name} on {plan.spec.uri}: would {plan.summary}")
            if plan.action is not Action.keep:
                console.say(domain_xml(plan.spec).rstrip("\n"))
        return
    counts = {a: sum(1 for p in result.plans if p.action is a) for a in Action}
    console.say(f"{len(result.plans)} VMs: {counts[Action.create]} created, "
                f"{counts[Action.recreate]} recreated, {counts[Action.keep]} left alone")
