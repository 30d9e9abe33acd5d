"""`upi wait` against everything at once: the FAKE installer, the FAKE API server (CSRs),
libvirt's test driver (VMs), HAProxy pushed through a real sshd (or locally) and checked
by the real `haproxy -c`; and Ctrl-C on a real process, then a resuming re-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bootvms_support import node_uri, require_libvirt, shut_off
from childsignals import sigint_default
from conftest import require, table_row
from csr_cases import client
from pushkit import Site, Sshd, make_site
from wait_support import installer_log, make_assets, script, state, wait_args

from upi.cli import app
from upi.facts import vm_specs
from upi.inventory import load_inventory
from upi.render import domain_xml

pytestmark = pytest.mark.usefixtures("fake_openshift_install")
ALL_STAGES = {"bootstrap_complete", "bootstrap_removed", "install_complete"}


@pytest.fixture(scope="module")
def sshd(sshd):
    """conftest's sshd, for pushes: they also run the real config checkers on the host."""
    require("haproxy")
    return sshd


def until(predicate: Callable[[], bool], what: str, limit: float = 120.0,
          proc: subprocess.Popen[str] | None = None) -> None:
    """Poll a condition; the limit only guards against a hang (generous: CI machines are busy).

    With `proc`, a process that ended before the condition held fails at once with its output,
    so a failure says why instead of "gave up".
    """
    end = time.monotonic() + limit
    while not predicate():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"upi exited {proc.returncode} before {what}:\n{out}\n{err}")
        if time.monotonic() >= end:
            detail = ""
            if proc is not None:
                proc.kill()
                out, err = proc.communicate()
                detail = f"\nupi's output so far:\n{out}\n{err}"
            pytest.fail(f"gave up waiting for {what} after {limit:.0f} s{detail}")
        time.sleep(0.02)


def hypervisor(tmp_path: Path, inventory: Path) -> str:
    """A test-driver node holding the inventory's VMs, shut off after their RHCOS install."""
    require_libvirt()
    specs = vm_specs(load_inventory(inventory, check_files=False))
    return node_uri(tmp_path, *(shut_off(domain_xml(s)) for s in specs))


def ssh_site(tmp_path: Path, example_dir: Path, runner, sshd: Sshd) -> Site:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())
    return make_site(tmp_path, example_dir, runner, {
        "host": "127.0.0.1", "port": sshd.port, "user": "root", "known_hosts": str(known_hosts),
        "identity_file": str(sshd.client_key)})


def test_full_run_approves_csrs_restarts_vms_and_retires_the_bootstrap(
        runner, tmp_path, example_dir, sshd, kube, monkeypatch) -> None:
    site = ssh_site(tmp_path, example_dir, runner, sshd)
    assets = make_assets(runner, site.inventory, tmp_path)
    script(monkeypatch, tmp_path, install_complete=["slow"])
    uri = hypervisor(tmp_path, site.inventory)

    def cluster() -> None:  # the cluster's side: a worker asks to join while upi waits
        try:
            until(lambda: "to initialize" in installer_log(assets), "install-complete to start")
            spec = client("worker-0")
            kube.add_csr(spec.name, spec.pem, **spec.kwargs())
            until(lambda: "client-worker-0" in kube.approved(), "the CSR to be approved")
            kube.add_node("worker-0", ready=True)
        finally:
            (tmp_path / "release").touch()

    worker = threading.Thread(target=cluster, daemon=True)
    worker.start()
    render_dir = tmp_path / "ign-out"  # the dir `upi ignition -o` staged into, as a user would pass
    result = runner.invoke(app, wait_args(site.inventory, assets, kube, "--connect", uri,
                                          "-o", str(render_dir)))
    worker.join(60)
    assert result.exit_code == 0, result.output
    out = result.stdout
    # The render dir follows the load balancer: a later `upi push` keeps the bootstrap out.
    assert "server bootstrap" not in (render_dir / "haproxy" / "haproxy.cfg").read_text()
    assert json.loads((render_dir / "manifest.json").read_text())["bootstrap_retired"] is True
    assert kube.approved() == {"client-worker-0"}
    assert "  csr: approved client-worker-0: client CSR of inventory node worker-0" in out
    for name in ("master-0", "master-1", "master-2"):
        assert f"  vm: {name}: started (from disk)" in out
    assert "  vm: bootstrap: destroyed (removed domain)" in out
    lb_cfg = (site.root / "etc/haproxy/haproxy.cfg").read_text()
    assert "10.33.3.53" not in lb_cfg and "bootstrap" not in lb_cfg
    assert "10.33.3.50:6443" in lb_cfg
    assert (f"  HAProxy without bootstrap: root@127.0.0.1:{sshd.port}:{site.root}/etc/haproxy/"
            "haproxy.cfg (new), passed `haproxy -c`") in out
    assert site.reload_log() == ["haproxy"]
    assert table_row(out, "worker-0", "-", "Ready")
    assert state(assets) == ALL_STAGES


