"""A real nginx, as a provisioner's HTTP server or an RHCOS mirror: one configuration, one launcher.

nginx runs in the foreground as one process (no master, no daemon) with every
path it writes (pid, logs, temp dirs) under the test's work dir. `write_conf`
and `argv` serve a test that starts it its own way (inside a network
namespace: tests/test_status.py); `nginx()` starts it on a free loopback port.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from certs import Issued
from check_helpers import LOOPBACK, free_port
from conftest import require

CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 64; }}
http {{
{http}
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    types {{ application/json ign; }}
    default_type application/octet-stream;
    server {{
        listen {host}:{port}{tls};
        root {root};
    }}
}}
"""
NO_ACCESS_LOG = "    access_log off;"


def write_conf(work: Path, root: Path, *, host: str = LOOPBACK, port: int, http: str = NO_ACCESS_LOG,
               cert: Issued | None = None) -> Path:
    """WORK/nginx.conf serving `root` on host:port (HTTPS with `cert`); `http`: lines of the http block."""
    work.mkdir(parents=True, exist_ok=True)
    tls = ""
    if cert is not None:
        (work / "server.pem").write_bytes(cert.cert_pem)
        (work / "server.key").write_bytes(cert.key_pem)
        tls = f" ssl; ssl_certificate {work}/server.pem; ssl_certificate_key {work}/server.key"
    conf = work / "nginx.conf"
    conf.write_text(CONF.format(work=work, host=host, port=port, root=root, http=http, tls=tls))
    return conf


def argv(conf: Path) -> list[str]:
    """The command line that runs nginx with `conf` (errors before it reads it go to its dir too)."""
    return [require("nginx"), "-c", str(conf), "-p", str(conf.parent), "-e", str(conf.parent / "error.log")]


@contextlib.contextmanager
def nginx(root: Path, work: Path, *, http: str = NO_ACCESS_LOG, cert: Issued | None = None) -> Iterator[int]:
    """nginx serving `root` on a free loopback port until the block ends; yields the port.

    A port taken between choosing and binding it is chosen again (five tries).
    """
    for _ in range(5):
        port = free_port()
        conf = write_conf(work, root, port=port, http=http, cert=cert)
        (work / "error.log").unlink(missing_ok=True)  # this try's errors only
        proc = subprocess.Popen(argv(conf), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        end = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < end:
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.2):
                break
            time.sleep(0.02)
        else:
            err = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
            log = work / "error.log"
            err += log.read_text(errors="replace") if log.exists() else ""
            if "Address already in use" in err:
                continue
            proc.kill()
            proc.wait(5)
            raise AssertionError(f"nginx did not start: {err}")
        break
    else:
        raise AssertionError("nginx found no free port")
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
