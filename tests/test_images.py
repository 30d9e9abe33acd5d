"""`upi images`: RHCOS files from a real nginx mirror (or a directory), checked against the
FAKE installer's stream (tests/fakes/openshift-install `coreos print-stream-json`).

nginx is the mirror because it is what sites run and it answers HTTP Range as
a real mirror does (resuming depends on it); its config is the test's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import realnginx
from certs import Issued, issue, make_ca
from conftest import require
from pushkit import make_site

from upi.cli import app
from upi.images.fetch import DirSource
from upi.images.stage import PARTIAL_DIR, stage_images
from upi.images.stream import Stream, StreamArtifact
from upi.inventory import load_inventory
from upi.push.sources import plans_for, read_render_dir

BUILD = "9.6.20250402-0"  # the fake installer's RHCOS build
NAMES = {"kernel": f"rhcos-{BUILD}-live-kernel.x86_64",
         "initramfs": f"rhcos-{BUILD}-live-initramfs.x86_64.img",
         "rootfs": f"rhcos-{BUILD}-live-rootfs.x86_64.img"}
OLD = {"kernel": "rhcos-4.16.3-x86_64-live-kernel-x86_64",
       "initramfs": "rhcos-4.16.3-x86_64-live-initramfs.x86_64.img",
       "rootfs": "rhcos-4.16.3-x86_64-live-rootfs.x86_64.img"}
def fake_bytes(name: str) -> bytes:
    """What the fake installer's stream says the artifact `name` holds (its sha256 is in the stream)."""
    return f"FAKE RHCOS ARTIFACT {name}\n".encode()


@contextlib.contextmanager
def nginx(root: Path, work: Path, cert: Issued | None = None) -> Iterator[tuple[str, Path]]:
    """A real nginx serving `root` on a loopback port (HTTPS with `cert`) that logs every Range asked
    for (tests/realnginx.py); yields the mirror's base URL and that log."""
    log = work / "access.log"
    ranges = (f"    log_format ranges '$request_uri $status \"$http_range\" $body_bytes_sent';\n"
              f"    access_log {log} ranges;")
    with realnginx.nginx(root, work, http=ranges, cert=cert) as port:
        scheme = "https" if cert is not None else "http"
        yield f"{scheme}://127.0.0.1:{port}/rhcos/4.19", log


def inventory(example_dir: Path, names: dict[str, str]) -> Path:
    """dgxpod with its rhcos: files renamed to `names` (paths under http_base_url kept)."""
    path = example_dir / "dgxpod.yaml"
    text = path.read_text()
    for key, old in OLD.items():
        text = text.replace(old, names[key])
    path.write_text(text)
    return path


def mirror(tmp_path: Path, files: dict[str, bytes], sums: dict[str, str] | None = None) -> Path:
    """A mirror tree: MIRROR/rhcos/4.19/<name>, plus sha256sum.txt when `sums` is given."""
    root = tmp_path / "mirror"
    base = root / "rhcos/4.19"
    base.mkdir(parents=True)
    for name, data in files.items():
        (base / name).write_bytes(data)
    if sums is not None:
        (base / "sha256sum.txt").write_text("".join(f"{sha}  {name}\n" for name, sha in sums.items()))
    return root


def run_images(runner, inv: Path, out: Path, src: str, *extra: str):
    return runner.invoke(app, ["images", str(inv), "-o", str(out), "--from", src, *extra])


