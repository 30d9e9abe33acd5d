from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
from check_helpers import (
    LOOPBACK,
    free_port,
    haproxy,
    http_handler,
    node_backends,
    readyz_handler,
    rendered_lb,
    self_signed,
    start_rendered_haproxy,
    tcp_backend,
    tls_handler,
    wait_for_states,
)
from conftest import inventory_path

from upi.cli import app

LB_PORTS = (6443, 22623, 443, 80)


@contextlib.contextmanager
def running_lb(tmp_path: Path, *, down: int | None = None, readyz: bytes = b"ok",
               status: str = "200 OK"):
    """Real haproxy with one frontend per LB port; the backend of `down` is not running.

    A small haproxy.cfg of loopback ports (check_helpers.HAPROXY_CFG), so that
    tests can run side by side without a namespace; the rendered file itself
    runs, as written, in `rendered_lb` below.
    """
    ctx = self_signed(tmp_path)
    with contextlib.ExitStack() as stack:
        backends = {}
        for lb_port in LB_PORTS:
            if lb_port == down:
                backends[lb_port] = free_port()  # nothing listens there
            elif lb_port == 6443:
                backends[lb_port] = stack.enter_context(tcp_backend(readyz_handler(ctx, readyz, status)))
            elif lb_port == 80:
                backends[lb_port] = stack.enter_context(tcp_backend(http_handler()))
            else:  # the machine config server and the router's 443 speak TLS
                backends[lb_port] = stack.enter_context(tcp_backend(tls_handler(ctx)))
        fronts = {lb_port: free_port() for lb_port in LB_PORTS}
        stats = stack.enter_context(haproxy(tmp_path, {fronts[p]: backends[p] for p in LB_PORTS}))
        wait_for_states(stats, {f"s{fronts[p]}": "DOWN" if p == down else "UP" for p in LB_PORTS})
        yield [f"--port-map={p}={fronts[p]}" for p in LB_PORTS]


def check_lb(runner, mapping: list[str], *extra: str):
    return runner.invoke(app, ["check", "lb", str(inventory_path("dgxpod")), "--server", LOOPBACK,
                               *mapping, *extra])


