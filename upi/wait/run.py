"""`upi wait` wired to the world: the installer, the CSR approver, the VM shepherd, HAProxy, libvirt.

The state machine (driver.py) decides what happens; this module supplies its
hooks, runs the helpers in background threads and always stops them.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from upi.errors import UpiError, UsageError
from upi.ignition import ignition_status
from upi.installer import Installer, locate, pull_secret_fragments
from upi.inventory import Inventory, load_inventory
from upi.inventory.model import Machine
from upi.safefs import read_named_text
from upi.wait.display import WaitDisplay
from upi.wait.driver import WaitFailed, WaitHooks, WaitInterrupted, WaitOptions, WaitResult, run_wait
from upi.wait.kubeconfig import check_copy
from upi.wait.metal import metal_workers
from upi.wait.state import STATE_FILE, WaitState, load_state
from upi.wait.workers import Worker, Workers

INSTALLER_STATE = ".openshift_install_state.json"
APPROVER, SHEPHERD, METAL, STATUS = "CSR approver", "VM shepherd", "metal booter", "status reader"
CONSOLE_HOST = "console-openshift-console"
SHEPHERD_POLL = 1.0  # seconds: how soon a stop (or a missed libvirt event) is noticed


class IgnitionExpired(UsageError):
    """The ignition files are past 24 h: nodes booting from them cannot join."""


@dataclass(frozen=True)
class WaitRequest:
    """Everything `upi wait` was asked to do."""

    inventory: Path
    assets: Path
    render_dir: Path | None = None
    kubeconfig: Path | None = None
    connect: str | None = None
    keep_bootstrap: bool = False
    approve: bool = True
    vms: bool = True
    metal: bool = True  # boot metal workers over Redfish, flip their PXE files as they join
    deadline_minutes: float | None = None
    retry_pause: float = 10.0
    installer: Path | None = None
    kubeconfig_to: Path | None = None
    force: bool = False
    gpu: bool = False  # go on from install-complete into `upi gpu`'s steps
    gpu_timeout: float = 60.0  # minutes for the GPU steps
    gpu_poll: float = 5.0  # seconds between looks at the cluster during the GPU steps
    status_every: float = 15.0  # seconds between `upi status` looks at the nodes (0: none)

    @property
    def admin_kubeconfig(self) -> Path:
        """The kubeconfig the approver and the summary use."""
        return self.kubeconfig or self.assets / "auth" / "kubeconfig"


@dataclass
class WaitRun:
    """A finished run: the driver's result and what upi did around it."""

    result: WaitResult
    bootstrap: list[str] = field(default_factory=list)  # what removing the bootstrap did
    worker_errors: dict[str, str] = field(default_factory=dict)
    inventory: Inventory | None = None


def preflight(req: WaitRequest, state: WaitState, display: WaitDisplay) -> None:
    """Refuse early what could only fail later: no install in --dir, stale ignition, a kubeconfig clash."""
    if not (req.assets / INSTALLER_STATE).is_file():
        raise UsageError(f"--dir {req.assets}: no openshift-install state here; run "
                         f"`upi ignition {req.inventory} --dir {req.assets} -o DIR` first")
    if req.deadline_minutes is not None and req.deadline_minutes <= 0:
        raise UsageError(f"--deadline must be positive, not {req.deadline_minutes:g}")
    if req.retry_pause < 0:
        raise UsageError(f"--retry-pause must not be negative, not {req.retry_pause:g}")
    if req.gpu:
        from upi.gpu.flow import check_pace

        check_pace(req.gpu_timeout, req.gpu_poll, "--gpu-timeout")
    if req.approve and not req.admin_kubeconfig.exists():  # a FIFO or a directory: connect() says
        raise UsageError(f"no kubeconfig at {req.admin_kubeconfig}: pass --kubeconfig, or "
                         "--no-approve to approve CSRs some other way")
    if req.gpu and not req.admin_kubeconfig.exists():
        raise UsageError(f"--gpu: no kubeconfig at {req.admin_kubeconfig}: pass --kubeconfig")
    if req.approve or req.gpu:
        from upi.csr.connect import connect

        connect(req.admin_kubeconfig).close()  # an unusable kubeconfig is exit 2 now, as elsewhere
    if req.kubeconfig_to is not None:
        check_copy(req.assets / "auth" / "kubeconfig", req.kubeconfig_to, force=req.force)
    # Once bootstrapped, the cluster no longer needs the ignition certificates' validity.
    if not state.is_done("bootstrap_complete"):
        fresh = ignition_status(req.render_dir or req.assets)
        if fresh.level == "expired":
            raise IgnitionExpired(f"{fresh.message}; upi wait refuses to wait for nodes that "
                                  "cannot join")
        if fresh.level == "warn":
            display.warn(fresh.message)


