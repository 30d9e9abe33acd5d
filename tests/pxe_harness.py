"""Network-boot qemu against rendered PXE files (reference: pxe-boot-test.md).

A `Lab` is one network namespace whose bridge carries the provisioner's
name and IP from the inventory, real dnsmasq running the rendered `dnsmasq/`
directory exactly as written (only the TFTP root and lease file are moved
into the test's directory), and qemu clients (SeaBIOS + iPXE, or OVMF) on
taps. The kernel is Debian's (downloaded once, cached outside the repo); the
initramfs is built here and prints /proc/cmdline to the serial port.
"""

from __future__ import annotations

import ctypes
import gzip
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from upi.runner import run

FALLBACK_MARKER = "upi.test.fallback=1"
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS.fd")
# Secure Boot enforced, Microsoft's keys enrolled (Debian `ovmf`, README.Debian): needs q35
# with SMM and the flash marked secure, else the variables could be changed from the OS.
OVMF_SB_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.secboot.fd")
OVMF_SB_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.ms.fd")
BOOT_TIMEOUT = 150.0
# Secure Boot refusing an image: shim's verification (shim.c, "Verification failed") and
# the firmware's own LoadImage() (EFI_SECURITY_VIOLATION / EFI_ACCESS_DENIED, as printed).
SECURITY_FAILURES = ("Security Violation", "Access Denied")
# Loader prompts and errors: without these a broken config waits forever at a prompt.
# The Secure Boot words first: shim's refusal also reads "Verification failed: ...".
LOADER_FAILURES = (*SECURITY_FAILURES, "grub> ", "\rboot: ", "Could not find kernel image",
                   "Press any key to continue", "Failed to boot", " failed: ", "PXE-E")
KERNEL_FAILURES = ("Kernel panic",)
# The firmware moving past the network once the loader handed back (LOCALBOOT 0, GRUB `exit`):
# pxelinux says so itself (then SeaBIOS tries floppy, CD and disk, each "Boot failed: ..." in
# these diskless VMs); OVMF, out of boot entries, starts its own setup menu (UiApp).
LOCAL_BOOT_SIGNS = ("Booting from local disk", '"UiApp" from')
_ANSI = re.compile(r"\x1b\[[0-9;?=]*[A-Za-z]")
INIT_SCRIPT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox dmesg -n 1    # kernel messages off the console: they would split the CMDLINE line
fw=BIOS; [ -d /sys/firmware/efi ] && fw=UEFI
{ echo "CMDLINE: $(/bin/busybox cat /proc/cmdline)"; echo "FIRMWARE: $fw"; } > /dev/ttyS0
/bin/busybox poweroff -f
"""
_names = itertools.count()
_T = TypeVar("_T")
CLONE_NEWNET = 0x40000000
# The site's router, not the provisioner, sends IPv6 router advertisements; without them
# iPXE waits 10-15 s for IPv6. A second dnsmasq plays that router (no DNS, DHCP or TFTP).
ROUTER_V6 = "2001:db8:99::1/64"


# --- kernel and initramfs -------------------------------------------------------------------

def cache_dir() -> Path:
    """Where the downloaded kernel lives between runs (never inside the repo)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "upi-test"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _kernel_package() -> str:
    out = run(["apt-cache", "depends", "linux-image-amd64"], timeout=60, check=False).stdout
    found = re.search(r"Depends: (linux-image-\S+)", out)
    if not found and os.geteuid() == 0:  # a fresh machine without package lists
        run(["apt-get", "update", "-q"], timeout=300)
        out = run(["apt-cache", "depends", "linux-image-amd64"], timeout=60).stdout
        found = re.search(r"Depends: (linux-image-\S+)", out)
    if not found:
        raise RuntimeError("cannot find the versioned linux-image package (apt-cache depends)")
    return found.group(1)


