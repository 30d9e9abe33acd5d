"""`upi push` against a hostile render dir, hostile hosts and failing writes (issue 15).

The promise: nothing outside the target roots is ever written, followed or
deleted; a private file is never published; a failed or interrupted push
leaves the files already on the host byte-identical; bad input is exit 2
naming the file, never a hang or a traceback. Every case goes through the
CLI, several variants each, to `local: true` targets and to a real sshd.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, require
from pushkit import Site, Sshd, make_site, start_sshd

from upi.cli import app

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nTOP-SECRET\n-----END OPENSSH PRIVATE KEY-----\n"


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry below root (links as their target text), with its mode."""
    snap: dict[str, tuple[bytes, int]] = {}
    if not root.exists():
        return snap
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = p.relative_to(root).as_posix()
        if stat.S_ISLNK(st.st_mode):
            snap[rel] = (os.readlink(p).encode(), -1)
        elif stat.S_ISREG(st.st_mode):
            snap[rel] = (p.read_bytes(), stat.S_IMODE(st.st_mode))
        else:
            snap[rel] = (b"<special>", stat.S_IMODE(st.st_mode))
    return snap


def _files_of(snap: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, int]]:
    """A snapshot without the directories: a failed push may leave a new, empty one (0755)."""
    return {k: v for k, v in snap.items() if v != (b"<special>", 0o755)}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the render dir and the host roots: nothing may touch it."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "id_rsa").write_bytes(SECRET)
    (d / "id_rsa").chmod(0o600)
    (d / "victim.cfg").write_bytes(b"# must stay as it is\n")
    return d


@pytest.fixture(scope="module")
def sshd(sshd):
    """conftest's sshd, for pushes: they also run the real config checkers on the host."""
    require("dnsmasq")
    require("haproxy")
    return sshd


def _ssh_cfg(tmp_path: Path, server: Sshd) -> dict[str, object]:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(server.known_hosts_line())
    return {"host": "127.0.0.1", "port": server.port, "user": "root",
            "known_hosts": str(known_hosts), "identity_file": str(server.client_key)}


@pytest.fixture(params=["local", "ssh"])
def site(request, runner, tmp_path: Path, example_dir: Path) -> Site:
    """A rendered site pushed to `local: true` targets, or over SSH to a real sshd."""
    require("dnsmasq")
    require("haproxy")
    if request.param == "local":
        return make_site(tmp_path, example_dir, runner, {"local": True})
    server = request.getfixturevalue("sshd")
    return make_site(tmp_path, example_dir, runner, _ssh_cfg(tmp_path, server))


@pytest.fixture
def local_site(runner, tmp_path: Path, example_dir: Path) -> Site:
    require("dnsmasq")
    require("haproxy")
    return make_site(tmp_path, example_dir, runner, {"local": True})


def _push(runner, site: Site, *extra: str):
    return runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])