def _procs_running(assets: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if str(assets).encode() in argv and b"wait-for" in argv:
            found.append(cmdline.parent.name)
    return found


def test_ctrl_c_stops_everything_and_a_rerun_resumes_at_install_complete(
        runner, tmp_path, example_dir, kube, monkeypatch) -> None:
    require("haproxy")
    site = make_site(tmp_path, example_dir, runner, {"local": True})
    assets = make_assets(runner, site.inventory, tmp_path)
    script(monkeypatch, tmp_path, install_complete=["hang", "ok"])
    uri = hypervisor(tmp_path, site.inventory)
    argv = [sys.executable, "-m", "upi", *wait_args(site.inventory, assets, kube, "--connect", uri)]
    # A new session, so that SIGINT reaches upi and the installer together, as Ctrl-C does.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_default)
    # Ctrl-C once upi has printed the installer's waiting line (its stage's detail is set by
    # then), not once the installer's log has it: upi reads the installer's output on its own
    # time, and an interrupt before that line was read names no step.
    seen: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        until(lambda: proc.poll() is not None or any("to initialize" in line for line in seen),
              "upi to print the installer's waiting line")
        assert proc.poll() is None, "".join(seen) + (proc.stderr.read() if proc.stderr else "")
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait(timeout=60)
        reader.join(timeout=60)
        out = "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    # "last:" is the installer's waiting line, or its own "interrupted" if it was read first.
    assert err.startswith("upi: error: interrupted during install-complete (waiting for the cluster "
                          "to initialize; last: ")
    assert err.rstrip().endswith("run upi wait again to resume")
    assert "Traceback" not in err
    assert _procs_running(assets) == []
    assert state(assets) == {"bootstrap_complete", "bootstrap_removed"}
    assert "  vm: bootstrap: destroyed (removed domain)" in out

    again = runner.invoke(app, wait_args(site.inventory, assets, kube, "--connect", uri))
    assert again.exit_code == 0, again.output
    assert "== bootstrap-complete: already done" in again.stdout
    assert "== remove the bootstrap: already done" in again.stdout
    assert "vm:" not in again.stdout  # no shepherd, no second destroy
    assert installer_log(assets).count("for the Kubernetes API at") == 1
    assert site.reload_log() == ["haproxy"]
    assert state(assets) == ALL_STAGES


def test_no_vms_retires_the_bootstrap_from_haproxy_and_leaves_its_vm_without_libvirt(
        runner, tmp_path, example_dir, kube, monkeypatch) -> None:
    # `--no-vms`: the VMs are the admin's (another hypervisor, another tool); upi needs no
    # libvirt-python, yet the load balancer still drops the bootstrap.
    require("haproxy")
    monkeypatch.setitem(sys.modules, "libvirt", None)  # `import libvirt` raises ImportError
    site = make_site(tmp_path, example_dir, runner, {"local": True})
    assets = make_assets(runner, site.inventory, tmp_path)
    script(monkeypatch, tmp_path)
    result = runner.invoke(app, wait_args(site.inventory, assets, kube, "--no-vms"))
    assert result.exit_code == 0, result.output
    assert "bootstrap" not in (site.root / "etc/haproxy/haproxy.cfg").read_text()
    assert "upi: warning: VM bootstrap is yours (--no-vms): destroy it by hand" in result.stdout
    assert "bootstrap: VM bootstrap is yours (--no-vms): destroy it by hand" in result.stdout
    assert "vm:" not in result.stdout and "libvirt" not in result.output
    assert site.reload_log() == ["haproxy"]
    assert state(assets) == ALL_STAGES