def _shepherds(req: WaitRequest, inv: Inventory, state: WaitState) -> bool:
    """Whether this run restarts VMs from disk (the VM shepherd): only until bootstrap-complete."""
    from upi.vms.plan import targets

    return req.vms and bool(targets(inv, req.connect)) and not state.is_done("bootstrap_complete")


def _destroys_bootstrap_vm(req: WaitRequest, inv: Inventory, state: WaitState) -> bool:
    """Whether this run destroys the bootstrap VM (after taking it out of HAProxy)."""
    return (req.vms and not req.keep_bootstrap and not state.is_done("bootstrap_removed")
            and inv.bootstrap.machine_kind is Machine.vm)


def check_libvirt(req: WaitRequest, inv: Inventory, state: WaitState) -> None:
    """Refuse at the start a run whose VM work needs libvirt-python when it is not installed.

    Without it the VM shepherd would only warn, the wait would sit out the whole
    bootstrap phase with the masters powered off, and removing the bootstrap
    would fail at its last step. `--no-vms` (the VMs are the admin's) needs none.
    """
    from upi.errors import MissingExtra
    from upi.vms.libvirt_ops import INSTALL_LIBVIRT, libvirt_module
    from upi.vms.plan import targets

    work = []
    if _shepherds(req, inv, state):
        names = ", ".join(s.name for s in targets(inv, req.connect))
        work.append(f"start {names} from disk after their install")
    if _destroys_bootstrap_vm(req, inv, state):
        work.append(f"destroy the bootstrap VM {inv.bootstrap.name} once bootstrapped")
    if not work:
        return
    try:
        libvirt_module()
    except MissingExtra:
        raise UsageError(
            f"{req.inventory}: upi wait would {' and '.join(work)} through libvirt, but libvirt-python "
            f"is not installed; {INSTALL_LIBVIRT}. Or, if you start and destroy the VMs yourself, "
            "pass --no-vms") from None


def _approver(req: WaitRequest, display: WaitDisplay) -> Worker:
    from upi.csr.approve import approve_csr

    def job(stop: threading.Event) -> None:
        approve_csr(req.inventory, kubeconfig=req.admin_kubeconfig, assets=req.assets, mode="watch",
                    dry_run=False, log=display.csr, stop=stop)

    return Worker(APPROVER, job, display.warn)


def _shepherd(req: WaitRequest, inv: Inventory, conns: Any, timeout: float,
              display: WaitDisplay) -> Worker:
    from upi.vms import watch_vms

    def job(stop: threading.Event) -> None:
        left = watch_vms(inv, connect=req.connect, timeout=timeout, poll=SHEPHERD_POLL,
                         report=display.vm, stop=stop, connections=conns)
        if left and not stop.is_set():
            display.warn(f"{SHEPHERD}: not running from disk after {timeout / 60:.0f} min: "
                         + ", ".join(left))

    return Worker(SHEPHERD, job, display.warn)


def _metal(req: WaitRequest, inv: Inventory, display: WaitDisplay) -> Worker:
    from upi.wait.metal import MetalHooks, mcs_probe, run_metal
    from upi.wait.nodes import node_readiness

    def registered() -> set[str]:
        return {s.name for s in node_readiness(req.admin_kubeconfig)}

    hooks = MetalHooks(note=display.note, warn=display.warn, registered=registered)

    def job(stop: threading.Event) -> None:
        run_metal(req.inventory, inv, req.render_dir, hooks, mcs_probe(inv, req.assets), stop)

    return Worker(METAL, job, display.warn)


