"""Every libvirt call of boot-vms: connections, disks, define/start, boot switch, destroy.

libvirt-python is an optional extra (the `libvirt` extra of the checkout's
pyproject.toml): it is imported here, on first use, so the rest of upi works
without it.
"""

from __future__ import annotations

import contextlib
import posixpath
import threading
import xml.etree.ElementTree as ET  # noqa: S405 - edits libvirt's own XML, never user input
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

from upi import DISTRIBUTION
from upi.errors import MissingExtra, VmError
from upi.facts import VmSpec
from upi.render import domain_xml
from upi.vms.plan import Action, DiskFacts, DomainFacts, VmPlan, decide, parse_domain

RUNNING = 1  # VIR_DOMAIN_RUNNING
SHUTOFF = 5  # VIR_DOMAIN_SHUTOFF
STATE_NAMES = {0: "no state", 1: "running", 2: "blocked", 3: "paused", 4: "shutting down",
               5: "shut off", 6: "crashed", 7: "suspended"}
# How to add the extra to the upi that runs, from the checkout: the PyPI project
# named `upi` is another one. libvirt-python is a source package: it compiles.
INSTALL_LIBVIRT = (
    f"install upi's libvirt extra: `pipx inject {DISTRIBUTION} libvirt-python` where pipx installed "
    "upi, or `pip install -e '.[libvirt]'` in the checkout with the virtualenv's pip "
    "(libvirt-python compiles: gcc, pkg-config, python3-dev and libvirt-dev on Debian; "
    "libvirt-devel and python3-devel on RHEL)"
)


def libvirt_module() -> ModuleType:
    """The libvirt module, or a MissingExtra saying how to install the extra that provides it."""
    try:
        import libvirt
    except ImportError:
        raise MissingExtra(f"libvirt-python is not installed; {INSTALL_LIBVIRT}") from None
    # libvirt prints every error to stderr by default; upi reports the ones that matter itself.
    libvirt.registerErrorHandler(_quiet, None)
    return cast(ModuleType, libvirt)


def _quiet(_ctx: object, _err: object) -> None:
    """A libvirt error handler that prints nothing."""


def failed(uri: str, what: str, exc: Exception) -> VmError:
    """A libvirt error as a VmError naming the hypervisor and the operation."""
    message = exc.get_error_message() if hasattr(exc, "get_error_message") else str(exc)
    return VmError(f"{uri}: {what}: {message}")


def no_prompt(uri: str) -> str:
    """`uri` made never to prompt: `no_tty=1` added to an ssh-transport URI that lacks it.

    A `+ssh` URI makes libvirt run the ssh client, which asks on the terminal
    for an unknown host key or a password; with `no_tty=1` libvirt runs it with
    `BatchMode=yes`, so it fails at once and says why.
    """
    parts = urlsplit(uri)
    if not parts.scheme.endswith("+ssh") or "no_tty=" in parts.query:
        return uri
    return uri + ("&" if parts.query else "?") + "no_tty=1"


class Connections:
    """Open libvirt connections by URI, shared by the threads of one run; closed on exit.

    `batch`: nobody answers prompts (`upi status`, `upi wait`'s helper threads,
    under a live display): an ssh-transport URI is opened with no_prompt.
    """

    def __init__(self, opener: Callable[[str], Any] | None = None, *, batch: bool = False) -> None:
        self._opener = opener
        self._batch = batch
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, uri: str) -> Any:
        """The connection to `uri`, opened on first use."""
        with self._lock:
            if uri in self._open:
                return self._open[uri]
        libvirt = libvirt_module()
        try:
            target = no_prompt(uri) if self._batch else uri
            conn = self._opener(target) if self._opener else libvirt.open(target)
        except libvirt.libvirtError as exc:
            raise failed(uri, "cannot connect", exc) from None
        with self._lock:
            return self._open.setdefault(uri, conn)

    def close(self) -> None:
        """Close every connection this object opened."""
        with self._lock:
            conns, self._open = list(self._open.values()), {}
        for conn in conns:
            # Closing a dead connection has nothing to report.
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def lookup(conn: Any, name: str) -> Any | None:
    """The domain called `name`, or None."""
    libvirt = libvirt_module()
    try:
        return conn.lookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return None
        raise


def facts_of(dom: Any) -> DomainFacts:
    """DomainFacts of a defined domain (its persistent config, its current state)."""
    libvirt = libvirt_module()
    xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    return parse_domain(xml, running=dom.state()[0] == RUNNING)


