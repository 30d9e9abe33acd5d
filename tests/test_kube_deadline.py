"""Every request to the Kubernetes API is bounded as a whole (issue 24): headers included.

The FAKE API server (tests/fake_apiserver.py, alone or under tests/fake_gpu.py) speaks real
TLS; here it answers one request by dripping its response headers, a byte at
a time, and never finishes them. A socket timeout restarts with every byte, and
upi's own deadline used to start only once the headers were in: the request
never ended. Each command must end with the deadline's error. The deadline is
lowered to 1 s through upi.csr.api.REQUEST_SECONDS (what every Api reads), so
the tests assert which error ended the run, not how fast.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator

import pytest
from csr_cases import client
from fake_apiserver import FakeApiServer
from gpu_support import clean_cluster, gpu_args, gpu_inventory
from test_approve_csr import INVENTORY, add

from upi.cli import app

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CV_PATH = "/apis/config.openshift.io/v1/clusterversions/version"
TOOK = "the response took longer than 1 s"


def dripped_headers(stop: threading.Event) -> Iterator[bytes]:
    """A status line and headers without end, one byte every 0.2 s (never the blank line)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    while True:
        for byte in head:
            if stop.wait(0.2):
                return
            yield bytes([byte])
        head = b"X-Slow: a\r\n"


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import upi.csr.api as api

    monkeypatch.setattr(api, "REQUEST_SECONDS", 1.0)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def _drip_lists(fake: FakeApiServer, stop: threading.Event, path: str) -> None:
    fake.tamper = lambda method, p: dripped_headers(stop) if p.split("?")[0] == path else None


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_approve_csr_once_ends_at_the_deadline_while_headers_drip(runner, kube, stop) -> None:
    add(kube, client("master-0"))
    _drip_lists(kube, stop, CSR_PATH)
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(kube.kubeconfig), "--once"])
    assert "Traceback" not in result.output
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"upi: error: {kube.url}")
    assert f"GET {CSR_PATH}: {TOOK}" in result.stderr, result.stderr
    assert kube.approved() == set()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_the_approval_put_ends_at_the_deadline_while_headers_drip(runner, kube, stop) -> None:
    add(kube, client("master-0"))
    kube.tamper = lambda method, p: dripped_headers(stop) if method == "PUT" else None
    result = runner.invoke(app, ["approve-csr", INVENTORY, "--kubeconfig", str(kube.kubeconfig), "--once"])
    assert result.exit_code == 1, result.output
    assert f"PUT {CSR_PATH}/client-master-0/approval: {TOOK}" in result.stderr, result.stderr


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_status_reports_the_deadline_and_still_shows_the_rest(runner, kube, stop) -> None:
    _drip_lists(kube, stop, CSR_PATH)
    kube.add_node("master-0", ready=True)
    result = runner.invoke(app, ["status", INVENTORY, "--kubeconfig", str(kube.kubeconfig),
                                 "--dnsmasq-log", os.devnull, "--json"])
    assert result.exit_code == 0, result.output
    unread = json.loads(result.stdout)["unread"]
    assert any(f"GET {CSR_PATH}: {TOOK}" in u for u in unread), unread


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_wait_node_readiness_ends_at_the_deadline_while_headers_drip(kube, stop) -> None:
    from upi.errors import ClusterError
    from upi.wait.nodes import node_readiness

    _drip_lists(kube, stop, "/api/v1/nodes")
    with pytest.raises(ClusterError, match=TOOK):
        node_readiness(kube.kubeconfig)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_upi_gpu_ends_at_the_deadline_naming_the_object(runner, tmp_path, stop) -> None:
    for cluster in clean_cluster(tmp_path):
        cluster.api.tamper = lambda method, p: dripped_headers(stop) if p == CV_PATH else None
        result = runner.invoke(app, gpu_args(gpu_inventory(tmp_path), cluster))
        assert "Traceback" not in result.output
        assert result.exit_code == 1, result.output
        assert f"ClusterVersion version: the API at {cluster.api.url} answered badly: GET {CV_PATH}: " \
               f"{TOOK}" in result.output, result.output
        assert not [r for r in cluster.api.requests if r[0] in ("PATCH", "POST")]
        stop.set()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("short_deadline")
def test_a_watch_whose_headers_drip_is_dropped_and_started_again(kube, stop) -> None:
    from upi.csr.client import Approver
    from upi.csr.connect import connect
    from upi.facts.identity import node_identities
    from upi.inventory import load_inventory

    watches = []

    def tamper(method, p):
        if "watch=" in p:
            watches.append(p)
            return dripped_headers(stop) if len(watches) == 1 else None
        return None

    kube.tamper = tamper
    conn = connect(kube.kubeconfig)
    done = threading.Event()
    approver = Approver(conn, node_identities(load_inventory(INVENTORY, check_files=False)))
    thread = threading.Thread(target=approver.watch, args=(done,), kwargs={"poll": 5.0}, daemon=True)
    thread.start()
    try:
        for _ in range(200):  # the first watch drips; the approver must leave it and watch again
            if len(watches) >= 2:
                break
            done.wait(0.1)
        assert len(watches) >= 2, watches
        add(kube, client("master-0"))
        for _ in range(100):
            if kube.approved():
                break
            done.wait(0.1)
        assert kube.approved() == {"client-master-0"}
    finally:
        done.set()
        thread.join(timeout=10)
        conn.close()