def kernel_image() -> Path:
    """A Debian kernel (serial console built in): apt-get download + dpkg-deb -x, cached."""
    cache = cache_dir()
    cached = sorted(cache.glob("vmlinuz-*"))
    if cached:
        return cached[-1]
    package = _kernel_package()
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        run(["apt-get", "download", package], timeout=600, cwd=Path(tmp))
        deb = next(Path(tmp).glob("*.deb"))
        run(["dpkg-deb", "-x", deb, Path(tmp) / "x"], timeout=300)
        vmlinuz = next((Path(tmp) / "x" / "boot").glob("vmlinuz-*"))
        # Renamed whole from this run's own directory (the same file system): two test
        # processes fetching at once (pytest -n) each put a complete file there.
        return vmlinuz.replace(cache / vmlinuz.name)


def _cpio_entry(ino: int, name: str, mode: int, data: bytes = b"") -> bytes:
    encoded = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
    head = b"070701" + "".join(f"{v:08x}" for v in fields).encode() + encoded
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def build_initramfs(busybox: Path) -> bytes:
    """gzip'd newc cpio: a static busybox and an init that prints the command line."""
    entries = [("bin", 0o40755, b""), ("proc", 0o40755, b""), ("sys", 0o40755, b""),
               ("dev", 0o40755, b""), ("bin/busybox", 0o100755, busybox.read_bytes()),
               ("init", 0o100755, INIT_SCRIPT.encode())]
    body = b"".join(_cpio_entry(i + 1, n, m, d) for i, (n, m, d) in enumerate(entries))
    body += _cpio_entry(0, "TRAILER!!!", 0)
    return gzip.compress(body, mtime=0)


def stage_tftp(tftp: Path, kernel_name: str, initrd_name: str, kernel: Path, initrd: bytes) -> None:
    """Kernel and initramfs under the names the rendered configs use, plus marked fallbacks.

    The fallbacks (pxelinux.cfg/default, grub.cfg) boot the same kernel with
    FALLBACK_MARKER, so a client that missed its per-MAC file shows it on /proc/cmdline.
    """
    for rel, content in ((kernel_name, kernel.read_bytes()), (initrd_name, initrd)):
        (tftp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tftp / rel).write_bytes(content)
    (tftp / "pxelinux.cfg").mkdir(exist_ok=True)
    (tftp / "pxelinux.cfg/default").write_text(
        f"DEFAULT fallback\nPROMPT 0\nTIMEOUT 1\nLABEL fallback\n"
        f"    KERNEL {kernel_name}\n    APPEND initrd={initrd_name} {FALLBACK_MARKER}\n")
    (tftp / "grub.cfg").write_text(
        f"set timeout=1\nmenuentry fallback {{\n    linux {kernel_name} {FALLBACK_MARKER}\n"
        f"    initrd {initrd_name}\n}}\n")


# --- what happened on the serial port ---------------------------------------------------------

@dataclass
class Outcome:
    """How one boot ended: `cmdline` (init printed it), `local` (handed back to the firmware), `failed`,
    `exited` or `timeout`."""

    kind: str
    detail: str
    elapsed: float
    serial: str
    cmdline: str | None = None
    firmware: str | None = None


def read_outcome(serial: str, elapsed: float, exited: bool, timeout: float) -> Outcome | None:
    """The outcome the serial log shows so far, or None while the boot is still going."""
    found = re.search(r"CMDLINE: ([^\r\n]*)\r?\n.*?FIRMWARE: (\w+)", serial, re.S)
    if found:
        return Outcome("cmdline", "init ran", elapsed, serial, found.group(1).strip(), found.group(2))
    loader_part = serial.split("Linux version ", 1)[0]
    plain = _ANSI.sub("", loader_part)  # pxelinux moves the cursor in the middle of its words
    for pattern in LOCAL_BOOT_SIGNS:
        if pattern in plain:
            return Outcome("local", pattern, elapsed, serial)
    for pattern in LOADER_FAILURES:
        if pattern in loader_part:
            return Outcome("failed", pattern.strip(), elapsed, serial)
    for pattern in KERNEL_FAILURES:
        if pattern in serial:
            return Outcome("failed", pattern, elapsed, serial)
    if exited:
        return Outcome("exited", "qemu exited without init output", elapsed, serial)
    if elapsed > timeout:
        return Outcome("timeout", f"nothing decisive after {timeout:.0f} s", elapsed, serial)
    return None