def _pool_holding(conn: Any, directory: str) -> Any | None:
    for pool in conn.listAllStoragePools():
        root = ET.fromstring(pool.XMLDesc(0))  # noqa: S314 - libvirt's own XML
        if posixpath.normpath(root.findtext("target/path", "")) == posixpath.normpath(directory):
            return pool if pool.isActive() else None
    return None


def disk_facts(conn: Any, path: str) -> DiskFacts:
    """Which active pool holds the directory of `path`, and whether the volume exists."""
    libvirt = libvirt_module()
    pool = _pool_holding(conn, posixpath.dirname(path))
    try:
        conn.storageVolLookupByPath(path)
        exists = True
    except libvirt.libvirtError:
        exists = False
    return DiskFacts(pool.name() if pool is not None else None, exists)


def _mac_owner(conn: Any, spec: VmSpec) -> str | None:
    """Another domain (not `spec.name`) with the spec's MAC: two VMs would fight over one lease."""
    libvirt = libvirt_module()
    for dom in conn.listAllDomains():
        if dom.name() == spec.name:
            continue
        xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        if spec.mac.lower() in parse_domain(xml).macs:
            return str(dom.name())
    return None


def inspect(conn: Any, spec: VmSpec, *, replace: bool) -> VmPlan:
    """The plan for one VM on its connection; changes nothing."""
    dom = lookup(conn, spec.name)
    existing = facts_of(dom) if dom is not None else None
    return decide(spec, existing, disk_facts(conn, spec.disk_path), _mac_owner(conn, spec),
                  replace=replace)


def create_disk(conn: Any, spec: VmSpec) -> bool:
    """Create the VM's qcow2 volume, sparse (allocation 0); False if it already exists."""
    if disk_facts(conn, spec.disk_path).exists:
        return False
    pool = _pool_holding(conn, posixpath.dirname(spec.disk_path))
    if pool is None:
        raise VmError(f"{spec.uri}: no active storage pool holds {posixpath.dirname(spec.disk_path)}")
    pool.createXML(
        f"<volume><name>{posixpath.basename(spec.disk_path)}</name>"
        f"<capacity unit='GiB'>{spec.disk_gib}</capacity><allocation>0</allocation>"
        "<target><format type='qcow2'/></target></volume>",
        0,
    )
    return True


def remove_domain(dom: Any) -> None:
    """Stop (if running) and undefine a domain, with its UEFI NVRAM where the driver keeps one."""
    libvirt = libvirt_module()
    if dom.isActive():
        dom.destroy()
    try:
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    except libvirt.libvirtError:
        dom.undefine()  # drivers without NVRAM (the test driver) reject the flag


def remove_disk(conn: Any, path: str) -> bool:
    """Delete the volume at `path`; False if there is none."""
    libvirt = libvirt_module()
    try:
        vol = conn.storageVolLookupByPath(path)
    except libvirt.libvirtError:
        return False
    vol.delete(0)
    return True


def apply(conn: Any, plan: VmPlan, report: Callable[[str, str], None]) -> None:
    """Carry out a create/replace plan: disk, define from domain_xml(spec), start."""
    spec = plan.spec
    if plan.action is Action.recreate:
        old = lookup(conn, spec.name)
        if old is not None:
            remove_domain(old)
            report("removed", "the differing domain")
        remove_disk(conn, spec.disk_path)  # a replaced VM installs onto a fresh disk
    if create_disk(conn, spec):
        report("disk created", f"{spec.disk_gib} GiB {spec.disk_path}")
    dom = conn.defineXML(domain_xml(spec))
    report("defined", "network boot, then disk")
    dom.create()
    report("started", "installing over PXE")


def boot_from_disk_xml(xml: str) -> str:
    """The domain XML switched to its installed disk: no network boot, reboots restart it."""
    root = ET.fromstring(xml)  # noqa: S314 - libvirt's own XML
    os_el = root.find("os")
    if os_el is None:
        raise VmError(f"domain {root.findtext('name')} has no <os> element")
    for boot in os_el.findall("boot"):
        os_el.remove(boot)
    ET.SubElement(os_el, "boot", dev="hd")
    on_reboot = root.find("on_reboot")
    if on_reboot is None:
        on_reboot = ET.SubElement(root, "on_reboot")
    on_reboot.text = "restart"
    return ET.tostring(root, encoding="unicode")


def switch_to_disk(conn: Any, dom: Any) -> Any:
    """Redefine a shut-off domain to boot from its disk; the new domain object."""
    libvirt = libvirt_module()
    return conn.defineXML(boot_from_disk_xml(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)))