def _push_process(site: Site, *extra: str, timeout: float = 120,
                  preexec=None) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process: a hang fails the test (timeout) instead of blocking it."""
    return subprocess.run([sys.executable, "-m", "upi", "push", str(site.inventory), "-o", str(site.out),
                           *extra], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          preexec_fn=preexec, check=False)


def _refused(result, *needles: str) -> None:
    output = result.output if hasattr(result, "output") else result.stdout + result.stderr
    code = result.exit_code if hasattr(result, "exit_code") else result.returncode
    assert code == 2, output
    assert "Traceback" not in output
    for needle in needles:
        assert needle in output, output


def _edit_manifest(out: Path, edit) -> None:
    path = out / "manifest.json"
    doc = json.loads(path.read_text())
    edit(doc["files"])
    path.write_text(json.dumps(doc))


# -- manifest.json is read back from disk: hostile until checked ----------------------------------

@pytest.mark.parametrize("entry", [
    "tftp/../../outside/victim.cfg",
    "http/../../outside/victim.cfg",
    "tftp/pxelinux.cfg/../../../outside/victim.cfg",
    "dnsmasq/../../outside/victim.cfg",
    "ABSOLUTE",
    "tftp//victim.cfg",
    "tftp/./victim.cfg",
    "tftp/vic\ntim.cfg",
    "",
])
def test_a_manifest_entry_leading_out_of_the_render_dir_is_refused(
        runner, local_site: Site, outside: Path, entry: str) -> None:
    if entry == "ABSOLUTE":
        entry = str(outside / "victim.cfg")
    data = (outside / "victim.cfg").read_bytes()
    meta = {"sha256": hashlib.sha256(data).hexdigest(), "mode": "0644"}
    _edit_manifest(local_site.out, lambda files: files.__setitem__(entry, meta))
    before = _snapshot(outside)
    result = _push(runner, local_site)
    _refused(result, "manifest.json", "not a plain relative path", "nothing was pushed")
    assert not local_site.root.exists(), "nothing reached any host"
    assert _snapshot(outside) == before


@pytest.mark.parametrize("meta", [
    {"sha256": "0" * 64, "mode": "4755"},
    {"sha256": "0" * 64, "mode": "0666"},
    {"sha256": "0" * 64, "mode": "0o644"},
    {"sha256": "0" * 64, "mode": 420},
    {"sha256": 5, "mode": "0644"},
    "0644",
    None,
])
def test_a_manifest_entry_with_a_bad_mode_or_digest_is_refused(runner, local_site: Site, meta) -> None:
    _edit_manifest(local_site.out, lambda files: files.__setitem__("tftp/grub.cfg/x", meta))
    _refused(_push(runner, local_site), "manifest.json", "tftp/grub.cfg/x", "valid sha256 and mode")
    assert not local_site.root.exists()


@pytest.mark.parametrize("kind", ["fifo", "deep", "symlink", "directory", "files-list", "null", "binary"])
def test_a_hostile_manifest_file_is_a_clear_error(local_site: Site, outside: Path, kind: str) -> None:
    manifest = local_site.out / "manifest.json"
    real = manifest.read_bytes()
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "deep":
        manifest.write_text('{"files": ' + "[" * 200_000)
    elif kind == "symlink":  # a valid manifest, but reached through a link
        (outside / "manifest.json").write_bytes(real)
        manifest.symlink_to(outside / "manifest.json")
    elif kind == "directory":
        manifest.mkdir()
    elif kind == "files-list":
        manifest.write_text('{"cluster": "dgxpod.nvidia.com", "files": ["tftp/x"]}')
    elif kind == "null":
        manifest.write_text("null")
    else:
        manifest.write_bytes(b"\xff\xfe\x00garbage")
    _refused(_push_process(local_site), "manifest.json")
    assert not local_site.root.exists()


@pytest.mark.parametrize("link", ["dnsmasq/dns.conf", "tftp", "tftp/pxelinux.cfg", "haproxy"])
def test_a_link_inside_the_render_dir_is_never_followed(runner, local_site: Site, outside: Path,
                                                         link: str) -> None:
    """Same content behind a link (the sha256 would match): still refused, never read through."""
    path = local_site.out / link
    copy = outside / "copy"
    path.rename(copy)
    path.symlink_to(copy)
    result = _push(runner, local_site)
    _refused(result, "symbolic link")
    assert not local_site.root.exists()


# -- http/ is published 0644: nothing private, nothing reached through a link ---------------------

def _plant_http(out: Path, outside: Path, kind: str) -> str:
    rhcos = out / "http" / "rhcos"
    rhcos.mkdir(parents=True, exist_ok=True)
    if kind == "link-to-key":
        (rhcos / "id_rsa").symlink_to(outside / "id_rsa")
        return "id_rsa is a symbolic link"
    if kind == "link-to-public-file":
        (rhcos / "victim.cfg").symlink_to(outside / "victim.cfg")
        return "victim.cfg is a symbolic link"
    if kind == "linked-dir":
        (out / "http" / "keys").symlink_to(outside)
        return "keys is a symbolic link"
    if kind == "fifo":
        os.mkfifo(rhcos / "rootfs.img")
        return "rootfs.img is a FIFO"
    if kind == "private-mode":
        (rhcos / "notes.txt").write_bytes(b"private\n")
        (rhcos / "notes.txt").chmod(0o600)
        return "notes.txt is mode 0600 (private)"
    if kind == "group-only":
        (rhcos / "notes.txt").write_bytes(b"private\n")
        (rhcos / "notes.txt").chmod(0o640)
        return "notes.txt is mode 0640 (private)"
    if kind == "pem-private-key":
        (rhcos / "key.pem").write_bytes(b"junk\n" + SECRET)
        (rhcos / "key.pem").chmod(0o644)
        return "key.pem holds a PEM PRIVATE KEY"
    if kind in ("pem-private-key-after-64k", "pem-private-key-across-chunks"):
        # Past the first 64 KiB (once the only bytes scanned), or split by the scan's 1 MiB chunks.
        # Its BEGIN line only (the END line holds the marker too, past the split).
        key = SECRET.split(b"\n", 1)[0] + b"\nTOP-SECRET\n"
        before = 100 << 10 if kind.endswith("64k") else (1 << 20) - key.index(b"KEY-----")
        (rhcos / "disk.img").write_bytes(os.urandom(before).replace(b"-", b"_") + key + b"\0" * 4096)
        return "disk.img holds a PEM PRIVATE KEY"
    if kind == "control-name":
        (rhcos / "a\nb.img").write_bytes(b"x")
        return "control characters"
    if kind == "deep":
        deep = rhcos
        for _ in range(80):
            deep = deep / "d"
        deep.mkdir(parents=True)
        (deep / "f").write_bytes(b"x")
        return "nested more than 64 directories deep"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["link-to-key", "link-to-public-file", "linked-dir", "fifo",
                                  "private-mode", "group-only", "pem-private-key",
                                  "pem-private-key-after-64k", "pem-private-key-across-chunks",
                                  "control-name", "deep"])
def test_http_publishes_nothing_private_and_follows_no_link(local_site: Site, outside: Path,
                                                            kind: str) -> None:
    needle = _plant_http(local_site.out, outside, kind)
    before = _snapshot(outside)
    _refused(_push_process(local_site), needle)
    assert not local_site.root.exists(), "nothing was published"
    assert _snapshot(outside) == before


def test_ignition_files_are_published_whatever_their_local_mode(runner, local_site: Site) -> None:
    """http/ignition/ is served by design (bootstrap.ign is fetched by the nodes)."""
    assert stat.S_IMODE((local_site.out / "http/ignition/bootstrap.ign").stat().st_mode) == 0o600
    result = _push(runner, local_site)
    assert result.exit_code == 0, result.output
    served = local_site.root / "var/www/html/ignition/bootstrap.ign"
    assert stat.S_IMODE(served.stat().st_mode) == 0o644


# -- the host: links and odd files planted in the target roots -----------------------------------

DNS = "etc/dnsmasq.d/dns.conf"
HAPROXY = "etc/haproxy/haproxy.cfg"
BOOTSTRAP = "var/www/html/ignition/bootstrap.ign"


@pytest.mark.parametrize("planted", [DNS, HAPROXY, BOOTSTRAP])
def test_a_link_at_the_staging_name_is_replaced_never_written_through(
        runner, site: Site, outside: Path, planted: str) -> None:
    staged = site.root / planted
    staged = staged.parent / f".{staged.name}.upi-new"
    staged.parent.mkdir(parents=True)
    staged.symlink_to(outside / "victim.cfg")
    before = _snapshot(outside)
    result = _push(runner, site)
    assert result.exit_code == 0, result.output
    assert _snapshot(outside) == before
    source = {DNS: "dnsmasq/dns.conf", HAPROXY: "haproxy/haproxy.cfg",
              BOOTSTRAP: "http/ignition/bootstrap.ign"}[planted]
    landed = site.root / planted
    assert not landed.is_symlink() and landed.read_bytes() == (site.out / source).read_bytes()
    assert not staged.exists() and not staged.is_symlink()


def test_a_link_at_the_staging_name_pointing_to_a_directory(runner, site: Site, outside: Path) -> None:
    staged = site.root / "etc/haproxy/.haproxy.cfg.upi-new"
    staged.parent.mkdir(parents=True)
    staged.symlink_to(outside)
    before = _snapshot(outside)
    assert _push(runner, site).exit_code == 0
    assert _snapshot(outside) == before
    assert (site.root / HAPROXY).is_file() and not (site.root / HAPROXY).is_symlink()


@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("dest", [HAPROXY, BOOTSTRAP])
def test_an_odd_file_at_a_destination_is_replaced_not_followed(
        runner, site: Site, outside: Path, kind: str, dest: str) -> None:
    path = site.root / dest
    path.parent.mkdir(parents=True)
    if kind == "link":
        path.symlink_to(outside / "victim.cfg")
    else:
        os.mkfifo(path)  # sha256sum on it would wait for a writer forever
    before = _snapshot(outside)
    result = _push(runner, site)
    assert result.exit_code == 0, result.output
    assert _snapshot(outside) == before
    assert path.is_file() and not path.is_symlink()


@pytest.mark.parametrize("planted", [
    "var/www/html/ignition", "var/lib/tftpboot/pxelinux.cfg"])
def test_a_linked_directory_below_a_root_is_refused_before_anything_is_replaced(
        runner, site: Site, outside: Path, planted: str) -> None:
    assert _push(runner, site).exit_code == 0
    dns = site.root / DNS
    dns.write_bytes(b"# the previous config\n")  # so the push has something to replace
    (site.root / HAPROXY).write_bytes(b"# the previous haproxy.cfg\n")
    link = site.root / planted
    for child in sorted(link.rglob("*"), reverse=True):
        child.unlink() if not child.is_dir() else child.rmdir()
    link.rmdir()
    link.symlink_to(outside)
    before, before_out = _snapshot(site.root), _snapshot(outside)
    result = _push(runner, site)
    assert result.exit_code == 1, result.output
    assert f"{link} is a symbolic link" in result.output
    assert "nothing was replaced" in result.output
    assert _snapshot(site.root) == before, "every file on the hosts is byte-identical"
    assert _snapshot(outside) == before_out
    assert site.reload_log() == ["dnsmasq", "haproxy"]


def test_a_file_where_a_directory_goes_is_refused(runner, site: Site) -> None:
    (site.root / "var/lib/tftpboot").mkdir(parents=True)
    (site.root / "var/lib/tftpboot/pxelinux.cfg").write_bytes(b"not a dir\n")
    result = _push(runner, site)
    assert result.exit_code == 1, result.output
    assert "pxelinux.cfg is not a directory" in result.output
    assert not (site.root / DNS).exists() and not (site.root / HAPROXY).exists()


def test_a_directory_where_a_file_goes_is_refused(runner, site: Site) -> None:
    (site.root / HAPROXY).mkdir(parents=True)
    result = _push(runner, site)
    assert result.exit_code == 1, result.output
    assert "haproxy.cfg is a directory where upi puts a file" in result.output
    assert not (site.root / DNS).exists()


# -- directory modes do not follow the umask --------------------------------------------------------

@pytest.mark.parametrize("umask", [0o000, 0o077, 0o027])
def test_local_push_makes_directories_0755_whatever_the_umask(runner, local_site: Site, umask: int) -> None:
    old = os.umask(umask)
    try:
        result = _push(runner, local_site)
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    dirs = [p for p in local_site.root.rglob("*") if p.is_dir()]
    assert len(dirs) > 8
    assert {p.relative_to(local_site.root).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in dirs} \
        == {p.relative_to(local_site.root).as_posix(): 0o755 for p in dirs}
    assert stat.S_IMODE((local_site.root / "var/www/html/ignition/bootstrap.ign").stat().st_mode) == 0o644


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_ssh_push_makes_directories_0755_whatever_the_hosts_umask(
        runner, tmp_path: Path, example_dir: Path, umask: int) -> None:
    require("dnsmasq")
    require("haproxy")
    server = start_sshd(tmp_path / "sshd", preexec=lambda: os.umask(umask))
    try:
        site = make_site(tmp_path, example_dir, runner, _ssh_cfg(tmp_path, server))
        result = _push(runner, site)
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=10)
    assert result.exit_code == 0, result.output
    dirs = [p for p in site.root.rglob("*") if p.is_dir()]
    assert {stat.S_IMODE(p.stat().st_mode) for p in dirs} == {0o755}


# -- failed and interrupted writes leave the previous files byte-identical -----------------------

def _limit_file_size(limit: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as on a full disk, not a kill
    return preexec


def _prepare_second_push(site: Site) -> dict[str, tuple[bytes, int]]:
    """After a good push: a changed config and a new 3 MiB file to push; the hosts' state."""
    (site.root / DNS).write_bytes(b"# the previous config\n")
    big = site.out / "http" / "rhcos" / "rhcos-live-rootfs.x86_64.img"
    big.parent.mkdir(parents=True, exist_ok=True)
    big.write_bytes(os.urandom(3 << 20))
    return _snapshot(site.root)