# --- the lab: namespace, dnsmasq, qemu --------------------------------------------------------

@dataclass
class Vm:
    """One qemu client of the lab."""

    name: str
    firmware: str  # "bios" | "uefi"
    mac: str
    serial: Path
    proc: subprocess.Popen[bytes]
    started: float


@dataclass
class Lab:
    """A network namespace with a bridge named and addressed like the provisioner's NIC."""

    workdir: Path
    bridge: str
    address: str  # ip/prefix
    ns: str = field(default_factory=lambda: f"upi-pxe-{os.getpid()}-{next(_names)}")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    taps: int = 0
    created: bool = False
    logs: list[Path] = field(default_factory=list)  # links into `public`, made files at close
    # dnsmasq drops to `nobody` as the rendered files say: what it serves must be readable by
    # all, and pytest's directories are not (0700). Files it serves are copied here.
    public: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="upi-lab-")))

    def __enter__(self) -> Lab:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.public.chmod(0o755)
        run(["ip", "netns", "add", self.ns], timeout=10)
        self.created = True
        try:
            for argv in (["link", "set", "lo", "up"],
                         ["link", "add", self.bridge, "type", "bridge"],
                         ["addr", "add", self.address, "dev", self.bridge],
                         # Router advertisements on this prefix spare iPXE a 10-15 s IPv6 wait.
                         ["addr", "add", ROUTER_V6, "dev", self.bridge],
                         ["link", "set", self.bridge, "up"]):
                self.ip(*argv)
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ fails
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ip(self, *argv: str) -> None:
        """`ip -n NS ...`."""
        run(["ip", "-n", self.ns, *argv], timeout=10)

    def close(self) -> None:
        """Kill every process started here, then delete the namespace (and its links)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        if self.created:
            run(["ip", "netns", "delete", self.ns], timeout=10, check=False)
            self.created = False
        for link in self.logs:  # the tests read them after the lab is gone
            target = link.resolve()
            link.unlink()
            if target.exists():
                shutil.copyfile(target, link)
        shutil.rmtree(self.public, ignore_errors=True)

    def spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Start a long-running program inside the namespace (`ip netns exec` execs it)."""
        with log.open("wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_dnsmasq(self, dnsmasq: str, argv: list[str], log: Path, ready: str = "TFTP root is",
                      out: str = "dnsmasq.out", log_dir: tuple[Path, Path] | None = None
                      ) -> subprocess.Popen[bytes]:
        """Run dnsmasq with `argv`; return once its log shows `ready`, else raise with its output.

        `log_dir` (site directory, test directory): the configuration names its own
        log file (`log-facility`, which beats the command line), so the test's
        directory is bind-mounted over the site's one in dnsmasq's own mount
        namespace (`ip netns exec` gives it one); the machine's is never written.
        """
        if log_dir is None:
            argv = [dnsmasq, "--keep-in-foreground", "--pid-file=", f"--log-facility={log}", *argv]
        else:
            site, here = log_dir
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", str(here), str(site),
                    dnsmasq, "--keep-in-foreground", "--pid-file=", *argv]
        proc = self.spawn(argv, self.workdir / out)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if log.exists() and ready in log.read_text(errors="replace"):
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        text = (self.workdir / out).read_text(errors="replace")
        raise RuntimeError(f"dnsmasq did not start (exit {proc.poll()}): {text}")

    def start_rendered(self, dnsmasq: str, rendered: Path, tftp: Path, log: Path) -> Path:
        """Real dnsmasq on the rendered `dnsmasq/` directory, as the provisioner's conf-dir.

        The files run as written. The command line moves only paths (the site's TFTP
        root and lease file do not exist here; dnsmasq lets the command line win) and
        and the directory of the log file the files name (see `start_dnsmasq`): `log`
        becomes a link to the log dnsmasq writes. The files' own `log-dhcp` logs
        every exchange: the tests read the host names sent from it. `tftp` is
        copied where `nobody` can read it; returns the TFTP root dnsmasq serves.
        """
        root = self.public / "tftp"
        shutil.copytree(tftp, root)
        for path in (root, *root.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        site_log = Path(rendered_log_file(rendered))
        here = self.public / "log"
        here.mkdir()
        here.chmod(0o1777)  # dnsmasq writes its log as `nobody`
        log.unlink(missing_ok=True)
        log.symlink_to(here / site_log.name)
        self.logs.append(log)
        self.start_dnsmasq(dnsmasq, [f"--conf-dir={rendered / 'dnsmasq'}", f"--tftp-root={root}",
                                     f"--dhcp-leasefile={self.workdir / 'leases'}"], log,
                           log_dir=(site_log.parent, here))
        return root

    def start_router_ra(self, dnsmasq: str) -> None:
        """The site's IPv6 router: advertisements on the bridge, nothing else (see ROUTER_V6)."""
        prefix = ROUTER_V6.split("/")[0].removesuffix("1")
        self.start_dnsmasq(dnsmasq, ["--port=0", "--enable-ra", f"--dhcp-range={prefix},ra-only,64,1h",
                                     f"--dhcp-leasefile={self.workdir / 'router.leases'}"],
                           self.workdir / "router.log", ready="router advertisement enabled",
                           out="router.out")

    def inside(self, fn: Callable[[], _T]) -> _T:
        """Call `fn` in a thread that has entered the namespace; its sockets and children live there.

        The namespace's loopback and bridge are the provisioner's: an in-process
        `upi check` run this way reaches the rendered dnsmasq as a client on the site would.
        """
        box: dict[str, object] = {}

        def enter_and_call() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {self.ns}")
            finally:
                os.close(fd)
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=enter_and_call, name=f"in-{self.ns}")
        worker.start()
        worker.join()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["value"]  # type: ignore[return-value]

    def tap(self) -> str:
        """A new tap port on the bridge."""
        name = f"tap{self.taps}"
        self.taps += 1
        self.ip("tuntap", "add", "dev", name, "mode", "tap")
        self.ip("link", "set", name, "master", self.bridge, "up")
        return name

    def boot(self, qemu: str, name: str, firmware: str, mac: str, *, secure_boot: bool = False) -> Vm:
        """Start a qemu client that network-boots with `mac` (BIOS: iPXE ROM; UEFI: OVMF).

        `secure_boot`: OVMF enforcing Secure Boot with Microsoft's keys (UEFI only).
        """
        serial = self.workdir / f"{name}.serial"
        serial.touch()
        argv = [qemu, "-accel", "tcg", "-m", "512", "-nographic", "-no-reboot", "-monitor", "none",
                "-netdev", f"tap,id=n0,ifname={self.tap()},script=no,downscript=no",
                "-serial", f"file:{serial}"]
        if firmware == "bios":
            argv += ["-device", f"e1000,netdev=n0,mac={mac}", "-boot", "order=n"]
        else:
            vars_copy = self.workdir / f"{name}.vars.fd"
            shutil.copyfile(OVMF_SB_VARS if secure_boot else OVMF_VARS, vars_copy)
            if secure_boot:
                argv += ["-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on"]
            code = OVMF_SB_CODE if secure_boot else OVMF_CODE
            argv += ["-drive", f"if=pflash,format=raw,readonly=on,file={code}",
                     "-drive", f"if=pflash,format=raw,file={vars_copy}",
                     "-device", f"virtio-net-pci,netdev=n0,mac={mac},bootindex=1,romfile="]
        proc = self.spawn(argv, self.workdir / f"{name}.qemu.out")
        return Vm(name, firmware, mac, serial, proc, time.monotonic())

    def dhcp_discover(self, mac: str, bridge: str | None = None, tries: int = 2) -> None:
        """Send DHCP discovers from `mac` (busybox udhcpc on a veth port of `bridge`, default the
        provisioner's); dnsmasq's log tells the rest.

        The client shares the namespace with dnsmasq, so it may not see the offer;
        what matters is what dnsmasq offered (or refused) to that MAC.
        """
        port = f"probe{self.taps}"
        self.taps += 1
        self.ip("link", "add", port, "type", "veth", "peer", "name", port + "b")
        self.ip("link", "set", port, "address", mac)  # before the link first goes up
        self.ip("link", "set", port + "b", "master", bridge or self.bridge, "up")
        self.ip("link", "set", port, "up")
        run(["ip", "netns", "exec", self.ns, "busybox", "udhcpc", "-i", port, "-n", "-q", "-f",
             "-t", str(tries), "-T", "1", "-s", "/bin/true"], timeout=30, check=False)