def test_every_port_forwards_and_the_api_is_ready(runner, tmp_path: Path) -> None:
    with running_lb(tmp_path) as mapping:
        result = check_lb(runner, mapping, "--cluster-up", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["checks"]
    assert [(r["check"].split(" via ")[0], r["got"], r["verdict"]) for r in rows] == [
        (f"LB {LOOPBACK}:6443", "forwards", "pass"),
        (f"LB {LOOPBACK}:22623", "forwards", "pass"),
        (f"LB {LOOPBACK}:443", "forwards", "pass"),
        (f"LB {LOOPBACK}:80", "forwards", "pass"),
        (f"GET https://{LOOPBACK}:6443/readyz", "200 OK ok", "pass"),
    ]
    assert rows[0]["check"].endswith("(api-server)")


def test_a_pool_with_its_backend_down_fails_once_the_cluster_is_up(runner, tmp_path: Path) -> None:
    with running_lb(tmp_path, down=443) as mapping:
        before = check_lb(runner, mapping)
        after = check_lb(runner, mapping, "--cluster-up")
    # Before the nodes boot no backend answers: a warning, not a failure.
    assert before.exit_code == 0, before.output
    fix = (f"{LOOPBACK}:{mapping[2].rsplit('=', 1)[1]} accepts but no server of "
           "ingress-router-https answers (worker-0 10.33.3.44, worker-1 10.33.3.46)")
    assert f"warn: {fix} (expected until those nodes boot)" in before.stdout
    assert after.exit_code == 1
    assert [line for line in after.stdout.splitlines() if line.startswith("fail:")] == [f"fail: {fix}"]
    assert after.stderr == "upi: error: 1 of 5 checks failed\n"


def test_a_port_nothing_listens_on_fails(runner, tmp_path: Path) -> None:
    with running_lb(tmp_path) as mapping:
        closed = free_port()
        mapping[3] = f"--port-map=80={closed}"
        result = check_lb(runner, mapping)
    assert result.exit_code == 1
    assert (f"fail: nothing listens on {LOOPBACK}:{closed}: start haproxy with haproxy/haproxy.cfg "
            "there (`upi push`)") in result.stdout


def test_an_api_that_is_not_ready_fails_readyz(runner, tmp_path: Path) -> None:
    with running_lb(tmp_path, readyz=b"[-]etcd failed", status="500 Internal Server Error") as mapping:
        before = check_lb(runner, mapping, "--json")
        after = check_lb(runner, mapping, "--cluster-up")
    ready = json.loads(before.stdout)["checks"][-1]
    assert (ready["check"].split(" via ")[0], ready["got"], ready["verdict"]) == (
        f"GET https://{LOOPBACK}:6443/readyz", "500 Internal Server Error [-]etcd failed", "warn")
    assert before.exit_code == 0
    assert after.exit_code == 1
    assert ("fail: the Kubernetes API behind 127.0.0.1:" in after.stdout)


def test_port_map_names_a_load_balancer_port(runner) -> None:
    result = runner.invoke(app, ["check", "lb", str(inventory_path("dgxpod")), "--port-map", "8443=1"])
    assert result.exit_code == 2
    assert result.stderr == (
        "upi: error: --port-map 8443=1: 8443 is not a load-balancer port (80, 443, 6443, 22623)\n")


def _lb_rows(lab, *extra: str) -> list[dict[str, str]]:
    """`upi check lb --json` from inside the namespace, against the inventory's own LB address."""
    from typer.testing import CliRunner

    def run() -> list[dict[str, str]]:
        result = CliRunner().invoke(app, ["check", "lb", str(inventory_path("dgxpod")), "--json",
                                          "--timeout", "1", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["checks"]

    return lab.inside(run)


@pytest.mark.slow
def test_no_port_forwards_while_haproxy_still_believes_dead_servers_up(tmp_path: Path) -> None:
    """The rendered haproxy.cfg, no node up: from the first moment on, never a PASS.

    HAProxy starts with every server UP and holds each client while it dials one
    (6443's health check takes 20 s to mark them down): a connection accepted and
    held is not a backend's answer. Checked at once and again for 25 s.
    """
    with rendered_lb(tmp_path) as (lab, rendered):
        start_rendered_haproxy(lab, rendered)
        started = time.monotonic()
        seen: list[tuple[float, str, str, str]] = []
        while time.monotonic() - started < 25:
            at = time.monotonic() - started
            seen += [(at, r["check"], r["got"], r["verdict"]) for r in _lb_rows(lab)]
    assert len({s[0] for s in seen}) >= 5, seen  # checked again and again, not once
    assert {s[1] for s in seen} == {"LB 10.33.3.54:6443 (api-server)",
                                    "LB 10.33.3.54:22623 (machine-config-server)",
                                    "LB 10.33.3.54:443 (ingress-router-https)",
                                    "LB 10.33.3.54:80 (ingress-router-http)"}
    assert [s for s in seen if s[3] != "warn"] == []
    assert [s for s in seen if "forwards" in s[2]] == []


@pytest.mark.slow
def test_every_pool_forwards_when_its_nodes_answer(tmp_path: Path) -> None:
    """The rendered haproxy.cfg with a real server at every node's IP and port: PASS throughout."""
    with rendered_lb(tmp_path) as (lab, rendered), node_backends(lab, tmp_path):
        start_rendered_haproxy(lab, rendered)
        rows = _lb_rows(lab, "--cluster-up")
    assert [(r["check"], r["got"], r["verdict"]) for r in rows] == [
        ("LB 10.33.3.54:6443 (api-server)", "forwards", "pass"),
        ("LB 10.33.3.54:22623 (machine-config-server)", "forwards", "pass"),
        ("LB 10.33.3.54:443 (ingress-router-https)", "forwards", "pass"),
        ("LB 10.33.3.54:80 (ingress-router-http)", "forwards", "pass"),
        ("GET https://10.33.3.54:6443/readyz", "200 OK ok", "pass"),
    ]


def test_a_backend_that_accepts_but_never_speaks_does_not_forward(runner, tmp_path: Path) -> None:
    """A server that takes the TCP connection and stays silent is no answer: WARN, not forwards."""
    with running_lb(tmp_path) as mapping, tcp_backend() as silent:
        mapping[1] = f"--port-map=22623={silent}"  # what a LB holding the client looks like
        result = check_lb(runner, mapping, "--timeout", "0.5", "--json")
    rows = json.loads(result.stdout)["checks"]
    assert (rows[1]["got"], rows[1]["verdict"]) == ("accepted, no server answered within 0.5 s", "warn")


def test_haproxys_own_503_in_http_mode_is_not_a_backend_answering(runner, tmp_path: Path) -> None:
    """A load balancer in `mode http` answers 503 itself when no server is up: no forwarding."""
    front, dead = free_port(), free_port()
    with haproxy(tmp_path, {front: dead}, mode="http") as stats:
        wait_for_states(stats, {f"s{front}": "DOWN"})
        result = check_lb(runner, [f"--port-map=80={front}"], "--timeout", "1", "--json")
    row = next(r for r in json.loads(result.stdout)["checks"] if "(ingress-router-http)" in r["check"])
    assert (row["got"], row["verdict"]) == ("answered by the load balancer itself: no server", "warn")
