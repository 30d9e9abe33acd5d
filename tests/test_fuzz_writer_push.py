"""Property tests: whatever is planted in a render dir or on a host, render and push stay inside.

The inventory fuzz (test_inventory_fuzz.py) grows here to the writer and
push paths. Hypothesis plants links, FIFOs, directories, hostile
manifest.json entries, forged staging journals and hostile http/ trees,
then runs `upi render` or `upi push` (to `local: true` targets: the same
steps as over SSH, through the real dnsmasq and haproxy) and checks the
promise of issue 15:

- the exit code is 0, 1 or 2, never a traceback;
- nothing outside the render dir and the target roots is written, followed
  (read and published) or deleted;
- a render that succeeds leaves DIR exactly as its manifest says; a push that
  fails leaves every file on the host byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import INVENTORIES, require
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pushkit import make_site
from typer.testing import CliRunner

from upi.cli import app

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nTOP-SECRET\n-----END OPENSSH PRIVATE KEY-----\n"
# Paths relative to a render dir, as hostile as manifest.json or a journal may hold.
OUT = "OUTSIDE"  # replaced by the outside dir's absolute path
HOSTILE_PATHS = st.sampled_from([
    "../outside/victim.cfg", "tftp/../../outside/victim.cfg", "http/../../outside/id_rsa",
    f"{OUT}/victim.cfg", f"{OUT}/id_rsa", "tftp//x", "./manifest.json", "", ".", "..",
    "tftp/a\nb", "dnsmasq/dns.conf", "manifest.json", "tftp/pxelinux.cfg", "hosts",
    ".upi-staging-0/x", "tftp/" + "d/" * 70 + "f", "x" * 5000,
]) | st.text(max_size=30)
# Names the render writes (files and the directories above them).
RENDERED = ["hosts", "dnsmasq/dns.conf", "dnsmasq/dhcp-pxe.conf", "tftp", "tftp/grub.cfg",
            "tftp/pxelinux.cfg", "tftp/pxelinux.cfg/default", "haproxy", "haproxy/haproxy.cfg",
            "vms", "install-config.yaml", "manifest.json", "csr"]
LINK_TARGETS = st.sampled_from(["id_rsa", "victim.cfg", ".", "missing"])


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    snap: dict[str, tuple[bytes, int]] = {}
    for p in sorted(root.rglob("*")) if root.exists() else []:
        st_ = p.lstat()
        rel = p.relative_to(root).as_posix()
        if stat.S_ISLNK(st_.st_mode):
            snap[rel] = (os.readlink(p).encode(), -1)
        elif stat.S_ISREG(st_.st_mode):
            snap[rel] = (p.read_bytes(), stat.S_IMODE(st_.st_mode))
        elif not stat.S_ISDIR(st_.st_mode):
            snap[rel] = (b"<special>", stat.S_IMODE(st_.st_mode))
    return snap


def _outside(base: Path) -> Path:
    d = base / "outside"
    d.mkdir()
    (d / "id_rsa").write_bytes(SECRET)
    (d / "id_rsa").chmod(0o600)
    (d / "victim.cfg").write_bytes(b"# must stay as it is\n")
    return d


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file() or path.is_fifo():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _text(value: str, outside: Path) -> str:
    return value.replace(OUT, str(outside))


PLANT = st.one_of(
    st.tuples(st.just("link"), st.sampled_from(RENDERED), LINK_TARGETS),
    st.tuples(st.just("fifo"), st.sampled_from(RENDERED), st.none()),
    st.tuples(st.just("dir"), st.sampled_from(RENDERED), st.none()),
    st.tuples(st.just("entry"), HOSTILE_PATHS, st.sampled_from(["0644", "0600", "4755", "0666", "x"])),
    st.tuples(st.just("journal"), st.lists(HOSTILE_PATHS, max_size=4), st.lists(HOSTILE_PATHS, max_size=4)),
    st.tuples(st.just("manifest-bytes"), st.binary(max_size=200), st.none()),
)


def _plant(out: Path, outside: Path, plant: tuple) -> None:
    kind, what, extra = plant
    if kind in ("link", "fifo", "dir"):
        path = out / what
        if not path.parent.is_dir() or path.parent.is_symlink():
            return
        _remove(path)
        if kind == "link":
            path.symlink_to(outside / extra)
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.mkdir()
            (path / "inner").write_bytes(b"x")
    elif kind == "entry":
        manifest = out / "manifest.json"
        if not manifest.is_file() or manifest.is_symlink():
            return
        try:
            doc = json.loads(manifest.read_text())
            files = doc["files"]
        except (ValueError, KeyError, TypeError):
            return
        victim = (outside / "victim.cfg").read_bytes()
        files[_text(what, outside)] = {"sha256": hashlib.sha256(victim).hexdigest(), "mode": extra}
        manifest.write_text(json.dumps(doc))
    elif kind == "journal":
        stage = out / ".upi-staging-00ff00ff00ff00ff"
        if not stage.exists():
            stage.mkdir()
            (stage / "hosts").write_bytes(b"# planted\n")
        journal = {"replace": [_text(p, outside) for p in what],
                   "remove": [_text(p, outside) for p in extra]}
        (stage / ".upi-commit").write_text(json.dumps(journal))
    else:
        manifest = out / "manifest.json"
        _remove(manifest)
        manifest.write_bytes(what)


def _clean_exit(result) -> None:
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def _consistent(out: Path) -> None:
    doc = json.loads((out / "manifest.json").read_text())
    for path, meta in doc["files"].items():
        p = out / path
        assert not p.is_symlink() and p.is_file(), path
        assert hashlib.sha256(p.read_bytes()).hexdigest() == meta["sha256"], path
    assert not list(out.glob(".upi-staging-*"))


@pytest.fixture(scope="module")
def rendered() -> Iterator[Path]:
    """One good render dir to copy per example (rendering again each time is slower)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        result = CliRunner().invoke(app, ["render", str(INVENTORIES / "dgxpod.yaml"), "-o", str(out)])
        assert result.exit_code == 0, result.output
        yield out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plants=st.lists(PLANT, min_size=1, max_size=4), flags=st.sampled_from([[], ["--force"], ["--diff"]]))