def rendered_log_file(rendered: Path) -> str:
    """The log file the rendered dnsmasq files name (`log-facility=`)."""
    text = (rendered / "dnsmasq" / "dhcp-pxe.conf").read_text()
    found = re.findall(r"^log-facility=(\S+)$", text, flags=re.MULTILINE)
    assert len(found) == 1, f"the rendered dhcp-pxe.conf names {len(found)} log files"
    return found[0]


def wait_for_boots(vms: list[Vm], timeout: float = BOOT_TIMEOUT) -> dict[str, Outcome]:
    """Poll every serial log until each VM printed its command line, failed or timed out.

    A VM is killed as soon as its outcome is known, which frees a core for the others.
    """
    outcomes: dict[str, Outcome] = {}
    while len(outcomes) < len(vms):
        for vm in vms:
            if vm.name in outcomes:
                continue
            exited = vm.proc.poll() is not None
            text = vm.serial.read_bytes().decode(errors="replace")
            outcome = read_outcome(text, time.monotonic() - vm.started, exited, timeout)
            if outcome is not None:
                outcomes[vm.name] = outcome
                if not exited:
                    vm.proc.kill()
                vm.proc.wait(timeout=10)
        time.sleep(0.5)
    return outcomes


# --- what dnsmasq did -------------------------------------------------------------------------

