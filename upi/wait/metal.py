"""`upi wait`'s metal helper: boot bare-metal workers when they can be served, flip their PXE files.

The right moment to network-boot a worker is when the machine config
server answers through the load balancer (`https://api-int:22623`): before
that the RHCOS installer writes the disk, the node reboots and its ignition
fetch fails. The probe verifies the server with the root CA that the
worker's pointer ignition carries, so only the cluster's own MCS counts.
As each worker's Node registers, its per-MAC PXE file is flipped to local
boot (upi.localboot), so the machine-config reboots never reinstall it.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote_to_bytes

from upi.installed import installed_nodes, load_record
from upi.inventory.model import Inventory, Machine, Node
from upi.localboot import JoinHooks

MCS_PORT = 22623
POLL = 10.0
Probe = Callable[[], tuple[bool, str]]


def metal_workers(inv: Inventory) -> list[Node]:
    """Bare-metal nodes that join as workers (the DGX systems)."""
    return [n for n in inv.workers if n.machine_kind is Machine.metal]


def ignition_ca(assets: Path) -> bytes | None:
    """The root CA in ASSETS/worker.ign (a data URL in ignition.security.tls), or None."""
    try:
        doc = json.loads((assets / "worker.ign").read_text())
        cas = doc["ignition"]["security"]["tls"]["certificateAuthorities"]
        source = str(cas[0]["source"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    head, _, data = source.partition(",")
    if not head.startswith("data:"):
        return None
    return base64.b64decode(data) if head.endswith(";base64") else unquote_to_bytes(data)


def mcs_probe(inv: Inventory, assets: Path, *, address: str | None = None, port: int = MCS_PORT,
              timeout: float = 5.0) -> Probe:
    """A probe of whether the machine config server answers `/healthz` through the load balancer."""
    host = f"api-int.{inv.cluster.domain}"
    target = address or str(inv.load_balancer.ip)

    def probe() -> tuple[bool, str]:
        ca = ignition_ca(assets)
        if ca is None:
            return False, f"no root CA in {assets / 'worker.ign'} to verify the machine config server"
        try:
            ctx = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:  # not a certificate: never an MCS to trust
            return False, f"the root CA in {assets / 'worker.ign'} is not a usable certificate ({exc})"
        try:
            with socket.create_connection((target, port), timeout=timeout) as raw, \
                    ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
                            .encode())
                line = tls.recv(256).split(b"\r\n", 1)[0].decode("latin-1")
        except (OSError, ssl.SSLError) as exc:
            return False, f"https://{target}:{port} ({host}): {exc}"
        parts = line.split()
        ok = len(parts) >= 2 and parts[1] == "200"
        return ok, f"https://{target}:{port}/healthz answered {line!r}"

    return probe


MetalHooks = JoinHooks  # what the helper reports to (upi wait's display), and which Nodes exist


def run_metal(inventory: Path, inv: Inventory, render_dir: Path | None, hooks: MetalHooks, probe: Probe,
              stop: threading.Event, *, boot: bool = True, poll: float | None = None) -> None:
    """Wait for the MCS, boot the metal workers with a BMC, then flip each one's PXE file as it joins."""
    from upi.bmc import boot_metal
    from upi.localboot import flip_as_they_join

    poll = POLL if poll is None else poll
    workers = metal_workers(inv)
    done = installed_nodes(inv, load_record(render_dir))[0] if render_dir else frozenset()
    pending = [n.name for n in workers if n.name not in done]
    if not pending:
        return
    to_boot = [n.name for n in workers if n.name in pending and n.bmc is not None] if boot else []
    if to_boot:
        why = ""
        while not stop.is_set():
            ok, why = probe()
            if ok:
                break
            stop.wait(poll)
        if stop.is_set():
            return
        hooks.note(f"machine config server answers through the load balancer ({why}): "
                   f"booting {', '.join(to_boot)} over Redfish")
        result = boot_metal(inv, to_boot, warn=hooks.warn)
        for name, b in result.booted.items():
            hooks.note(f"{name}: one-time network boot {b.override}, {b.reset} sent, power {b.power}")
        for message in result.errors.values():
            hooks.warn(f"{message}; boot it by hand (upi boot-metal)")
    if render_dir is None:
        hooks.warn("no render dir (-o): the PXE files of " + ", ".join(pending) + " are not flipped "
                   "to local boot as they join; run `upi render --installed NODE` and `upi push`")
        return
    flip_as_they_join(inventory, inv, render_dir, pending, hooks, stop, poll=poll)
