"""`upi push` over SSH to a real sshd on loopback; dnsmasq and haproxy validate on the 'host'."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import require
from pushkit import Site, Sshd, fingerprint_of, keygen, make_site

from upi.cli import app
from upi.inventory import load_inventory
from upi.push import PushError, push_files
from upi.render import RenderedFile, haproxy_cfg


@pytest.fixture(scope="module")
def sshd(sshd):
    """conftest's sshd, for pushes: they also run the real config checkers on the host."""
    require("dnsmasq")
    require("haproxy")
    return sshd


def _site(tmp_path: Path, example_dir: Path, runner, sshd: Sshd, known: str | None = None) -> Site:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line() if known is None else known)
    ssh = {"host": "127.0.0.1", "port": sshd.port, "user": "root",
           "known_hosts": str(known_hosts), "identity_file": str(sshd.client_key)}
    return make_site(tmp_path, example_dir, runner, ssh)


def _push(runner, site: Site, *extra: str):
    return runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])


def test_first_push_uploads_validates_and_reloads(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {f["status"] for f in doc["files"]} == {"new"}
    commands = {c["purpose"]: c for c in doc["commands"]}
    assert commands["validate dnsmasq/dns.conf"]["argv"][:2] == ["dnsmasq", "--test"]
    assert commands["validate haproxy/haproxy.cfg"]["returncode"] == 0
    etc = site.root / "etc"
    assert (etc / "dnsmasq.d/dns.conf").read_bytes() == (site.out / "dnsmasq/dns.conf").read_bytes()
    assert (etc / "haproxy/haproxy.cfg").read_bytes() == (site.out / "haproxy/haproxy.cfg").read_bytes()
    assert (site.root / "var/lib/tftpboot/pxelinux.cfg/01-52-54-00-21-03-53").is_file()
    ign = site.root / "var/www/html/ignition/bootstrap.ign"
    assert stat.S_IMODE(ign.stat().st_mode) == 0o644
    assert site.reload_log() == ["dnsmasq", "haproxy"]
    assert not list(site.root.rglob("*.upi-new")), "staged copies are renamed, never left behind"


def test_second_push_changes_nothing_and_reloads_nothing(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    assert _push(runner, site).exit_code == 0
    result = _push(runner, site, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert {f["status"] for f in doc["files"]} == {"unchanged"}
    assert doc["commands"] == []
    assert site.reload_log() == ["dnsmasq", "haproxy"]


def test_dry_run_shows_the_plan_and_touches_nothing(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    result = _push(runner, site, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "haproxy -c -f" in result.output and "would upload" in result.output
    assert not site.root.exists()
    assert site.reload_log() == []


def test_unknown_host_key_is_refused_with_its_fingerprint(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd, known="")
    result = _push(runner, site, "--only", "load_balancer")
    assert result.exit_code == 1
    fp = fingerprint_of(sshd.host_key.with_suffix(".pub"))
    assert fp in result.output
    assert f"[127.0.0.1]:{sshd.port} is not in" in result.output
    assert f"ssh-keyscan -p {sshd.port} -t ssh-ed25519 127.0.0.1 >> {tmp_path / 'known_hosts'}" \
        in result.output
    assert not site.root.exists()


def test_changed_host_key_is_refused(runner, tmp_path, example_dir, sshd) -> None:
    other = keygen(tmp_path / "other_ed25519")
    site = _site(tmp_path, example_dir, runner, sshd, known=sshd.known_hosts_line(other))
    result = _push(runner, site)
    assert result.exit_code == 1
    assert "CHANGED" in result.output
    assert fingerprint_of(sshd.host_key.with_suffix(".pub")) in result.output
    assert fingerprint_of(tmp_path / "other_ed25519.pub") in result.output
    assert not site.root.exists()


def test_broken_haproxy_cfg_replaces_nothing_and_reloads_nothing(
        runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    assert _push(runner, site).exit_code == 0
    cfg = site.root / "etc/haproxy/haproxy.cfg"
    before = cfg.read_bytes()
    broken = RenderedFile("haproxy/haproxy.cfg", before + b"\nlisten broken\n    bind *:notaport\n", 0o644)
    with pytest.raises(PushError) as info:
        push_files(load_inventory(site.inventory), [broken], target="load_balancer")
    message = str(info.value)
    assert "haproxy rejected it" in message and "nothing was replaced" in message
    assert "notaport" in message  # haproxy's own output, from the host
    assert cfg.read_bytes() == before
    assert not list(cfg.parent.glob(".*"))
    assert site.reload_log() == ["dnsmasq", "haproxy"]


def test_removing_the_bootstrap_keeps_one_backup_and_reloads(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    assert _push(runner, site).exit_code == 0
    cfg = site.root / "etc/haproxy/haproxy.cfg"
    before = cfg.read_bytes()
    inv = load_inventory(site.inventory)
    result = push_files(inv, [haproxy_cfg(inv, include_bootstrap=False)], target="load_balancer")
    assert [f.status for f in result.files] == ["changed"]
    assert b"bootstrap" in before and b"server bootstrap" not in cfg.read_bytes()
    assert (cfg.parent / ".haproxy.cfg.upi-backup").read_bytes() == before
    assert site.reload_log() == ["dnsmasq", "haproxy", "haproxy"]


def _transport(sshd: Sshd, tmp_path: Path):
    from upi.remote import SshTransport

    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    return SshTransport("127.0.0.1", port=sshd.port, known_hosts=known, identity_file=sshd.client_key)


def test_a_dropped_connection_is_retried_once(tmp_path, sshd) -> None:
    t = _transport(sshd, tmp_path)
    assert t.run(["echo", "one two"]).stdout == "one two\n"
    t._client.get_transport().close()  # the link drops between two commands
    assert t.run(["printf", "%s", "it's quoted"]).stdout == "it's quoted"
    t.close()


def test_a_command_that_runs_too_long_is_stopped(tmp_path, sshd) -> None:
    from upi.remote import RemoteError

    t = _transport(sshd, tmp_path)
    with pytest.raises(RemoteError, match="`sleep 5` timed out after 0.2 s"):
        t.run(["sleep", "5"], timeout=0.2)
    t.close()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_host_that_answers_without_end_is_cut_off(tmp_path, sshd, stream: str) -> None:
    # A broken or hostile host printing forever: upi keeps at most OUTPUT_CAP of it in memory.
    from upi.remote import RemoteError
    from upi.remote.ssh import OUTPUT_CAP

    t = _transport(sshd, tmp_path)
    redirect = "" if stream == "stdout" else " 1>&2"
    with pytest.raises(RemoteError, match="printed more than 4 MiB; output dropped"):
        t.run(["sh", "-c", f"yes{redirect}"], timeout=60)
    assert OUTPUT_CAP == 4 * 1024 * 1024
    # The connection stays usable for the next command.
    assert t.run(["echo", "after"]).stdout == "after\n"
    t.close()


def test_a_large_rhcos_file_is_streamed_intact(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd)
    rootfs = site.out / "http" / "rhcos" / "rhcos-live-rootfs.x86_64.img"
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    blob = bytes(range(256)) * (5 * 4096 + 7)  # ~5 MiB: several 1 MiB chunks and a tail
    rootfs.write_bytes(blob)
    result = _push(runner, site, "--only", "provisioner")
    assert result.exit_code == 0, result.output
    landed = site.root / "var/www/html/rhcos/rhcos-live-rootfs.x86_64.img"
    assert landed.read_bytes() == blob
    assert stat.S_IMODE(landed.stat().st_mode) == 0o644


class _TrailingChannel:
    """A channel as sshd drives it under load: the exit status first (sshd reaped the command),
    the command's last output a few polls later, then EOF."""

    def __init__(self, late: bool) -> None:
        self.out = [b"a" * 64 + b"  /x/.bootstrap.ign.upi-new\n"]
        self.polls = 0 if late else 99
        self._fd, self._w = os.pipe()  # select() needs a descriptor; nothing is ever written

    @property
    def eof_received(self) -> bool:
        return not self.out

    closed = False

    def recv_ready(self) -> bool:
        return bool(self.out) and self.polls >= 3

    def recv(self, n: int) -> bytes:
        return self.out.pop(0)

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        self.polls += 1
        return True

    def recv_exit_status(self) -> int:
        return 0

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:  # pragma: no cover - only on a timeout
        pass


@pytest.mark.parametrize("late", [True, False])
def test_output_that_trails_the_exit_status_is_not_lost(late: bool) -> None:
    # Under load, sha256sum's line reached upi after its exit status and was dropped: push then
    # said "the upload ... is incomplete or altered" about a good upload.
    from upi.remote.ssh import _collect

    rc, out, err = _collect(_TrailingChannel(late), 5.0)  # type: ignore[arg-type]
    assert rc == 0 and out.endswith(b"/x/.bootstrap.ign.upi-new\n") and err == b""
