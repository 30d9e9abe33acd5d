"""`upi check http` against servers that lie, stall or send nonsense, and `--deep`.

Well-behaved serving is a real nginx on loopback; every misbehaviour comes
from the fake in tests/fake_http.py. Whatever the server sends, the check
ends (each fetch has an overall deadline), exits 0, 1 or 2 and never prints
a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from check_helpers import LOOPBACK, free_port
from conftest import inventory_path
from fake_http import drip, fake_http, response
from realnginx import nginx
from test_check_http import IGNITION, http_root

from upi.cli import app
from upi.inventory import load_inventory

INV = load_inventory(inventory_path("dgxpod"), check_files=False)
KERNEL, INITRAMFS, ROOTFS = (f"/{p}" for p in (INV.rhcos.kernel, INV.rhcos.initramfs, INV.rhcos.rootfs))
ROLES = ("bootstrap", "master", "worker")


def _check(runner, port: int, *extra: str, server: str = LOOPBACK):
    result = runner.invoke(app, ["check", "http", str(inventory_path("dgxpod")), "--server", server,
                                 "--port", str(port), *extra])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _rows(result) -> dict[str, dict[str, str]]:
    return {r["check"]: r for r in json.loads(result.stdout)["checks"]}


def _http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC), usegmt=True)


def _ignition(body: bytes = IGNITION.encode(), **headers: str) -> bytes:
    headers.setdefault("Last-Modified", _http_date(datetime.now(UTC) - timedelta(hours=1)))
    return response(body, headers={"Content-Type": "application/json", **headers})


def _routes(**by_role: list[bytes | float]) -> dict[str, list[bytes | float]]:
    """Every dgxpod URL answering well, except the roles given."""
    routes: dict[str, list[bytes | float]] = {f"/ignition/{r}.ign": [_ignition()] for r in ROLES}
    routes.update({f"/ignition/{r}.ign": script for r, script in by_role.items()})
    return routes


# --- real nginx, and --deep ----------------------------------------------------------------------

@pytest.fixture
def site(tmp_path: Path):
    """nginx serving an HTTP root, and a render dir whose http/ staged the same files."""
    root = http_root(tmp_path)
    out = tmp_path / "out"
    shutil.copytree(root, out / "http")
    with nginx(root, tmp_path / "nginx") as port:
        yield root, out, port


def test_deep_reads_every_file_from_nginx_and_matches_the_staged_copies(runner, site) -> None:
    root, out, port = site
    rootfs = root / ROOTFS[1:]
    blob = os.urandom(3 * 1024 * 1024 + 17)  # several chunks and a tail
    rootfs.write_bytes(blob)
    (out / "http" / ROOTFS[1:]).write_bytes(blob)
    result = _check(runner, port, "--deep", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    rows = _rows(result)
    for what in ("kernel", "initramfs", "rootfs", "bootstrap.ign", "master.ign", "worker.ign"):
        assert rows[f"sha256 of {what}"]["verdict"] == "pass", rows[f"sha256 of {what}"]
    assert rows["sha256 of rootfs"]["expected"] == f"as staged ({len(blob):,} bytes)"
    assert rows["GET rootfs"]["got"] == f"200, {len(blob):,} bytes"
    assert rows["age of master.ign"]["verdict"] == "pass"  # nginx's Last-Modified, from mtime


def test_deep_fails_a_changed_or_truncated_file_and_warns_on_one_not_staged(runner, site) -> None:
    root, out, port = site
    kernel = root / KERNEL[1:]
    data = bytearray(kernel.read_bytes())
    data[-1] ^= 1  # same size, one bit off: only a full hash sees it
    kernel.write_bytes(bytes(data))
    initramfs = root / INITRAMFS[1:]
    initramfs.write_bytes(initramfs.read_bytes()[:100])
    (out / "http/ignition/worker.ign").unlink()
    result = _check(runner, port, "--deep", "-o", str(out), "--json")
    assert result.exit_code == 1
    rows = _rows(result)
    assert rows["sha256 of kernel"]["verdict"] == "fail"
    assert rows["sha256 of kernel"]["got"].startswith("differs (4,100 bytes, sha256 ")
    assert "run `upi push`" in rows["sha256 of kernel"]["fix"]
    assert rows["sha256 of initramfs"]["got"].startswith("differs (100 bytes")
    assert (rows["sha256 of worker.ign"]["got"], rows["sha256 of worker.ign"]["verdict"]) == (
        "not staged", "warn")
    assert rows["sha256 of rootfs"]["verdict"] == "pass"
    assert rows["GET kernel"]["verdict"] == "pass"


@pytest.mark.timeout(60)
def test_deep_refuses_staged_copies_that_are_links_fifos_or_directories(runner, site, tmp_path) -> None:
    root, out, port = site
    secret = tmp_path / "secret"
    secret.write_bytes((root / KERNEL[1:]).read_bytes())
    staged = out / "http"
    (staged / KERNEL[1:]).unlink()
    (staged / KERNEL[1:]).symlink_to(secret)
    (staged / INITRAMFS[1:]).unlink()
    os.mkfifo(staged / INITRAMFS[1:])  # opened without O_NONBLOCK this would hang forever
    (staged / ROOTFS[1:]).unlink()
    (staged / ROOTFS[1:]).mkdir()
    result = _check(runner, port, "--deep", "-o", str(out), "--json")
    assert result.exit_code == 1
    rows = _rows(result)
    assert {rows[f"sha256 of {w}"]["got"] for w in ("kernel", "initramfs", "rootfs")} == {
        "unreadable staged copy"}
    assert "FIFO" in rows["sha256 of initramfs"]["fix"]
    assert "directory" in rows["sha256 of rootfs"]["fix"]


def test_deep_symlinked_directory_leading_out_of_the_render_is_refused(runner, site, tmp_path) -> None:
    root, out, port = site
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / "http" / "ignition", elsewhere)
    (out / "http" / "ignition").symlink_to(elsewhere)
    result = _check(runner, port, "--deep", "-o", str(out), "--json")
    assert result.exit_code == 1
    row = _rows(result)["sha256 of master.ign"]
    assert (row["got"], row["verdict"]) == ("unreadable staged copy", "fail")
    assert "outside the render directory" in row["fix"]


@pytest.mark.parametrize(("args", "message"), [
    (["--deep"], "pass it with -o DIR"),
    (["--deep", "-o", "missing-dir"], "not a directory"),
    (["-o", "missing-dir"], "not a directory"),
])
def test_deep_needs_an_output_dir_that_exists(runner, tmp_path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    result = _check(runner, free_port(), *args)
    assert result.exit_code == 2
    assert message in result.stderr


# --- the fake: headers, bodies and timing no real server sends --------------------------------

@pytest.mark.parametrize(("value", "got", "verdict"), [
    ("yesterday", "unreadable Last-Modified", "warn"),
    ("", "no Last-Modified", "warn"),
    ("Mon, 01 Jan 10000 00:00:00 GMT", "unreadable Last-Modified", "warn"),
    ("Mon, 32 Foo 2024 99:99:99 GMT", "unreadable Last-Modified", "warn"),
    ("\xff\xfe", "unreadable Last-Modified", "warn"),
    ("Fri, 01 Jan 2100 00:00:00 GMT", None, "warn"),  # the future is not fresh
    ("Tue, 15 Nov 1994 08:12:31 -0000", None, "fail"),  # no zone: read as GMT, and old
])
def test_odd_last_modified_is_never_fresh_and_never_a_traceback(runner, value, got, verdict) -> None:
    with fake_http(_routes(master=[_ignition(**{"Last-Modified": value})])) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    assert result.exit_code == (1 if verdict == "fail" else 0), result.output
    row = _rows(result)["age of master.ign"]
    assert row["verdict"] == verdict
    if got:
        assert row["got"] == got
    assert _rows(result)["age of worker.ign"]["verdict"] == "pass"


def test_a_future_last_modified_says_the_clocks_disagree(runner) -> None:
    ahead = _http_date(datetime.now(UTC) + timedelta(hours=3))
    with fake_http(_routes(worker=[_ignition(**{"Last-Modified": ahead})])) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    row = _rows(result)["age of worker.ign"]
    assert row["got"].endswith("h in the future") and row["verdict"] == "warn"
    assert "one of the clocks is wrong" in row["fix"]


@pytest.mark.parametrize("length", ["²", "-1", "9" * 5000, "abc", "4, 4", "1_0", " 68 ",
                                    "18446744073709551616"])
def test_odd_content_length_never_crashes(runner, length) -> None:
    art = response(b"\x7fELF" + b"\0" * 64, headers={"Content-Length": length})
    routes = {**_routes(bootstrap=[_ignition(**{"Content-Length": length})]), KERNEL: [art]}
    with fake_http(routes) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    assert result.exit_code in (0, 1), result.output
    rows = _rows(result)
    assert rows["GET kernel"]["verdict"] in ("pass", "fail")
    assert not rows["GET kernel"]["got"].startswith("200, 1") or length == "1_0"


@pytest.mark.parametrize("body", [
    b"[" * 200_000,
    b'{"ignition": ' * 50_000,
    b'{"ignition": {"version": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
    b'{"ignition": {"version": 3.2}}',
    b'["ignition", {"version": "3.2.0"}]',
    b'"ignition"',
    b"\xff\xfe\x00{",
    b'{"ignition": {"version": "3.2.0"',  # truncated
])
def test_deep_truncated_or_odd_json_is_not_ignition(runner, body) -> None:
    with fake_http(_routes(bootstrap=[_ignition(body)])) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    assert result.exit_code == 1
    row = _rows(result)["GET bootstrap.ign"]
    assert (row["got"], row["verdict"]) == ("not ignition JSON", "fail")


def test_ignition_over_the_size_cap_is_refused_not_buffered(runner, monkeypatch) -> None:
    import upi.check.http as check_http

    monkeypatch.setattr(check_http, "IGNITION_LIMIT", 4096)
    big = json.dumps({"ignition": {"version": "3.2.0"}, "pad": "x" * 10_000}).encode()
    with fake_http(_routes(master=[_ignition(big)])) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    row = _rows(result)["GET master.ign"]
    assert (row["got"], row["verdict"]) == ("larger than 4,096 bytes", "fail")


def test_control_characters_in_a_version_are_shown_escaped(runner) -> None:
    body = json.dumps({"ignition": {"version": "3.2.0\x1b[2J\x1b]0;pwned\x07"}}).encode()
    with fake_http(_routes(worker=[_ignition(body)])) as srv:
        result = _check(runner, srv.server_address[1])
    assert "\x1b" not in result.stdout and "\\x1b[2J" in result.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["status line", "headers", "body"])
def test_a_server_dripping_a_byte_a_second_is_cut_at_the_deadline(runner, where) -> None:
    good = _ignition()
    split = {"status line": 3, "headers": good.index(b"\r\n") + 5, "body": good.index(b"\r\n\r\n") + 6}
    script = [good[:split[where]], *drip(good[split[where]:], every=0.5)]
    with fake_http(_routes(master=script)) as srv:
        result = _check(runner, srv.server_address[1], "--timeout", "1.5", "--retries", "1", "--json")
    assert result.exit_code == 1
    row = _rows(result)["GET master.ign"]
    assert row["got"] == "no complete answer within 1.5 s (the server is too slow or stalls)"
    assert srv.requests.count("/ignition/master.ign") == 2  # one retry, then given up
    assert _rows(result)["GET worker.ign"]["verdict"] == "pass"


@pytest.mark.timeout(60)
def test_a_dripping_artifact_is_cut_under_deep_too(runner, tmp_path) -> None:
    body = b"\x7fELF" + b"\0" * 60
    out = tmp_path / "out"
    (out / "http" / KERNEL[1:]).parent.mkdir(parents=True)
    (out / "http" / KERNEL[1:]).write_bytes(body)
    head = response(body)[: -len(body)]
    with fake_http({**_routes(), KERNEL: [head, *drip(body, every=0.3)]}) as srv:
        result = _check(runner, srv.server_address[1], "--deep", "-o", str(out), "--timeout", "1",
                        "--retries", "0", "--json")
    rows = _rows(result)
    assert rows["GET kernel"]["got"].startswith("no complete answer within 1 s")
    assert rows["sha256 of kernel"]["verdict"] == "fail"


@pytest.mark.parametrize(("script", "got"), [
    ([b"HTTP/1.1 abc nonsense\r\n\r\n"], None),
    ([b"hello\r\n\r\n"], "not an HTTP answer: 'hello"),
    ([], "the server closed the connection without an answer"),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n" + b"x" * 10], "the answer ended early"),
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"], "the answer ended early"),
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 5000 + b"\r\n"], None),
    ([response(b"", status="302 Found", headers={"Location": "/ignition/master.ign"})],
     "more than 5 redirects"),
    ([response(b"", status="301 Moved", headers={"Location": "http://[::1/x"})], "bad URL"),
    ([response(b"", status="301 Moved", headers={"Location": "gopher://example/"})], "bad URL"),
    ([b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70_000 + b"\r\n\r\n"], None),
])
def test_broken_answers_fail_that_one_url(runner, script, got) -> None:
    with fake_http(_routes(master=script)) as srv:
        result = _check(runner, srv.server_address[1], "--timeout", "2", "--retries", "0", "--json")
    assert result.exit_code == 1
    row = _rows(result)["GET master.ign"]
    assert row["verdict"] == "fail" and row["got"]
    if got:
        assert row["got"].startswith(got), row
    assert _rows(result)["GET bootstrap.ign"]["verdict"] == "pass"


def test_a_redirect_is_followed(runner) -> None:
    moved = response(b"", status="301 Moved Permanently", headers={"Location": "/elsewhere/worker.ign"})
    with fake_http({**_routes(worker=[moved]), "/elsewhere/worker.ign": [_ignition()]}) as srv:
        result = _check(runner, srv.server_address[1], "--json")
    assert result.exit_code == 0, result.output
    assert _rows(result)["GET worker.ign"]["got"].startswith("ignition 3.2.0")


# --- --server: parsed once, before any URL or socket address is built from it ------------------

@pytest.mark.parametrize("server", ["[::1", "::1]", "http://127.0.0.1", "a b", "", "127.0.0.1:8080",
                                    "host/x", "[fe80::1]x", "x" * 300, "a..b", "\x1b[31m"])
@pytest.mark.parametrize("area", ["http", "lb", "tftp", "dns", "all"])
def test_a_server_that_is_no_host_is_a_usage_error_in_every_check(runner, area, server) -> None:
    result = runner.invoke(app, ["check", area, str(inventory_path("dgxpod")), "--server", server,
                                 "--timeout", "0.2"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "is not a host name or an IP address" in result.output


@pytest.mark.parametrize("server", ["[::1]", "::1"])
def test_an_ipv6_server_with_or_without_brackets_is_probed(runner, server) -> None:
    result = _check(runner, free_port(), "--timeout", "0.3", "--retries", "0", "--json",
                    server=server)
    assert result.exit_code == 1  # nothing listens there
    row = _rows(result)["GET kernel"]
    assert row["fix"].startswith("http://[::1]:") and row["verdict"] == "fail"


def test_tftp_to_a_name_that_does_not_resolve_fails_without_a_traceback(runner) -> None:
    result = runner.invoke(app, ["check", "tftp", str(inventory_path("dgxpod")), "--server",
                                 "no-such-host.invalid", "--timeout", "0.2", "--retries", "0", "--json"])
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)["checks"]
    assert rows and all(r["got"].startswith("name does not resolve (") for r in rows)
    assert all("no-such-host.invalid does not resolve on this machine" in r["fix"] for r in rows)


def test_deep_compares_what_upi_images_staged_with_what_nginx_serves(
        runner, example_dir: Path, tmp_path: Path, fake_openshift_install: Path) -> None:
    from test_images import NAMES, fake_bytes, mirror
    from test_images import inventory as images_inventory

    inv = images_inventory(example_dir, NAMES)
    out = tmp_path / "out"
    assert runner.invoke(app, ["render", str(inv), "-o", str(out)]).exit_code == 0
    src = mirror(tmp_path, {n: fake_bytes(n) for n in NAMES.values()}) / "rhcos/4.19"
    staged = runner.invoke(app, ["images", str(inv), "-o", str(out), "--from", str(src)])
    assert staged.exit_code == 0, staged.output
    (out / "http/ignition").mkdir()
    for role in ROLES:
        (out / "http/ignition" / f"{role}.ign").write_text(IGNITION)
    served = tmp_path / "www"  # the provisioner's http_root after `upi push`
    shutil.copytree(out / "http", served, ignore=shutil.ignore_patterns(".upi-partial"))
    (served / "rhcos" / NAMES["initramfs"]).write_bytes(b"an older initramfs\n")
    with nginx(served, tmp_path / "nginx") as port:
        result = runner.invoke(app, ["check", "http", str(inv), "--server", LOOPBACK, "--port",
                                     str(port), "--deep", "-o", str(out), "--json"])
    assert result.exit_code == 1, result.output
    rows = _rows(result)
    assert {w: rows[f"sha256 of {w}"]["verdict"] for w in
            ("kernel", "initramfs", "rootfs", "bootstrap.ign", "master.ign", "worker.ign")} == {
        "kernel": "pass", "initramfs": "fail", "rootfs": "pass", "bootstrap.ign": "pass",
        "master.ign": "pass", "worker.ign": "pass"}
