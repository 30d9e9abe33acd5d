"""Real dnsmasq serving TFTP as the provisioner does: the rendered `dnsmasq/` files, unmodified.

dnsmasq has no option for another TFTP port, and the rendered files bind the
provisioner's interface (and loopback) on port 69 and 53. So the server runs
inside a network namespace whose bridge carries the provisioner's interface
name and IP (tests/pxe_harness.py `Lab`); a test runs its client in there
with `lab.inside(...)`, against `lab_ip(inventory)` or 127.0.0.1 of the
namespace. Only the TFTP root and the lease file are moved (`Lab.start_rendered`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from conftest import inventory_path, require, require_root
from pxe_harness import Lab
from typer.testing import CliRunner

from upi.cli import app
from upi.inventory import load_inventory

TFTP_PORT = 69


@contextlib.contextmanager
def serve_tftp(root: Path, work: Path, inventory: str = "dgxpod") -> Iterator[Lab]:
    """The rendered dnsmasq of `inventory` serving `root` over TFTP; yields its namespace."""
    require_root("a network namespace for the provisioner's dnsmasq")
    dnsmasq = require("dnsmasq")
    out = work / f"tftp-server-{inventory}"
    result = CliRunner().invoke(app, ["render", str(inventory_path(inventory)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    inv = load_inventory(inventory_path(inventory))
    address = f"{inv.provisioner.ip}/{inv.network.machine_cidr.prefixlen}"
    with Lab(work / f"tftp-lab-{inventory}", inv.provisioner.interface, address) as lab:
        lab.start_rendered(dnsmasq, out, root, work / f"tftp-{inventory}.log")
        yield lab


def lab_ip(inventory: str = "dgxpod") -> str:
    """The provisioner's address: where the rendered dnsmasq answers inside the lab."""
    return str(load_inventory(inventory_path(inventory)).provisioner.ip)
