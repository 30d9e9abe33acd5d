"""Helpers for the push tests: a real sshd on loopback, and a pushable inventory."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from conftest import require

from upi.cli import app

IGNITION = {"bootstrap.ign": b'{"ignition":{"version":"3.2.0"}}\n', "master.ign": b"{}\n"}


def keygen(path: Path) -> str:
    subprocess.run([require("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def fingerprint_of(pub: Path) -> str:
    out = subprocess.run([require("ssh-keygen"), "-lf", str(pub)], check=True, timeout=30,
                         capture_output=True, text=True).stdout
    return out.split()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    port: int
    host_key: Path  # private; .pub beside it
    host_pub: str   # "ssh-ed25519 AAAA..."
    client_key: Path
    proc: subprocess.Popen[bytes]

    def known_hosts_line(self, pub: str | None = None) -> str:
        return f"[127.0.0.1]:{self.port} {pub or self.host_pub}\n"


def start_sshd(root: Path, preexec: Callable[[], None] | None = None) -> Sshd:
    """sshd -D on 127.0.0.1:<free port>, key login as the current user, a clean HOME.

    `preexec` runs in the sshd process before exec (a umask, a resource limit):
    every session on that "host" inherits it.
    """
    sshd = require("sshd")
    root.mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir()
    host_key, client_key = root / "host_ed25519", root / "client_ed25519"
    host_pub = keygen(host_key)
    keygen(client_key)
    shutil.copy(client_key.with_suffix(".pub"), root / "authorized_keys")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    port = _free_port()
    # HOME points at an empty dir so the login shell's rc files (slow here) are not read.
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {root}/sshd.pid\n"
        f"AuthorizedKeysFile {root}/authorized_keys\nStrictModes no\nUsePAM no\n"
        f"Subsystem sftp internal-sftp\nSetEnv HOME={root}/home\n")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(root / "sshd_config")],
                            stderr=(root / "sshd.log").open("wb"), preexec_fn=preexec)
    for _ in range(500):  # readiness, not a timing assertion
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError((root / "sshd.log").read_text()) from None
            time.sleep(0.01)
    return Sshd(port, host_key, host_pub, client_key, proc)


@dataclass
class Site:
    inventory: Path
    out: Path
    root: Path      # what the hosts' file systems look like
    reloads: Path   # one line per reload the "service manager" got

    def reload_log(self) -> list[str]:
        return self.reloads.read_text().split() if self.reloads.exists() else []


def make_site(tmp: Path, example_dir: Path, runner, ssh: dict[str, object] | None) -> Site:
    """dgxpod with every host path under `tmp/root`, rendered, with ignition staged in http/."""
    root, reloads = tmp / "root", tmp / "reloads.log"
    inv_path = example_dir / "dgxpod.yaml"
    doc = yaml.safe_load(inv_path.read_text())
    prov, lb = doc["provisioner"], doc["load_balancer"]
    prov.update(tftp_root=f"{root}/var/lib/tftpboot", http_root=f"{root}/var/www/html",
                dnsmasq_dir=f"{root}/etc/dnsmasq.d")
    lb["config_path"] = f"{root}/etc/haproxy/haproxy.cfg"
    for section, service in ((prov, "dnsmasq"), (lb, "haproxy")):
        if ssh is not None:
            section["ssh"] = {**ssh, "reload_command": ["sh", "-c", f"echo {service} >> {reloads}"]}
    inv_path.write_text(yaml.safe_dump(doc))
    out = tmp / "out"
    result = runner.invoke(app, ["render", str(inv_path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    (out / "http" / "ignition").mkdir(parents=True)
    for name, content in IGNITION.items():
        (out / "http" / "ignition" / name).write_bytes(content)
        (out / "http" / "ignition" / name).chmod(0o600)  # as upi ignition keeps them locally
    return Site(inv_path, out, root, reloads)