def _status(req: WaitRequest, inv: Inventory, display: WaitDisplay) -> Worker | None:
    """`upi status`'s looks at the nodes (the inventory's logs, libvirt, the API), every status_every.

    The first look is taken here, in the calling thread, before any other
    helper starts: its lazy imports (lightkube, paramiko, libvirt) then run
    in one thread only. Imports racing in several threads can meet a module
    half initialized (seen: asyncio, under paramiko). None when even the
    first look fails (a warning): the wait goes on without the table.
    """
    import upi.status.cluster  # noqa: F401 - its imports (cryptography) here, not in the reader's thread
    from upi.errors import UpiError
    from upi.status.look import Looker, sources

    src = sources(inv, dnsmasq_log=None, access_log=None, out=req.render_dir, assets=req.assets,
                  kubeconfig=req.admin_kubeconfig, connect=req.connect)
    looker = Looker(inv, src)
    try:
        display.nodes(looker.look())
    except UpiError as exc:
        looker.close()
        display.warn(f"{STATUS}: {exc}; no nodes' table")
        return None

    def job(stop: threading.Event) -> None:
        try:
            while not stop.wait(req.status_every):
                display.nodes(looker.look())
        finally:
            looker.close()

    return Worker(STATUS, job, display.warn)


def _remove_bootstrap(req: WaitRequest, inv: Inventory, conns: Any, display: WaitDisplay,
                      done: list[str]) -> None:
    """HAProxy without the bootstrap (validated, reloaded), then the bootstrap VM destroyed."""
    from upi.push import push_files
    from upi.render import haproxy_cfg
    from upi.vms import destroy_vm

    node = inv.bootstrap
    try:
        pushed = push_files(inv, [haproxy_cfg(inv, include_bootstrap=False)], target="load_balancer")
        status = ", ".join(f"{f.host}:{f.dest} ({f.status})" for f in pushed.files)
        checked = [" ".join(s.argv[:2]) for s in pushed.steps
                   if s.purpose.startswith("validate") and s.returncode == 0]
        done.append(f"HAProxy without {node.name}: {status}"
                    + (f", passed `{checked[0]}`" if checked else ""))
        display.note(done[-1])
        _record_retired(req, display, done)
        if node.machine_kind is Machine.vm and req.vms:
            gone = destroy_vm(inv, node.name, connect=req.connect, report=display.vm, connections=conns)
            done.append(f"VM {node.name} on {gone.uri}: "
                        + ("destroyed" if gone.domain_removed else "already gone"))
        elif node.machine_kind is Machine.vm:
            done.append(f"VM {node.name} is yours (--no-vms): destroy it by hand")
            display.warn(done[-1])
        else:
            done.append(f"{node.name} is bare metal: power it off by hand")
            display.warn(done[-1])
    except UpiError as exc:
        raise WaitFailed(f"removing the bootstrap failed: {exc}\nfix that and run upi wait again: "
                         "it resumes at this step") from None


def _record_retired(req: WaitRequest, display: WaitDisplay, done: list[str]) -> None:
    """Keep the render dir in step with HAProxy: a later `upi push` must not bring the bootstrap back."""
    from upi.renderdir import render

    hint = "run `upi render ... --retire-bootstrap` before the next `upi push`"
    if req.render_dir is None:
        done.append(f"no render dir given (-o): {hint}")
        display.warn(done[-1])
        return
    try:
        render(req.inventory, req.render_dir, retire_bootstrap=True)
    except UpiError as exc:  # the load balancer is already right: say so, don't fail the install
        done.append(f"could not re-render {req.render_dir} without the bootstrap ({exc}): {hint}")
        display.warn(done[-1])
        return
    done.append(f"{req.render_dir}: re-rendered with the bootstrap retired")
    display.note(done[-1])