def test_a_short_write_over_ssh_replaces_nothing(runner, tmp_path: Path, example_dir: Path) -> None:
    """The host's file size limit makes the SFTP server's writes fail, as a full disk would."""
    require("dnsmasq")
    require("haproxy")
    server = start_sshd(tmp_path / "sshd", preexec=_limit_file_size(1 << 20))
    try:
        site = make_site(tmp_path, example_dir, runner, _ssh_cfg(tmp_path, server))
        first = _push(runner, site)
        assert first.exit_code == 0, first.output
        before = _prepare_second_push(site)
        result = _push(runner, site)
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=10)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "rhcos-live-rootfs.x86_64.img" in result.output
    assert _files_of(_snapshot(site.root)) == _files_of(before), "nothing replaced, staged copies removed"
    assert site.reload_log() == ["dnsmasq", "haproxy"]


def test_a_short_write_locally_replaces_nothing(runner, local_site: Site) -> None:
    assert _push(runner, local_site).exit_code == 0
    before = _prepare_second_push(local_site)
    result = _push_process(local_site, preexec=_limit_file_size(1 << 20))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "rhcos-live-rootfs.x86_64.img" in result.stderr and "File too large" in result.stderr
    assert _files_of(_snapshot(local_site.root)) == _files_of(before)
    assert local_site.reload_log() == ["dnsmasq", "haproxy"]