def test_stages_kernel_initramfs_rootfs_from_an_nginx_mirror_where_the_boot_files_look(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, NAMES)
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inv_path), "-o", str(out)]).exit_code == 0
    root = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()})
    with nginx(root, tmp_path / "nginx") as (url, access):
        result = run_images(runner, inv_path, out, url, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["rhcos_release"] == BUILD and doc["warnings"] == []
    assert [f["status"] for f in doc["files"]] == ["fetched"] * 3
    for key, name in NAMES.items():
        data = fake_bytes(name)
        assert (out / "http/rhcos" / name).read_bytes() == data
        assert ((out / "tftp/rhcos" / name).exists()) == (key != "rootfs")
        if key != "rootfs":
            assert (out / "tftp/rhcos" / name).read_bytes() == data
    images = json.loads((out / "manifest.json").read_text())["images"]
    assert set(images) == {f"http/rhcos/{n}" for n in NAMES.values()} | {
        f"tftp/rhcos/{NAMES['kernel']}", f"tftp/rhcos/{NAMES['initramfs']}"}
    assert images[f"http/rhcos/{NAMES['rootfs']}"]["sha256"] == hashlib.sha256(
        fake_bytes(NAMES["rootfs"])).hexdigest()
    assert f"/rhcos/4.19/{NAMES['kernel']} 200" in access.read_text()

    # render keeps them (not foreign, not removed, still in manifest.json) ...
    again = runner.invoke(app, ["render", str(inv_path), "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "manifest.json").read_text())["images"] == images
    assert (out / "tftp/rhcos" / NAMES["kernel"]).read_bytes() == fake_bytes(NAMES["kernel"])
    # ... and push publishes them: TFTP root and HTTP root of the provisioner.
    inv = load_inventory(inv_path)
    files, extra = read_render_dir(inv, out)
    dests = {i.dest for p in plans_for(inv, files, None, extra) for i in p.items}
    assert f"{inv.provisioner.tftp_root}/rhcos/{NAMES['initramfs']}" in dests
    assert f"{inv.provisioner.http_root}/rhcos/{NAMES['rootfs']}" in dests
    assert not any(".upi-partial" in d for d in dests)


def test_a_rerun_fetches_nothing_and_render_into_a_fresh_dir_needs_no_force(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, NAMES)
    out = tmp_path / "out"  # images before render: render afterwards keeps them
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    first = run_images(runner, inv_path, out, str(src), "--json")
    assert first.exit_code == 0, first.output
    second = run_images(runner, inv_path, out, str(src), "--json")
    assert [f["status"] for f in json.loads(second.stdout)["files"]] == ["unchanged"] * 3
    rendered = runner.invoke(app, ["render", str(inv_path), "-o", str(out)])
    assert rendered.exit_code == 0, rendered.output
    assert len(json.loads((out / "manifest.json").read_text())["images"]) == 5


def test_a_checksum_mismatch_exits_1_naming_the_file_and_stages_nothing_of_it(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, NAMES)
    out = tmp_path / "out"
    files = {n: fake_bytes(n) for n in NAMES.values()}
    files[NAMES["initramfs"]] = b"a truncated or tampered download\n"
    with nginx(mirror(tmp_path, files), tmp_path / "nginx") as (url, _):
        result = run_images(runner, inv_path, out, url)
    assert result.exit_code == 1, result.output
    assert f"{NAMES['initramfs']}: sha256 mismatch: expected" in result.stderr
    assert "1 of 3 RHCOS files not staged" in result.stderr
    assert not (out / "tftp/rhcos" / NAMES["initramfs"]).exists()
    assert not (out / "http/rhcos" / NAMES["initramfs"]).exists()
    assert not list((out / PARTIAL_DIR).iterdir())  # not kept for a resume either
    images = json.loads((out / "manifest.json").read_text())["images"]
    assert not any(NAMES["initramfs"] in p for p in images)
    assert (out / "http/rhcos" / NAMES["kernel"]).read_bytes() == fake_bytes(NAMES["kernel"])


def test_an_interrupted_download_resumes_with_a_range_request(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    """Files not in the stream are checked against the mirror's sha256sum.txt."""
    inv_path = inventory(example_dir, OLD)
    out = tmp_path / "out"
    big = os.urandom(3 << 20) + b"tail"
    files = {OLD["kernel"]: b"k" * 1000, OLD["initramfs"]: b"i" * 2000, OLD["rootfs"]: big}
    sums = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    part = out / PARTIAL_DIR / f"{OLD['rootfs']}.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(big[: 1 << 20])  # what a killed run left behind
    with nginx(mirror(tmp_path, files, sums), tmp_path / "nginx") as (url, access):
        result = run_images(runner, inv_path, out, url, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    status = {f["name"]: f["status"] for f in doc["files"]}
    assert status[OLD["rootfs"]] == "resumed"
    assert (out / "http/rhcos" / OLD["rootfs"]).read_bytes() == big
    assert re.search(rf"/rhcos/4.19/{re.escape(OLD['rootfs'])} 206 \"bytes={1 << 20}-\" "
                     rf"{len(big) - (1 << 20)}\n", access.read_text()), access.read_text()
    assert not part.exists()
    # The inventory's 4.16 files are not what this installer was built for: said, not refused.
    warning = next(w for w in doc["warnings"] if w.startswith("rhcos.kernel"))
    assert f"but openshift-install 4.16.3 was built for RHCOS {BUILD} ({NAMES['kernel']})" in warning


def test_a_file_no_checksum_vouches_for_is_not_staged(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, OLD)
    src = mirror(tmp_path, {n: b"x" for n in OLD.values()}) / "rhcos/4.19"
    result = run_images(runner, inv_path, tmp_path / "out", str(src))
    assert result.exit_code == 1
    assert f"no sha256 known for {OLD['kernel']}: neither the installer's stream nor" in result.stderr
    assert not (tmp_path / "out/http/rhcos").exists()


def test_a_missing_file_and_bad_sources_are_named(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, NAMES)
    src = mirror(tmp_path, {n: fake_bytes(n) for n in list(NAMES.values())[:2]}) / "rhcos/4.19"
    result = run_images(runner, inv_path, tmp_path / "out", str(src))
    assert result.exit_code == 1
    assert f"{src / NAMES['rootfs']} does not exist" in result.stderr
    for bad in ("ftp://mirror.example.com/rhcos", str(tmp_path / "nowhere"), "https:///x"):
        result = run_images(runner, inv_path, tmp_path / "out2", bad)
        assert result.exit_code == 2, (bad, result.output)
        assert "--from" in result.stderr and "Traceback" not in result.output


def test_without_an_installer_it_says_how_to_name_one(runner, example_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UPI_OPENSHIFT_INSTALL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run_images(runner, inventory(example_dir, NAMES), tmp_path / "out", str(tmp_path))
    assert result.exit_code == 2
    assert "openshift-install not found" in result.stderr


def test_hostile_manifest_image_entries_are_never_followed_or_deleted(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    inv_path = inventory(example_dir, NAMES)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (out / "tftp").mkdir()
    (out / "tftp/rhcos").symlink_to(tmp_path)  # a planted link where the kernel goes
    record = {"sha256": "0" * 64, "size": 7}
    (out / "manifest.json").write_text(json.dumps({"cluster": "dgxpod.nvidia.com", "files": {}, "images": {
        "../victim": record, "tftp/../../victim": record, str(victim): record, "etc/victim": record}}))
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    result = run_images(runner, inv_path, out, str(src))
    assert result.exit_code == 2, result.output
    assert "is a symbolic link" in result.stderr
    assert victim.read_text() == "keep me"
    (out / "tftp/rhcos").unlink()
    result = run_images(runner, inv_path, out, str(src))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me"
    assert set(json.loads((out / "manifest.json").read_text())["images"]) <= {
        f"{d}/rhcos/{n}" for d in ("tftp", "http") for n in NAMES.values()}


def test_a_large_file_is_streamed_never_held_in_memory(tmp_path: Path, example_dir: Path) -> None:
    """64 MiB through the library with tracemalloc on: the peak stays far below the file size."""
    inv = load_inventory(inventory(example_dir, NAMES))
    src = tmp_path / "src"
    src.mkdir()
    digest = hashlib.sha256()
    with (src / NAMES["rootfs"]).open("wb") as fh:
        for _ in range(64):
            block = os.urandom(1 << 20)
            digest.update(block)
            fh.write(block)
    for key in ("kernel", "initramfs"):
        (src / NAMES[key]).write_bytes(fake_bytes(NAMES[key]))
    stream = Stream(BUILD, {
        k: StreamArtifact(k, n, f"https://example.invalid/{n}",
                          digest.hexdigest() if k == "rootfs" else hashlib.sha256(fake_bytes(n)).hexdigest())
        for k, n in NAMES.items()})
    tracemalloc.start()
    try:
        result = stage_images(inv, tmp_path / "out", DirSource(src), stream, "openshift-install 4.19.0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [s.status for s in result.staged] == ["fetched"] * 3
    assert peak < 8 << 20, f"peak {peak:,} bytes while staging a 64 MiB file"
    shutil.rmtree(tmp_path / "out")


def test_an_https_mirror_is_trusted_only_through_the_system_ca_store(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """TLS is verified: a mirror signed by an unknown CA is refused, then trusted via SSL_CERT_FILE."""
    inv_path = inventory(example_dir, NAMES)
    ca = make_ca("upi test mirror CA")
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    root = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()})
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    with nginx(root, tmp_path / "nginx", issue(ca, "127.0.0.1", server=True)) as (url, _):
        refused = run_images(runner, inv_path, tmp_path / "out", url)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        trusted = run_images(runner, inv_path, tmp_path / "out", url)
    assert refused.exit_code == 1
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr and url in refused.stderr
    assert trusted.exit_code == 0, trusted.output
    assert (tmp_path / "out/http/rhcos" / NAMES["rootfs"]).read_bytes() == fake_bytes(NAMES["rootfs"])


def staged_site(runner, example_dir: Path, tmp_path: Path):
    """A `local: true` provisioner site (tests/pushkit.py), rendered, with the RHCOS files staged."""
    require("dnsmasq")
    require("haproxy")
    site = make_site(tmp_path, example_dir, runner, {"local": True})
    text = site.inventory.read_text()
    for key, old in OLD.items():
        text = text.replace(old, NAMES[key])
    site.inventory.write_text(text)
    assert runner.invoke(app, ["render", str(site.inventory), "-o", str(site.out)]).exit_code == 0
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    staged = run_images(runner, site.inventory, site.out, str(src))
    assert staged.exit_code == 0, staged.output
    return site


def test_push_publishes_the_staged_files_to_the_tftp_and_http_roots(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    """End to end with a `local: true` provisioner: render, images, push (tests/pushkit.py)."""
    site = staged_site(runner, example_dir, tmp_path)
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), "--json"])
    assert pushed.exit_code == 0, pushed.output
    tftp, http = site.root / "var/lib/tftpboot/rhcos", site.root / "var/www/html/rhcos"
    for key, name in NAMES.items():
        assert (http / name).read_bytes() == fake_bytes(name)
        assert (tftp / name).exists() == (key != "rootfs")
    assert (tftp / NAMES["kernel"]).read_bytes() == fake_bytes(NAMES["kernel"])
    assert not (site.root / "var/www/html/.upi-partial").exists()


DAMAGE = {
    # The same size, other bytes: only the sha256 tells (bit rot, an edit in place).
    "same size": lambda data: bytes([data[0] ^ 1]) + data[1:],
    # A cut or grown file: its size tells before any host is touched.
    "truncated": lambda data: data[:-3],
}


@pytest.mark.parametrize("where", ["tftp", "http"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_push_refuses_a_staged_image_that_no_longer_matches_its_record(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path, where, damage) -> None:
    site = staged_site(runner, example_dir, tmp_path)
    victim = site.out / where / "rhcos" / NAMES["kernel"]
    data = victim.read_bytes()
    victim.unlink()  # the tftp/ and http/ copies may be one file (linked): damage only this one
    victim.write_bytes(DAMAGE[damage](data))
    for extra in ([], ["--dry-run"]):
        pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])
        assert "Traceback" not in pushed.output
        assert pushed.exit_code == 2, pushed.output
        assert f"{victim} no longer matches what `upi images` recorded in manifest.json (" in pushed.stderr
        assert "nothing was pushed. Run `upi images` again" in pushed.stderr
    # Nothing reached the provisioner: no image, no config.
    assert not (site.root / "var/lib/tftpboot/rhcos").exists()
    assert not (site.root / "var/www/html/rhcos").exists()
    assert not list((site.root / "etc/dnsmasq.d").glob("*.conf"))



@pytest.mark.parametrize("where", ["tftp", "http"])
def test_push_refuses_a_recorded_image_that_is_gone(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path, where) -> None:
    # Under http/ it used to be skipped without a word (the walk just did not find it): the HTTP
    # server then kept an older rootfs, or none, while manifest.json said the staged one was there.
    site = staged_site(runner, example_dir, tmp_path)
    victim = site.out / where / "rhcos" / NAMES["kernel"]
    victim.unlink()
    for extra in ([], ["--dry-run"]):
        pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), *extra])
        assert "Traceback" not in pushed.output
        assert pushed.exit_code == 2, pushed.output
        assert f"{victim} is recorded in manifest.json by `upi images` but is missing" in pushed.stderr
    assert not (site.root / "var/www/html/rhcos").exists()
    assert not list((site.root / "etc/dnsmasq.d").glob("*.conf"))


@pytest.mark.parametrize("where", ["tftp", "http"])
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_staged_file_damaged_in_place_is_staged_again_and_push_then_publishes(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path, where, damage) -> None:
    """`upi images` used to call a damaged file "unchanged" (its size agreed with the record) while
    `upi push` refused it and said to run `upi images` again: a loop no command could leave."""
    site = staged_site(runner, example_dir, tmp_path)
    victim = site.out / where / "rhcos" / NAMES["kernel"]
    data = victim.read_bytes()
    before = victim.stat()
    with victim.open("r+b") as fh:  # the same inode, written in place ...
        fh.truncate(0)
        fh.write(DAMAGE[damage](data))
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))  # ... and its mtime set back
    src = tmp_path / "mirror/rhcos/4.19"
    again = run_images(runner, site.inventory, site.out, str(src), "--json")
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    kernel = next(f for f in doc["files"] if f["key"] == "kernel")
    assert kernel["status"] == "fetched"
    assert f"{where}/rhcos/{NAMES['kernel']}" in kernel["detail"] and "staged again" in kernel["detail"]
    assert any("did not match its sha256" in w for w in doc["warnings"])
    assert [f["status"] for f in doc["files"] if f["key"] != "kernel"] == ["unchanged"] * 2
    for copy in ("tftp", "http"):
        assert (site.out / copy / "rhcos" / NAMES["kernel"]).read_bytes() == data
    pushed = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out)])
    assert pushed.exit_code == 0, pushed.output
    assert (site.root / "var/lib/tftpboot/rhcos" / NAMES["kernel"]).read_bytes() == data
    # A third run trusts the record again: nothing changed since.
    third = run_images(runner, site.inventory, site.out, str(src), "--json")
    assert [f["status"] for f in json.loads(third.stdout)["files"]] == ["unchanged"] * 3