@dataclass(frozen=True)
class DnsmasqLog:
    """DHCP and TFTP facts from a dnsmasq log written with log-dhcp."""

    text: str

    def acks(self) -> dict[str, tuple[str, str | None]]:
        """MAC -> (IP, host name) of every DHCPACK."""
        found = re.findall(r"DHCPACK\(\S+\) (\S+) ([0-9a-f:]{17}) ?(\S*)", self.text)
        return {mac: (ip, name or None) for ip, mac, name in found}

    def hostnames_sent(self, mac: str) -> set[str]:
        """Host names (option 12) dnsmasq put into its replies to `mac`."""
        xids = set(re.findall(rf" (\d+) (?:DHCPACK|DHCPOFFER)\(\S+\) \S+ {re.escape(mac)}", self.text))
        names = re.findall(r" (\d+) sent size:\s*\d+ option:\s*12 hostname\s+(\S+)", self.text)
        return {name for xid, name in names if xid in xids}

    def sent(self, tftp_root: Path) -> list[tuple[str, str]]:
        """(file relative to the TFTP root, client IP) for every file TFTP sent."""
        prefix = str(tftp_root).rstrip("/") + "/"
        return [(path.removeprefix(prefix), ip)
                for path, ip in re.findall(r"dnsmasq-tftp\[\d+\]: sent (\S+) to (\S+)", self.text)]

    def offered(self, mac: str) -> set[str]:
        """Every IP dnsmasq offered or acknowledged to `mac`."""
        return set(re.findall(rf"DHCP(?:OFFER|ACK)\(\S+\) (\S+) {re.escape(mac)}", self.text))

    def refused(self, mac: str) -> bool:
        """dnsmasq saw `mac` ask and had no address for it."""
        return bool(re.search(rf"DHCPDISCOVER\(\S+\) {re.escape(mac)} no address available", self.text))


def leases(leasefile: Path) -> dict[str, tuple[str, str]]:
    """MAC -> (IP, host name) from a dnsmasq leasefile."""
    if not leasefile.exists():
        return {}
    rows = (line.split() for line in leasefile.read_text().splitlines())
    return {r[1]: (r[2], r[3]) for r in rows if len(r) >= 4}
