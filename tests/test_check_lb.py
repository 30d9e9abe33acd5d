from __future__ import annotations

import contextlib
import json
from pathlib import Path

from check_helpers import (
    LOOPBACK,
    free_port,
    haproxy,
    readyz_handler,
    self_signed,
    tcp_backend,
    wait_for_states,
)
from conftest import inventory_path

from upi.cli import app

LB_PORTS = (6443, 22623, 443, 80)


@contextlib.contextmanager
def running_lb(tmp_path: Path, *, down: int | None = None, readyz: bytes = b"ok",
               status: str = "200 OK"):
    """Real haproxy with one frontend per LB port; the backend of `down` is not running."""
    ctx = self_signed(tmp_path)
    with contextlib.ExitStack() as stack:
        backends = {}
        for lb_port in LB_PORTS:
            if lb_port == down:
                backends[lb_port] = free_port()  # nothing listens there
            elif lb_port == 6443:
                backends[lb_port] = stack.enter_context(tcp_backend(readyz_handler(ctx, readyz, status)))
            else:
                backends[lb_port] = stack.enter_context(tcp_backend())
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
    assert (f"fail: nothing accepts on {LOOPBACK}:{closed}: start haproxy with haproxy/haproxy.cfg "
            "and open the port in the firewall") in result.stdout


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