def test_a_push_killed_mid_upload_leaves_the_hosts_files_as_they_were(
        runner, tmp_path: Path, example_dir: Path, sshd: Sshd) -> None:
    site = make_site(tmp_path, example_dir, runner, _ssh_cfg(tmp_path, sshd))
    assert _push(runner, site).exit_code == 0
    (site.root / DNS).write_bytes(b"# the previous config\n")
    big = site.out / "http" / "rhcos" / "rhcos-live-rootfs.x86_64.img"
    big.parent.mkdir(parents=True)
    with big.open("wb") as fh:
        for _ in range(256):
            fh.write(os.urandom(1 << 20))
    before = _snapshot(site.root)
    staged = site.root / "var/www/html/rhcos/.rhcos-live-rootfs.x86_64.img.upi-new"
    proc = subprocess.Popen([sys.executable, "-m", "upi", "push", str(site.inventory), "-o",
                             str(site.out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(6000):  # until the upload is under way (readiness, not a timing assertion)
        if staged.exists() and staged.stat().st_size > 0 or proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.kill()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "killed while uploading, not finished"
    after = _snapshot(site.root)
    assert _files_of({k: v for k, v in after.items() if not k.endswith(".upi-new")}) == _files_of(before)
    # The next push finishes the job and leaves no staged copy behind.
    result = _push(runner, site)
    assert result.exit_code == 0, result.output
    assert (site.root / DNS).read_bytes() == (site.out / "dnsmasq/dns.conf").read_bytes()
    assert (site.root / "var/www/html/rhcos/rhcos-live-rootfs.x86_64.img").read_bytes() == big.read_bytes()
    assert not list(site.root.rglob("*.upi-new"))


# -- files the inventory names: never a hang, never a traceback ----------------------------------

def _with_ssh_file(site: Site, field: str, path: Path) -> None:
    import yaml

    doc = yaml.safe_load(site.inventory.read_text())
    doc["load_balancer"]["ssh"] = {**doc["load_balancer"]["ssh"], "local": False, field: str(path)}
    site.inventory.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("field", ["known_hosts", "identity_file"])
@pytest.mark.parametrize("kind", ["fifo", "device", "huge", "directory"])
def test_ssh_files_the_inventory_names_are_checked(local_site: Site, tmp_path: Path, field: str,
                                                   kind: str) -> None:
    """Never a hang: identity_file is an inventory error, known_hosts is refused where it is parsed."""
    path = tmp_path / f"odd-{field}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as fh:
            fh.truncate(64 << 20)
    else:
        path.mkdir()
    _with_ssh_file(local_site, field, path)
    result = _push_process(local_site, timeout=60)
    _refused(result, f"load_balancer.ssh.{field}" if field == "identity_file" else "known_hosts", str(path))
    assert not local_site.root.exists()


class _FailingMove:
    """A fake failure around the real local transport: the `nth` rename into place fails.

    Nothing else is faked: every other command runs on this machine through
    LocalTransport, as a `local: true` push does.
    """

    def __init__(self, nth: int) -> None:
        from upi.remote import LocalTransport

        self.inner, self.nth, self.moves = LocalTransport(), nth, 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def run(self, argv, *, timeout=None):
        from upi.runner import Result

        if argv[0] == "mv" and "upi-new" in argv[-2]:
            self.moves += 1
            if self.moves == self.nth:
                return Result(tuple(argv), 1, "", "mv: cannot move: Input/output error\n")
        return self.inner.run(argv, timeout=timeout)


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_rename_that_fails_mid_commit_puts_back_what_was_replaced(runner, local_site: Site,
                                                                     nth: int) -> None:
    from upi.inventory import load_inventory
    from upi.push import PushError
    from upi.push.apply import apply
    from upi.push.sources import plans_for, read_render_dir

    assert _push(runner, local_site).exit_code == 0
    (local_site.root / DNS).write_bytes(b"# the previous dns.conf\n")
    (local_site.root / "var/lib/tftpboot/grub.cfg").write_bytes(b"# the previous grub.cfg\n")
    (local_site.root / BOOTSTRAP).write_bytes(b'{"previous": true}\n')
    new = local_site.out / "http/rhcos/new.img"
    new.parent.mkdir()
    new.write_bytes(b"new image\n")
    before = _snapshot(local_site.root)
    inv = load_inventory(local_site.inventory)
    files, extra = read_render_dir(inv, local_site.out)
    plans = plans_for(inv, files, "provisioner", extra)
    with pytest.raises(PushError, match=r"Input/output error.*were put back; nothing reloaded"):
        apply(plans, lambda plan: _FailingMove(nth))
    assert _files_of(_snapshot(local_site.root)) == _files_of(before), "every file as it was"
    assert local_site.reload_log() == ["dnsmasq", "haproxy"]
