"""A Kubernetes API that answers garbage: approve-csr, upi wait's node list and the GPU flow's client.

The fake API server (tests/fake_apiserver.py) sends the test's raw bytes instead of
its answer (`tamper`), or one raw line into every watch stream. Whatever it
sends, upi ends with a one-line error (exit 1) or logs the bad event and goes
on; it never prints a traceback, never approves on a broken answer and never
buffers an answer past its cap.
"""

from __future__ import annotations

import threading

import pytest
from conftest import inventory_path
from csr_cases import client, serving
from fake_apiserver import FakeApiServer
from gpu_support import clean_cluster, gpu_args, gpu_inventory
from test_approve_csr import INVENTORY, add, wait_for

from upi.cli import app
from upi.commands.approve_csr import approve_csr

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


@pytest.fixture
def fake(tmp_path):
    server = FakeApiServer(tmp_path / "assets").start()
    yield server
    server.stop()


def raw(body: bytes, *, status: str = "200 OK", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def tamper_list(fake: FakeApiServer, chunks: list[bytes]) -> None:
    """Answer the CSR list (not the watch, not single objects) with `chunks`."""
    fake.tamper = lambda method, path: chunks if method == "GET" and path.split("?")[0] == CSR_PATH \
        and "watch=" not in path else None


def approve_once(runner, fake):
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(fake.kubeconfig),
                                 "--once"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


GARBAGE = {
    "not json": (raw(b"<html>502 Bad Gateway</html>"), "the response is not JSON"),
    "truncated": (raw(b'{"kind": "CertificateSigningRequestList", "items": [{"metadata"'),
                  "the response is not JSON (truncated?)"),
    "cut by the server": (raw(b'{"kind": "List", "items": [', length=5000), "cannot reach the API"),
    "array": (raw(b"[1, 2, 3]"), "the response is a JSON list, not an object"),
    "null": (raw(b"null"), "the response is a JSON NoneType, not an object"),
    "deep": (raw(b"[" * 100_000 + b"]" * 100_000), "nests too deeply"),
    "deep object": (raw(b'{"a":' * 100_000 + b"1" + b"}" * 100_000), "nests too deeply"),
    "not utf-8": (raw(b'{"items": "\xff\xfe"}'), "the response is not JSON"),
    "no metadata": (raw(b'{"items": []}'), "the response is not a list"),
    "items not a list": (raw(b'{"metadata": {"resourceVersion": "1"}, "items": {"a": 1}}'),
                         "the response is not a list"),
    "version not a string": (raw(b'{"metadata": {"resourceVersion": 7}, "items": []}'),
                             "resourceVersion or continue is not a string"),
    "endless pages": (raw(b'{"metadata": {"resourceVersion": "1", "continue": "x"}, "items": []}'),
                      None),
    "status garbage": (raw(b"\x00\x01garbage", status="500 Internal Server Error"), "HTTP 500"),
    "not http": (b"SSH-2.0-OpenSSH_9.2\r\n", "cannot reach the API"),
    # A Content-Length that str.isdigit() takes and int() does not (or that int() refuses to read).
    "superscript length": ("HTTP/1.1 200 OK\r\nContent-Length: \u00b2\r\nConnection: close\r\n\r\n{}"
                           .encode(), None),
    "5,000-digit length": (b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000
                           + b"\r\nConnection: close\r\n\r\n{}", None),
    "nothing": (b"", "cannot reach the API"),
}


@pytest.mark.parametrize("case", GARBAGE)
def test_a_garbage_list_is_a_one_line_error_and_approves_nothing(runner, fake, monkeypatch, case) -> None:
    import upi.csr.api as api

    monkeypatch.setattr(api, "MAX_PAGES", 3)  # "endless pages": the same continue token forever
    add(fake, client("master-0"))
    body, message = GARBAGE[case]
    tamper_list(fake, [body])
    result = approve_once(runner, fake)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("upi: error: ") and fake.url in result.stderr
    assert result.stderr.count("\n") == 1
    if message:
        assert message in result.stderr
    assert fake.approved() == set() and fake.approval_puts == 0


def test_an_answer_announcing_more_than_the_cap_is_refused_before_reading(runner, fake) -> None:
    tamper_list(fake, [raw(b"{}", length=10**12)])
    result = approve_once(runner, fake)
    assert result.exit_code == 1
    assert "the response is 1,000,000,000,000 bytes, more than upi reads (16,777,216)" in result.stderr


@pytest.mark.timeout(120)
def test_an_endless_answer_is_cut_at_the_cap_not_buffered(runner, fake, monkeypatch) -> None:
    import upi.csr.api as api

    monkeypatch.setattr(api, "MAX_RESPONSE", 256 * 1024)
    stop = threading.Event()

    def endless():
        yield b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        yield b'{"items": ['
        while not stop.is_set():  # no Content-Length and no end: only the cap stops the reader
            yield b'{"metadata": {"name": "x"}},' * 2000

    tamper_list(fake, endless())
    try:
        result = approve_once(runner, fake)
    finally:
        stop.set()
    assert result.exit_code == 1
    assert "the response is larger than upi reads (262,144 bytes)" in result.stderr


@pytest.mark.timeout(120)
def test_a_list_dripping_a_byte_at_a_time_hits_the_deadline(runner, fake, monkeypatch) -> None:
    import upi.csr.api as api

    monkeypatch.setattr(api, "REQUEST_SECONDS", 1.0)
    stop = threading.Event()

    def drip():
        yield b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        while not stop.wait(0.1):
            yield b" "

    tamper_list(fake, drip())
    try:
        result = approve_once(runner, fake)
    finally:
        stop.set()
    assert result.exit_code == 1
    assert "the response took longer than 1 s" in result.stderr


def test_a_garbage_answer_to_the_approval_is_an_error_not_a_success(runner, fake) -> None:
    add(fake, client("master-0"))
    fake.tamper = lambda method, path: [raw(b"\x00not json")] if method == "PUT" else None
    result = approve_once(runner, fake)
    assert result.exit_code == 1
    assert "PUT " in result.stderr and "the response is not JSON" in result.stderr
    assert fake.approved() == set()


BAD_EVENTS = [
    b"not json at all\n",
    b'{"type": "ADDED", "object": {"metadata"\n',  # cut in half
    b"[" * 100_000 + b"\n",
    b'{"type": "ADDED"}\n',
    b'{"type": 5, "object": {}}\n',
    b'{"type": "ADDED", "object": []}\n',
    b'{"type": "ADDED", "object": {"metadata": {"name": "../../etc"}, "spec": {}}}\n',
    b'{"type": "ADDED", "object": {"metadata": {"name": "x"}, "spec": "no"}}\n',
    b'{"type": "EXPLODED", "object": {"metadata": {"name": "x"}}}\n',
    b'{"type": "DELETED", "object": {"metadata": 7}}\n',
    b'{"type": "MODIFIED", "object": {"metadata": {"name": "x"}, "spec": {"groups": [1]}}}\n',
    b"\xff\xfe\xfd\n",
    b"null\n",
]


@pytest.mark.timeout(120)
def test_malformed_watch_events_are_logged_and_the_watch_goes_on(fake) -> None:
    fake.add_node("worker-1")
    stop = threading.Event()
    records = []
    thread = threading.Thread(target=approve_csr, args=(inventory_path("dgxpod"),), kwargs=dict(
        kubeconfig=fake.kubeconfig, assets=None, mode="watch", dry_run=False, log=records.append,
        stop=stop), daemon=True)
    thread.start()
    wait_for(lambda: fake.watches_served >= 1, "the watch to start")
    for line in BAD_EVENTS:
        fake.add_raw_event(line)
    add(fake, client("master-0"))
    wait_for(lambda: fake.approved() == {"client-master-0"}, "a good CSR after the bad events")
    add(fake, serving("master-0"))
    wait_for(lambda: "serving-master-0" in fake.approved(), "the next one")
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    bad = [r for r in records if r.reason.startswith("malformed CSR object from the API: watch event")]
    assert len(bad) >= len(BAD_EVENTS) - 1  # `{"type": "EXPLODED"...}`-like lines each get one
    assert all(r.action == "skipped" for r in bad)
    assert {r.csr for r in bad} <= {"?", "x"}


@pytest.mark.timeout(120)
def test_an_endless_watch_event_is_cut_and_the_watch_starts_over(fake, monkeypatch) -> None:
    import upi.csr.api as api

    monkeypatch.setattr(api, "MAX_EVENT", 64 * 1024)
    stop = threading.Event()
    records = []
    thread = threading.Thread(target=approve_csr, args=(inventory_path("dgxpod"),), kwargs=dict(
        kubeconfig=fake.kubeconfig, assets=None, mode="watch", dry_run=False, log=records.append,
        stop=stop), daemon=True)
    thread.start()
    wait_for(lambda: fake.watches_served >= 1, "the watch to start")
    fake.add_raw_event(b'{"type": "ADDED", "object": {"pad": "' + b"x" * 200_000)  # no end of line
    add(fake, client("master-0"))
    wait_for(lambda: fake.approved() == {"client-master-0"}, "a good CSR after the endless event")
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()


# --- the same server, read by upi wait's node list and by the GPU flow's client -------------------

@pytest.mark.parametrize("case", ["not json", "truncated", "deep", "array", "no metadata"])
def test_node_readiness_turns_garbage_into_a_cluster_error(fake, case) -> None:
    from upi.errors import ClusterError
    from upi.wait.nodes import node_readiness

    fake.tamper = lambda method, path: [GARBAGE[case][0]]
    with pytest.raises(ClusterError):
        node_readiness(fake.kubeconfig)


@pytest.mark.parametrize("body", [b"hello", b"[1, 2]", b"[" * 100_000, b'{"kind": "Node"', b"null",
                                  b'"x"', b'{"apiVersion": "v1", "kind": "Node", "metadata": 5}'])
def test_the_gpu_flows_client_turns_garbage_into_a_cluster_error(fake, body) -> None:
    from upi.csr.connect import connect
    from upi.errors import ClusterError
    from upi.gpu.kube import Kube

    conn = connect(fake.kubeconfig)
    kube = Kube(conn)
    fake.tamper = lambda method, path: [raw(body)]
    try:
        for op in (lambda: kube.get("v1", "Node", "x"), lambda: kube.find("v1", "Node"),
                   lambda: kube.apply({"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "a"}})):
            with pytest.raises(ClusterError):
                op()
    finally:
        conn.close()


@pytest.mark.parametrize(("server", "why"), [
    ("https://[::1", "Invalid port"),
    ("https://[zz]:6443", "Invalid IPv6 address"),
    ("https://api.example.com:port", "Invalid port"),
    ("https://[::1]:99999", "port 99999 is not 1-65535"),
    ("https://a b:6443", "no usable host name"),
    ("https://:6443", "no usable host name"),
    ("https://api/\nx", "non-printable"),
])
@pytest.mark.parametrize("command", ["approve-csr", "gpu"])
def test_a_kubeconfig_server_that_is_no_url_is_bad_input(runner, fake, tmp_path, server, why,
                                                         command) -> None:
    import yaml

    doc = yaml.safe_load(fake.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["server"] = server
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(doc))
    args = ["--once"] if command == "approve-csr" else []
    result = runner.invoke(app, [command, INVENTORY, "--kubeconfig", str(kubeconfig), *args])
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert f"upi: error: {kubeconfig}: server {server!r} is not a URL upi can use" in result.stderr
    assert why in result.stderr


# --- upi gpu against the fake GPU cluster (tests/fake_apiserver.py + fake_gpu.py), answers tampered ---

CV_PATH = "/apis/config.openshift.io/v1/clusterversions/version"
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"


def _endless(stop: threading.Event):
    yield JSON_HEAD + b'{"metadata": {"name": "version"}, "pad": ['
    while not stop.is_set():  # no Content-Length and no end: only the cap stops the reader
        yield b'"xxxxxxxxxxxxxxxx",' * 4000


def _dripping(stop: threading.Event):
    yield JSON_HEAD
    while not stop.wait(0.1):
        yield b" "


OVERSIZED = {
    "announced": (lambda stop: [raw(b"{}", length=10**12)],
                  "the response is 1,000,000,000,000 bytes, more than upi reads (16,777,216)"),
    "endless": (_endless, "the response is larger than upi reads (262,144 bytes)"),
    "dripping": (_dripping, "the response took longer than 1 s"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", OVERSIZED)
def test_the_gpu_flow_stops_at_an_oversized_or_endless_answer_naming_the_object(
        runner, tmp_path, monkeypatch, case) -> None:
    import upi.csr.api as api

    # Lower caps keep the test quick; the announced size is refused at the real cap.
    monkeypatch.setattr(api, "MAX_RESPONSE", 256 * 1024 if case == "endless" else api.MAX_RESPONSE)
    monkeypatch.setattr(api, "REQUEST_SECONDS", 1.0)
    chunks, message = OVERSIZED[case]
    stop = threading.Event()
    for cluster in clean_cluster(tmp_path):
        cluster.api.tamper = lambda method, path: chunks(stop) if path == CV_PATH else None
        try:
            result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
        finally:
            stop.set()
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 1, result.output
        assert f"ClusterVersion version: the API at {cluster.api.url} answered badly: GET {CV_PATH}: " \
               f"{message}" in result.output, result.output
        assert not [r for r in cluster.api.requests if r[0] in ("PATCH", "POST")]
