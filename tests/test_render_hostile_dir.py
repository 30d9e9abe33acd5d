"""`upi render` against a hostile or failing output directory (issue 15, writer classes).

Paths read back from DIR (manifest.json, staging journals) lead nowhere
outside it; links inside DIR are never followed; a full disk, a kill -9 or a
second render never leave a half-written tree; odd output paths get a clear
error. Every case goes through the CLI, several variants each.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, inventory_path, require, require_root

from upi import safefs, staging, writer
from upi.cli import app

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nTOP-SECRET\n"


def _render(runner, inv: Path, out: Path | str, *flags: str):
    return runner.invoke(app, ["render", str(inv), "-o", str(out), *flags])


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry below root (links as their target text), with its mode."""
    snap = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = p.relative_to(root).as_posix()
        if stat.S_ISLNK(st.st_mode):
            snap[rel] = (os.readlink(p).encode(), 0)
        elif stat.S_ISREG(st.st_mode):
            snap[rel] = (p.read_bytes(), stat.S_IMODE(st.st_mode))
        else:
            snap[rel] = (b"<dir>", stat.S_IMODE(st.st_mode))
    return snap


def _consistent(out: Path) -> None:
    """DIR is exactly what its manifest.json says, and no staging dir is left."""
    manifest = json.loads((out / "manifest.json").read_text())
    for path, meta in manifest["files"].items():
        data = (out / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == meta["sha256"], path
    assert not list(out.glob(".upi-staging-*"))


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside DIR that no render may read, print, write or delete."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_bytes(SECRET)
    (outside / "id_rsa").chmod(0o644)
    return outside / "id_rsa"


@pytest.fixture
def rendered(runner, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    result = _render(runner, inventory_path("dgxpod"), out)
    assert result.exit_code == 0, result.output
    return out


def _hostile(victim: Path, out: Path) -> list[str]:
    rel = os.path.relpath(victim, out)
    return [str(victim), rel, f"tftp/../{rel}", f"./{rel}", f"tftp//../../{rel}", f"{rel}\n",
            "/etc/../" + str(victim).lstrip("/"), f".upi-staging-x/../{rel}"]


@pytest.mark.parametrize("variant", range(8))
@pytest.mark.parametrize("flags", [(), ("--diff",), ("--diff", "--dry-run")])
def test_a_manifest_path_outside_dir_is_never_deleted_or_printed(
        runner, rendered: Path, victim: Path, variant: int, flags: tuple[str, ...]) -> None:
    manifest = json.loads((rendered / "manifest.json").read_text())
    path = _hostile(victim, rendered)[variant]
    manifest["files"][path] = {"sha256": "0" * 64, "mode": "0644"}
    (rendered / "manifest.json").write_text(json.dumps(manifest))
    # The dgxpod render no longer lists it: a trusting writer would call it "removed".
    result = _render(runner, inventory_path("dgxpod"), rendered, *flags)
    assert result.exit_code == 0, result.output
    assert victim.read_bytes() == SECRET
    assert "TOP-SECRET" not in result.output
    assert "path(s) outside it or unsafe" in result.output and "ignored" in result.output
    assert ", 0 removed" in result.output  # a trusting writer would count the victim as removed


@pytest.mark.parametrize("garbage", ['{"files": []}', '{"files": {"hosts": 3}}', "[1, 2]", "{" * 100_000,
                                     '{"files": {"hosts": {"sha256": ["x"]}}}', "\x00\xff"])
def test_a_garbled_manifest_is_ignored_not_a_traceback(runner, rendered: Path, garbage: str) -> None:
    (rendered / "manifest.json").write_text(garbage)
    result = _render(runner, inventory_path("dgxpod"), rendered)
    assert result.exit_code == 0, result.output
    _consistent(rendered)


@pytest.mark.parametrize("link", ["tftp", "dnsmasq", "tftp/pxelinux.cfg", "csr"])
def test_a_symlinked_subdirectory_is_refused_and_never_written_through(
        runner, rendered: Path, tmp_path: Path, link: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(rendered / link, elsewhere)
    shutil.rmtree(rendered / link)
    (rendered / link).symlink_to(elsewhere)
    before, outside = _snapshot(rendered), _snapshot(elsewhere)
    for flags in ((), ("--force",), ("--diff", "--dry-run")):
        result = _render(runner, inventory_path("compact"), rendered, *flags)
        assert result.exit_code == 2, result.output
        assert f"{rendered / link} is a symbolic link" in result.output, result.output
        assert "Traceback" not in result.output
    assert _snapshot(rendered) == before and _snapshot(elsewhere) == outside


@pytest.mark.parametrize("path", ["hosts", "install-config.yaml", "tftp/grub.cfg", "manifest.json"])
def test_a_link_planted_at_a_file_is_replaced_not_followed(
        runner, rendered: Path, victim: Path, path: str) -> None:
    (rendered / path).unlink()
    (rendered / path).symlink_to(victim)
    result = _render(runner, inventory_path("dgxpod"), rendered, "--diff")
    assert result.exit_code == 0, result.output
    assert "TOP-SECRET" not in result.output
    assert victim.read_bytes() == SECRET and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not (rendered / path).is_symlink()
    _consistent(rendered)


@pytest.mark.parametrize("loader", ["tftp/pxelinux.0", "tftp/grubx64.efi", "tftp/ldlinux.c32"])
def test_a_boot_loader_link_is_not_carried_into_the_render(
        runner, rendered: Path, victim: Path, loader: str) -> None:
    manifest = json.loads((rendered / "manifest.json").read_text())
    manifest["files"][loader] = {"sha256": "0" * 64, "mode": "0644"}
    (rendered / "manifest.json").write_text(json.dumps(manifest))
    (rendered / loader).symlink_to(victim)
    result = _render(runner, inventory_path("dgxpod"), rendered)
    assert result.exit_code == 0, result.output
    assert loader not in json.loads((rendered / "manifest.json").read_text())["files"]
    assert victim.read_bytes() == SECRET


@pytest.mark.parametrize("kind", ["link-to-dir", "link-to-file", "dir-without-journal", "file",
                                  "journal-naming-outside"])
def test_stale_staging_is_cleaned_without_following_anything(
        runner, rendered: Path, tmp_path: Path, victim: Path, kind: str) -> None:
    stale = rendered / ".upi-staging-0123456789abcdef"
    if kind == "link-to-dir":
        stale.symlink_to(victim.parent, target_is_directory=True)
    elif kind == "link-to-file":
        stale.symlink_to(victim)
    elif kind == "file":
        stale.write_text("junk")
    else:
        (stale / "tftp").mkdir(parents=True)
        (stale / "tftp" / "half-written").write_text("x")
        if kind == "journal-naming-outside":
            rel = os.path.relpath(victim, rendered)
            (stale / ".upi-commit").write_text(json.dumps({"replace": [rel, str(victim)],
                                                           "remove": [rel, str(victim)]}))
    outside = _snapshot(victim.parent)
    result = _render(runner, inventory_path("dgxpod"), rendered)
    assert result.exit_code == 0, result.output
    assert not stale.exists() and not stale.is_symlink()
    assert _snapshot(victim.parent) == outside
    _consistent(rendered)


def test_a_second_writer_waits_then_fails_clearly(runner, rendered: Path, monkeypatch) -> None:
    monkeypatch.setattr(writer, "LOCK_WAIT", 0.3)
    before = _snapshot(rendered)
    fd = os.open(rendered, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result = _render(runner, inventory_path("compact"), rendered)
    finally:
        os.close(fd)
    assert result.exit_code == 1, result.output
    assert f"another upi process is writing {rendered}" in result.output
    assert _snapshot(rendered) == before
    assert _render(runner, inventory_path("compact"), rendered).exit_code == 0  # lock released


def _upi(*args: str, **kw) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "upi", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, **kw)


def test_concurrent_renders_into_one_dir_leave_one_whole_render(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for _ in range(3):
        procs = [_upi("render", str(inventory_path(name)), "-o", str(out), "--force")
                 for name in ("dgxpod", "compact", "legacy-4.3")]
        outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], outputs
        _consistent(out)


KILLER = """
import os, signal, sys
import upi.safefs as s
count, what = int(sys.argv[1]), sys.argv[2]
real = {"replace": os.replace, "create": s.Tree.create}
n = [0]
def hit():
    n[0] += 1
    if n[0] == count:
        os.kill(os.getpid(), signal.SIGKILL)
def replace(*a, **k):
    hit(); return real["replace"](*a, **k)
def create(*a, **k):
    hit(); return real["create"](*a, **k)
if what == "replace":
    s.os.replace = replace
else:
    s.Tree.create = create
from upi.cli import main
sys.argv = ["upi", *sys.argv[3:]]
main()
"""


@pytest.mark.parametrize(("what", "count"), [("create", 1), ("create", 12), ("replace", 1),
                                              ("replace", 7), ("replace", 24)])
def test_kill_9_mid_write_is_all_or_nothing(tmp_path: Path, what: str, count: int) -> None:
    """SIGKILL while staging leaves DIR as it was; while renaming, the next render completes it."""
    out = tmp_path / "out"
    assert _upi("render", str(inventory_path("compact")), "-o", str(out)).wait(120) == 0
    before = _snapshot(out)
    proc = subprocess.run([sys.executable, "-c", KILLER, str(count), what, "render",
                           str(inventory_path("dgxpod")), "-o", str(out), "--force"],
                          cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    after = {k: v for k, v in _snapshot(out).items() if not k.startswith(".upi-staging-")}
    if what == "create":
        assert after == before  # nothing was renamed yet
    staged = list(out.glob(".upi-staging-*"))
    assert staged, "the killed render left its staging dir (the next one cleans it)"
    # Any later write into DIR first finishes (or discards) the interrupted one.
    retry = _upi("render", str(inventory_path("legacy-4.3")), "-o", str(out), "--force")
    assert retry.wait(120) == 0, retry.stdout.read() if retry.stdout else ""
    _consistent(out)
    clean = tmp_path / "clean"
    assert _upi("render", str(inventory_path("legacy-4.3")), "-o", str(clean)).wait(120) == 0
    assert _snapshot(out) == _snapshot(clean), "exactly the last render: nothing of the killed one left"


@pytest.mark.parametrize("count", [1, 2, 4])
def test_kill_9_while_moving_whole_directories_into_a_new_dir(tmp_path: Path, count: int) -> None:
    """A first render renames each new directory whole; a kill between those renames is completed."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(count), "replace", "render",
                           str(inventory_path("dgxpod")), "-o", str(out)],
                          cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert list(out.glob(".upi-staging-*")), "the killed render left its journal for the next one"
    retry = _upi("render", str(inventory_path("dgxpod")), "-o", str(out))
    assert retry.wait(120) == 0, retry.stdout.read() if retry.stdout else ""
    _consistent(out)
    clean = tmp_path / "clean"
    assert _upi("render", str(inventory_path("dgxpod")), "-o", str(clean)).wait(120) == 0
    assert _snapshot(out) == _snapshot(clean)
    assert oct(os.stat(out / "tftp").st_mode & 0o7777) == oct(0o755)


def test_a_first_render_renames_new_directories_whole(runner, tmp_path: Path, monkeypatch) -> None:
    renamed = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst, **kw: (renamed.append(src), real(src, dst, **kw)))
    out = tmp_path / "out"
    assert _render(runner, inventory_path("dgxpod"), out).exit_code == 0
    assert "tftp" in renamed and "dnsmasq" in renamed  # one rename each, not one per file
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(renamed) < len(files) / 2, renamed
    _consistent(out)


def test_short_writes_are_completed(runner, tmp_path: Path, monkeypatch) -> None:
    real = os.write
    calls = []

    def dribble(fd: int, data) -> int:  # the kernel may write fewer bytes than asked
        calls.append(len(data))
        return real(fd, bytes(data[:7]))

    monkeypatch.setattr(safefs.os, "write", dribble)
    out = tmp_path / "out"
    result = _render(runner, inventory_path("dgxpod"), out)
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert max(calls) > 7
    _consistent(out)
    again = _render(runner, inventory_path("dgxpod"), out).output
    assert "0 new, 0 changed" in again and ", 0 removed" in again


@pytest.mark.parametrize("errno_", [5, 28, 122])  # EIO, ENOSPC, EDQUOT
def test_a_failed_flush_is_an_error_and_changes_nothing(
        runner, rendered: Path, monkeypatch, errno_: int) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno_, os.strerror(errno_))

    before = _snapshot(rendered)
    monkeypatch.setattr(staging, "syncfs", failing)
    result = _render(runner, inventory_path("compact"), rendered)
    assert result.exit_code == 1
    assert os.strerror(errno_) in result.output and "left as they were" in result.output
    assert _snapshot(rendered) == before


FULL_DISK = """
set -e
mount -t tmpfs -o size=2m,mode=0755 tmpfs "$MNT"
"$PY" -m upi render "$INV1" -o "$MNT/out" > "$LOG" 2>&1
cp -a "$MNT/out" "$COPY/before"
dd if=/dev/zero of="$MNT/fill" bs=4096 > /dev/null 2>&1 || true
truncate -s "-$FREE" "$MNT/fill"
set +e
"$PY" -m upi render "$INV2" -o "$MNT/out" >> "$LOG" 2>&1
echo $? > "$COPY/rc"
set -e
cp -a "$MNT/out" "$COPY/after"
"""
PAGE = 4096


def _big_inventory(tmp: Path, workers: int = 90) -> Path:
    """dgxpod with `workers` more DGX nodes: a manifest.json of several pages."""
    inv = tmp / "inv"
    shutil.copytree(inventory_path("dgxpod").parent, inv)
    extra = "".join(f'  - {{name: gpu-{i}, role: worker, mac: "b8:ce:f6:20:00:{i:02x}", '
                    f"ip: 10.33.3.{100 + i}, install_disk: /dev/nvme0n1, gpu: true}}\n"
                    for i in range(workers))
    big = inv / "big.yaml"
    big.write_text((inv / "dgxpod.yaml").read_text() + extra)
    return big


def _pages(runner, inv: Path, scratch: Path) -> tuple[int, int]:
    """tmpfs pages the render's files need, manifest.json apart (it is staged last)."""
    assert _render(runner, inv, scratch).exit_code == 0
    sizes = {p.name: p.stat().st_size for p in scratch.rglob("*") if p.is_file()}
    manifest = sizes.pop("manifest.json")
    return sum(-(-n // PAGE) for n in sizes.values()), -(-manifest // PAGE)


@pytest.mark.parametrize("where", ["none", "half", "manifest+1", "manifest+2", "manifest+3", "manifest-1"])
def test_a_full_disk_fails_the_render_and_keeps_the_previous_files(
        runner, tmp_path: Path, where: str) -> None:
    """A real tmpfs (in a private mount namespace) filled up, then a render that needs more room.

    The free space is calibrated so that in the `manifest+N` variants every
    file but manifest.json fits and manifest.json fits only partly: write(2)
    stores fewer bytes than asked (a short write), and a writer that ignores
    the count exits 0 with a truncated manifest.json. Here: exit 1, and the
    previous files byte-identical.
    """
    require_root("mounting a small tmpfs")
    unshare = require("unshare")
    big = _big_inventory(tmp_path)
    files, manifest = _pages(runner, big, tmp_path / "scratch")
    assert manifest >= 4
    free = {"none": 0, "half": files // 2, "manifest+1": files + 1, "manifest+2": files + 2,
            "manifest+3": files + 3, "manifest-1": files + manifest - 1}[where]
    mnt, copy = tmp_path / "mnt", tmp_path / "copy"
    mnt.mkdir()
    copy.mkdir()
    env = {**os.environ, "MNT": str(mnt), "COPY": str(copy), "PY": sys.executable,
           "FREE": str(free * PAGE), "INV1": str(inventory_path("compact")), "INV2": str(big),
           "LOG": str(tmp_path / "log")}
    subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", FULL_DISK],
                   cwd=ROOT, env=env, check=True, timeout=120)
    log = (tmp_path / "log").read_text()
    assert (copy / "rc").read_text().strip() == "1", log
    assert "No space left on device" in log and "left as they were" in log, log
    assert "Traceback" not in log
    assert _snapshot(copy / "after") == _snapshot(copy / "before")


def test_a_read_only_output_dir_is_a_clear_error(tmp_path: Path) -> None:
    require_root("a read-only bind mount")
    unshare = require("unshare")
    out = tmp_path / "out"
    assert _upi("render", str(inventory_path("compact")), "-o", str(out)).wait(120) == 0
    script = (f'mount --bind "{out}" "{out}" && mount -o remount,bind,ro "{out}" && '
              f'"{sys.executable}" -m upi render {inventory_path("dgxpod")} -o "{out}/sub"; '
              f'echo rc=$?; "{sys.executable}" -m upi render {inventory_path("dgxpod")} -o "{out}"; '
              "echo rc=$?")
    proc = subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c", script],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    assert text.count("Read-only file system") == 2 and text.count("rc=1") == 2, text
    assert "Traceback" not in text


def _file(tmp: Path) -> Path:
    (tmp / "f").write_text("x")
    return tmp / "f"


def _dangling(tmp: Path) -> Path:
    (tmp / "link").symlink_to(tmp / "nowhere")
    return tmp / "link"


def _loop(tmp: Path) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a"


@pytest.mark.parametrize(("make", "message"), [
    (lambda t: _file(t), "exists and is not a directory"),
    (lambda t: _file(t) / "sub", "exists and is not a directory"),
    (lambda t: _dangling(t), "exists and is not a directory"),
    (_loop, "Too many levels of symbolic links"),
    (lambda t: _loop(t) / "sub", "Too many levels of symbolic links"),
    (lambda t: Path("/"), "refusing to write into / (the root directory)"),
    (lambda t: t / "x/../../../../../../../../..", "the root directory"),
    (lambda t: t / ("n" * 300), "File name too long"),
    (lambda t: t / "/".join(["d" * 250] * 20), "File name too long"),
])
def test_an_unusable_output_dir_is_a_clear_error(runner, tmp_path: Path, make, message: str) -> None:
    out = make(tmp_path)
    before = _snapshot(tmp_path)
    result = _render(runner, inventory_path("dgxpod"), out)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_an_empty_output_dir_is_refused(runner, tmp_path: Path, monkeypatch, value: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = _render(runner, inventory_path("dgxpod"), value)
    assert result.exit_code == 2
    assert "an empty path would mean the current directory" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask", [0o000, 0o077, 0o027])
def test_modes_are_explicit_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    out = tmp_path / "new" / "out"
    proc = _upi("render", str(inventory_path("dgxpod")), "-o", str(out), preexec_fn=lambda: os.umask(umask))
    assert proc.wait(120) == 0
    dirs = [out, *(p for p in out.rglob("*") if p.is_dir())]
    assert {stat.S_IMODE(p.stat().st_mode) for p in dirs} == {0o755}
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in out.rglob("*") if p.is_file()}
    assert modes["install-config.yaml"] == 0o600 and modes["vms/virt-install.sh"] == 0o755
    assert modes["hosts"] == 0o644
