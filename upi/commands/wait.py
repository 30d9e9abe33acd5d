"""`upi wait`: drive the install to the end, then the summary (table or JSON)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upi import console
from upi.wait.display import WaitDisplay, stage_label
from upi.wait.kubeconfig import CopyOutcome, copy_kubeconfig
from upi.wait.nodes import NodeStatus, node_readiness
from upi.wait.run import WaitRequest, WaitRun, run
from upi.wait.state import STAGES

if TYPE_CHECKING:
    from upi.gpu.flow import GpuReport

TARGETS = {"bootstrap_complete": "bootstrap-complete", "install_complete": "install-complete"}


@dataclass
class Summary:
    """What the end of `upi wait` reports."""

    stages: list[dict[str, Any]]
    console_url: str | None
    kubeconfig: Path
    nodes: list[NodeStatus] | None = None
    nodes_error: str | None = None
    bootstrap: list[str] = field(default_factory=list)
    csrs_approved: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    copied: CopyOutcome | None = None
    password: str | None = None
    gpu: GpuReport | None = None  # --gpu: the GPU steps after install-complete

    @property
    def ok(self) -> bool:
        """The install finished and, with --gpu, every GPU node is verified."""
        return self.gpu is None or self.gpu.ok

    def to_json(self) -> dict[str, Any]:
        """The summary for --json (the password only when it was asked for)."""
        doc: dict[str, Any] = {
            "stages": self.stages, "console_url": self.console_url,
            "kubeconfig": str(self.kubeconfig),
            "nodes": None if self.nodes is None else [
                {"name": n.name, "roles": list(n.roles), "ready": n.ready} for n in self.nodes],
            "nodes_error": self.nodes_error, "bootstrap": self.bootstrap,
            "csrs_approved": self.csrs_approved, "warnings": self.warnings,
            "kubeconfig_to": None if self.copied is None else {
                "path": str(self.copied.dest), "action": self.copied.action,
                "backup": str(self.copied.backup) if self.copied.backup else None},
        }
        if self.password is not None:
            doc["kubeadmin_password"] = self.password
        if self.gpu is not None:
            doc["gpu"] = self.gpu.to_json()
        doc["ok"] = self.ok
        return doc


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _stages(done: WaitRun, keep_bootstrap: bool) -> list[dict[str, Any]]:
    result, rows = done.result, []
    for stage in STAGES:
        seconds = result.seconds.get(stage)
        if stage in result.resumed:
            status = "done in an earlier run"
        elif seconds is not None:
            status = "done"
        else:
            status = "kept (--keep-bootstrap)" if keep_bootstrap else "not done"
        target = TARGETS.get(stage)
        rows.append({"stage": stage, "seconds": seconds, "status": status,
                     "attempts": result.attempts.get(target, 0) if target else None})
    return rows


def summarize(req: WaitRequest, done: WaitRun, display: WaitDisplay, *,
              show_password: bool) -> Summary:
    """Nodes (when the API answers), the kubeconfig copy and, if asked, the password."""
    summary = Summary(_stages(done, req.keep_bootstrap), done.result.console_url,
                      req.assets / "auth" / "kubeconfig", bootstrap=done.bootstrap,
                      csrs_approved=list(display.progress.csrs_approved),
                      warnings=list(display.progress.warnings))
    try:
        summary.nodes = node_readiness(req.admin_kubeconfig)
    except Exception as exc:  # noqa: BLE001 - the install is finished: a missing table must not fail it
        summary.nodes_error = f"the API did not answer: {exc}"
    if req.kubeconfig_to is not None:
        summary.copied = copy_kubeconfig(summary.kubeconfig, req.kubeconfig_to, force=req.force)
    if show_password:
        summary.password = (req.assets / "auth" / "kubeadmin-password").read_text().strip()
    return summary


def _print(summary: Summary) -> None:
    console.print_table("upi wait", ["stage", "time", "attempts", "status"], (
        (stage_label(s["stage"]), _minutes(s["seconds"]),
         "-" if s["attempts"] is None else s["attempts"], s["status"]) for s in summary.stages))
    for line in summary.bootstrap:
        console.say(f"bootstrap: {line}")
    if summary.nodes is not None:
        console.print_table("nodes", ["node", "roles", "ready"], (
            (n.name, ",".join(n.roles) or "-", "Ready" if n.ready else "NotReady")
            for n in summary.nodes))
    else:
        console.say(f"nodes: {summary.nodes_error}")
    console.say(f"CSRs approved: {len(summary.csrs_approved)}")
    for warning in summary.warnings:  # a BMC, a helper: said during the run, long scrolled away
        console.say(f"warning: {warning}")
    if summary.console_url:
        console.say(f"console: {summary.console_url}")
    console.say(f"kubeconfig: {summary.kubeconfig}")
    if summary.copied is not None:
        console.say(f"kubeconfig: {summary.copied}")
    if summary.password is not None:
        console.say(f"kubeadmin password: {summary.password}")
    else:
        console.say(f"kubeadmin password: in {summary.kubeconfig.parent / 'kubeadmin-password'} "
                    "(not shown; --show-password prints it)")
    if summary.gpu is not None:
        from upi.commands.gpu import show

        show(summary.gpu, as_json=False)  # the per-node table, then "GPUs verified" or the diagnosis


def _gpu(req: WaitRequest, done: WaitRun, display: WaitDisplay) -> GpuReport:
    """From install-complete into `upi gpu`'s steps, on the same display."""
    from upi.commands.gpu import gpu_on_cluster
    from upi.inventory import load_inventory

    inv = done.inventory or load_inventory(req.inventory)
    return gpu_on_cluster(inv, req.admin_kubeconfig, display, timeout_minutes=req.gpu_timeout,
                          poll=req.gpu_poll)


def wait_command(req: WaitRequest, *, show_password: bool = False, as_json: bool = False,
                 live: bool | None = None) -> Summary:
    """Run `upi wait` and print its summary; progress goes to stderr under --json.

    With `req.gpu` the run goes on from install-complete into the GPU steps;
    the caller exits 1 unless `summary.ok`.
    """
    display = WaitDisplay(out=sys.stderr if as_json else sys.stdout, live=live)
    with display:
        done = run(req, display)
        gpu = _gpu(req, done, display) if req.gpu else None
    summary = summarize(req, done, display, show_password=show_password)
    summary.gpu = gpu
    if as_json:
        console.print_json(summary.to_json())
    else:
        _print(summary)
    return summary