def test_render_into_a_hostile_dir_stays_inside(rendered: Path, plants: list[tuple],
                                                flags: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = _outside(base)
        out = base / "out"
        shutil.copytree(rendered, out, symlinks=True)
        for plant in plants:
            _plant(out, outside, plant)
        before = _snapshot(outside)
        result = CliRunner().invoke(app, ["render", str(INVENTORIES / "dgxpod.yaml"), "-o", str(out),
                                          *flags])
        _clean_exit(result)
        assert _snapshot(outside) == before, "nothing outside DIR written or deleted"
        assert "TOP-SECRET" not in result.output, "nothing outside DIR printed"
        if result.exit_code == 0 and "--diff" not in flags:
            _consistent(out)


HOST_PLANT = st.one_of(
    st.tuples(st.just("staged-link"), st.sampled_from(["etc/dnsmasq.d/.dns.conf.upi-new",
                                                       "etc/haproxy/.haproxy.cfg.upi-new",
                                                       "var/www/html/ignition/.bootstrap.ign.upi-new"]),
              LINK_TARGETS),
    st.tuples(st.just("link"), st.sampled_from(["etc/haproxy/haproxy.cfg", "var/www/html/ignition",
                                                "var/lib/tftpboot/pxelinux.cfg",
                                                "var/www/html/ignition/bootstrap.ign"]), LINK_TARGETS),
    st.tuples(st.just("fifo"), st.sampled_from(["etc/dnsmasq.d/dns.conf",
                                                "var/www/html/ignition/master.ign"]), st.none()),
)
HTTP_PLANT = st.one_of(
    st.tuples(st.just("http-link"), st.sampled_from(["rhcos/id_rsa", "keys", "ignition/worker.ign"]),
              LINK_TARGETS),
    st.tuples(st.just("http-file"), st.sampled_from(["rhcos/a.img", "rhcos/.hidden", "ignition/x.ign"]),
              st.sampled_from([0o600, 0o640, 0o644])),
    st.tuples(st.just("http-key"), st.sampled_from(["rhcos/key.pem", "ignition/key.pem"]), st.none()),
    st.tuples(st.just("http-fifo"), st.sampled_from(["rhcos/pipe", "ignition/pipe"]), st.none()),
)


def _through_link(root: Path, path: Path) -> bool:
    return any(p.is_symlink() for p in path.parents if len(p.parts) > len(root.parts))


def _plant_host(root: Path, outside: Path, plant: tuple) -> None:
    kind, what, extra = plant
    path = root / what
    if _through_link(root, path):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(outside / extra)


def _plant_http(out: Path, outside: Path, plant: tuple) -> None:
    kind, what, extra = plant
    path = out / "http" / what
    if _through_link(out, path):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove(path)
    if kind == "http-link":
        path.symlink_to(outside / extra)
    elif kind == "http-file":
        path.write_bytes(b"content\n")
        path.chmod(extra)
    elif kind == "http-key":
        path.write_bytes(SECRET)
        path.chmod(0o644)
    else:
        os.mkfifo(path)


# No shrinking: each example is a real push; the failing example is printed as generated.
@settings(max_examples=40, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plants=st.lists(PLANT, max_size=2), host=st.lists(HOST_PLANT, max_size=3),
       http=st.lists(HTTP_PLANT, max_size=3), pushed_before=st.booleans())
def test_push_of_a_hostile_dir_to_a_hostile_host_stays_inside(
        plants: list[tuple], host: list[tuple], http: list[tuple], pushed_before: bool) -> None:
    require("dnsmasq")
    require("haproxy")
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        example = base / "inventories"
        shutil.copytree(INVENTORIES, example)
        site = make_site(base, example, runner, {"local": True})
        outside = _outside(base)
        if pushed_before:
            assert runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)]).exit_code == 0
            (site.root / "etc/dnsmasq.d/dns.conf").write_bytes(b"# the previous config\n")
        for plant in plants:
            _plant(site.out, outside, plant)
        for plant in http:
            _plant_http(site.out, outside, plant)
        for plant in host:
            _plant_host(site.root, outside, plant)
        before, before_host = _snapshot(outside), _snapshot(site.root)
        result = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])
        _clean_exit(result)
        assert _snapshot(outside) == before, "nothing outside the target roots written or deleted"
        served = [p for p in site.root.rglob("*") if p.is_file() and not p.is_symlink()]
        assert not any(b"TOP-SECRET" in p.read_bytes() for p in served), "a private key was published"
        if result.exit_code != 0:  # upi's own staging names (.NAME.upi-new) are its to remove
            def mine(name: str) -> bool:
                return name.endswith(".upi-new")
            assert {k: v for k, v in _snapshot(site.root).items() if not mine(k)} == \
                {k: v for k, v in before_host.items() if not mine(k)}, "a failed push changes no file"