def _hooks(req: WaitRequest, inv: Inventory, installer: Installer, workers: Workers, conns: Any,
           display: WaitDisplay, done: list[str]) -> WaitHooks:
    def run_installer(target: str, feed: Any) -> int:
        if target == "install-complete":  # every VM runs from disk once bootstrapped
            workers.stop(SHEPHERD)
        return installer.run("wait-for", target, on_line=feed, check=False).returncode

    def remove_bootstrap() -> None:
        workers.stop(SHEPHERD)  # it must not see the bootstrap VM vanish
        _remove_bootstrap(req, inv, conns, display, done)

    return WaitHooks(run_installer=run_installer, remove_bootstrap=remove_bootstrap,
                     on_event=display.event, on_stage=display.stage)


def _first_imports(req: WaitRequest, inv: Inventory) -> None:
    """Import here, in one thread, what the helpers would import on first use in theirs.

    Two threads importing the same package for the first time can meet one of
    its modules half initialized ("partially initialized module 'asyncio'"):
    a traceback that kills a helper at random. The API client is built once
    (and closed): lightkube and its HTTP stack load then, not in the CSR
    approver's and the metal booter's threads at the same moment.
    tests/test_wait_threads.py audits every import a helper thread makes.
    """
    from upi.csr.connect import connect

    if req.approve or (req.metal and metal_workers(inv)):
        with contextlib.suppress(UpiError):  # the helper reports a bad kubeconfig in its own words
            connect(req.admin_kubeconfig).close()
    if req.metal and metal_workers(inv):
        import upi.bmc  # noqa: F401 - the Redfish client (sushy, requests)
        import upi.localboot  # noqa: F401 - re-render and push as nodes join
        import upi.renderdir  # noqa: F401 - the render dir's transaction the flip writes through


def run(req: WaitRequest, display: WaitDisplay) -> WaitRun:
    """Check, start the helpers, drive the installer to the end, stop the helpers."""
    from upi.vms import Connections

    inv = load_inventory(req.inventory)
    if req.gpu and not any(n.gpu for n in inv.nodes):
        raise UsageError(f"--gpu: {req.inventory} marks no node gpu: true; nothing to set up")
    binary = locate(req.installer, version=inv.cluster.openshift_version)
    state = load_state(req.assets)
    preflight(req, state, display)
    check_libvirt(req, inv, state)
    secret = read_named_text(inv.resolve(inv.cluster.pull_secret_file))  # never hangs on a FIFO
    installer = Installer(binary, req.assets, pull_secret_fragments(secret))
    deadline = None if req.deadline_minutes is None else req.deadline_minutes * 60
    opts = WaitOptions(req.assets, keep_bootstrap=req.keep_bootstrap, retry_pause=req.retry_pause,
                       deadline=deadline)
    done: list[str] = []
    _first_imports(req, inv)
    # batch: the VM shepherd's thread has no terminal to ask on (an unknown ssh host key would
    # hang it under the live display); libvirt's ssh runs with BatchMode and says why it failed.
    with Connections(batch=True) as conns, Workers() as workers:
        # First: its first look runs here, before any other helper's thread (_status).
        if req.status_every > 0 and not state.is_done("install_complete") and (
                status := _status(req, inv, display)) is not None:
            workers.add(status)
        if req.approve:
            workers.add(_approver(req, display))
        if _shepherds(req, inv, state):
            workers.add(_shepherd(req, inv, conns, deadline or opts.bootstrap_budget, display))
        if req.metal and metal_workers(inv) and not state.is_done("install_complete"):
            workers.add(_metal(req, inv, display))
        try:
            result = run_wait(_hooks(req, inv, installer, workers, conns, display, done), opts)
        except WaitInterrupted as exc:
            where = display.where()
            workers.stop_all()
            raise WaitInterrupted(
                f"interrupted during {where}; openshift-install and the helpers were stopped; "
                f"finished stages are kept in {req.assets / STATE_FILE}: run upi wait again to "
                "resume", exc.stage) from None
    errors = {w.name: w.error for w in workers.jobs.values() if w.error}
    # Resumed after install-complete: the installer did not print it this time.
    result.console_url = result.console_url or f"https://{CONSOLE_HOST}.apps.{inv.cluster.domain}"
    return WaitRun(result, done, errors, inv)
