"""Shepherd VMs through their install: when one powers off, boot it from disk and start it.

Lifecycle events wake the loop early; every wake-up (event or poll interval)
re-reads each VM's state, so a hypervisor whose events do not arrive is still
handled, only later.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

from upi.errors import VmError
from upi.facts import VmSpec
from upi.vms import libvirt_ops as ops
from upi.vms.status import Report, VmEvent

_loop_lock = threading.Lock()
_loop_started = False


def ensure_event_loop() -> bool:
    """Run libvirt's default event loop in a daemon thread, once per process; False if it cannot.

    Call it before opening the connections that should deliver events.
    """
    global _loop_started
    libvirt = ops.libvirt_module()
    with _loop_lock:
        if not _loop_started:
            try:
                libvirt.virEventRegisterDefaultImpl()
            except libvirt.libvirtError:
                return False
            threading.Thread(target=_run_event_loop, name="libvirt-events", daemon=True).start()
            _loop_started = True
    return True


def _run_event_loop() -> None:
    libvirt = ops.libvirt_module()
    while True:
        libvirt.virEventRunDefaultImpl()


def _subscribe(conn: Any, wake: queue.Queue[str]) -> int | None:
    """Lifecycle events of `conn` put the domain name on `wake`; None if the driver refuses."""
    libvirt = ops.libvirt_module()

    def on_lifecycle(_conn: Any, dom: Any, _event: int, _detail: int, _opaque: Any) -> None:
        wake.put(dom.name())

    try:
        return int(conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                               on_lifecycle, None))
    except libvirt.libvirtError:
        return None


def _unsubscribe(conn: Any, callback_id: int | None) -> None:
    if callback_id is None:
        return
    libvirt = ops.libvirt_module()
    with contextlib.suppress(libvirt.libvirtError):  # the connection is going away anyway
        conn.domainEventDeregisterAny(callback_id)


class _Shepherd:
    """Per-hypervisor watch state: the last state reported for each VM."""

    def __init__(self, conn: Any, specs: list[VmSpec], report: Report) -> None:
        self.conn = conn
        self.pending = {s.name: s for s in specs}
        self.report = report
        self.last: dict[str, str] = {}

    def tell(self, spec: VmSpec, state: str, detail: str = "") -> None:
        if self.last.get(spec.name) != state:
            self.last[spec.name] = state
            self.report(VmEvent(spec.name, spec.uri, state, detail))

    def step(self, spec: VmSpec) -> bool:
        """Look at one VM and act on it; True if it did something (look again at once)."""
        dom = ops.lookup(self.conn, spec.name)
        if dom is None:
            raise VmError(f"{spec.uri}: {spec.name}: the domain disappeared while being watched")
        facts = ops.facts_of(dom)
        state = dom.state()[0]
        if state == ops.RUNNING and not facts.install_phase:
            self.tell(spec, "up", "running from disk")
            del self.pending[spec.name]
            return False
        if state == ops.RUNNING:
            self.tell(spec, "installing", "booted from the network")
            return False
        if state != ops.SHUTOFF:
            self.tell(spec, ops.STATE_NAMES.get(state, f"state {state}"))
            return False
        if facts.install_phase:
            self.tell(spec, "powered off", "install finished")
            dom = ops.switch_to_disk(self.conn, dom)
            self.tell(spec, "switched", "boots from disk now")
        dom.create()
        self.tell(spec, "started", "from disk")
        return True


def watch_hypervisor(conn: Any, specs: list[VmSpec], *, deadline: float, poll: float,
                     report: Report, stop: threading.Event | None = None) -> list[str]:
    """Shepherd `specs` on one connection until each runs from disk; the names still not back."""
    wake: queue.Queue[str] = queue.Queue()
    callback_id = _subscribe(conn, wake)
    shepherd = _Shepherd(conn, specs, report)
    try:
        while shepherd.pending and not (stop and stop.is_set()):
            acted = False
            for spec in list(shepherd.pending.values()):
                acted = shepherd.step(spec) or acted
            remaining = deadline - time.monotonic()
            if acted or not shepherd.pending:
                continue
            if remaining <= 0:
                break
            _wait(wake, min(poll, remaining))
    finally:
        _unsubscribe(conn, callback_id)
    return sorted(shepherd.pending)


def _wait(wake: queue.Queue[str], seconds: float) -> None:
    """Sleep until an event or `seconds`, then drop the other queued events (one look serves all)."""
    try:
        wake.get(timeout=seconds)
    except queue.Empty:
        return
    while not wake.empty():
        wake.get_nowait()
