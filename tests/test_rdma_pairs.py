"""The RDMA bandwidth schedule: a ring per fabric, in rounds where no node runs two tests."""

from __future__ import annotations

import pytest

from upi.gpu.rdma_pairs import Pair, ring, rounds, schedule


def _nodes(n: int) -> list[str]:
    return [f"dgx-{i}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", range(1, 10))
def test_every_ring_edge_is_measured_once_and_no_node_twice_in_a_round(n: int) -> None:
    nodes = _nodes(n)
    pairs = schedule({"infiniband": nodes})
    edges = [frozenset((p.server, p.client)) for p in pairs]
    if n == 1:
        assert pairs == []
        return
    expected = {frozenset((nodes[i], nodes[(i + 1) % n])) for i in range(n)}
    assert set(edges) == expected and len(edges) == len(expected)  # each ring edge once
    for group in rounds(pairs):
        seen = [node for p in group for node in (p.server, p.client)]
        assert len(seen) == len(set(seen)), (n, group)
    want = 1 if n == 2 else 2 if n % 2 == 0 else 3
    assert len(rounds(pairs)) == want


def test_two_nodes_make_one_pair_and_one_node_none() -> None:
    assert ring(["a", "b"]) == [("a", "b")]
    assert ring(["a"]) == []
    assert schedule({"ethernet": ["a", "b"]}) == [Pair("a", "b", "ethernet", 0)]


def test_fabrics_are_paired_apart_and_their_rounds_run_together() -> None:
    pairs = schedule({"infiniband": ["i1", "i2", "i3"], "ethernet": ["e1", "e2"]})
    for p in pairs:
        assert {p.server[0], p.client[0]} in ({"i"}, {"e"}), p
        assert p.fabric == ("infiniband" if p.server.startswith("i") else "ethernet")
    assert [len(r) for r in rounds(pairs)] == [2, 1, 1]
    assert pairs[0].name == "i1<->i2"


def test_joining_dgxs_are_each_paired_once_with_an_existing_dgx_of_their_fabric() -> None:
    from upi.gpu.rdma_pairs import joining

    fabrics = {"infiniband": ["a", "b", "c", "d", "e"], "ethernet": ["r1", "r2", "r3"]}
    pairs = joining(fabrics, {"d", "e", "r2", "r3"})
    assert [(p.server, p.client, p.fabric, p.round) for p in pairs] == [
        ("a", "d", "infiniband", 0), ("b", "e", "infiniband", 0),
        ("r1", "r2", "ethernet", 0), ("r1", "r3", "ethernet", 1)]  # r1 serves both: two rounds


def test_joining_dgxs_without_an_existing_one_pair_among_themselves() -> None:
    from upi.gpu.rdma_pairs import joining

    pairs = joining({"infiniband": ["a", "b", "c"]}, {"a", "b", "c"})
    assert [(p.server, p.client, p.round) for p in pairs] == [("a", "b", 0), ("b", "c", 1), ("c", "a", 2)]
    assert joining({"infiniband": ["a", "b"]}, {"b"}) == joining({"infiniband": ["a", "b"]}, ["b"])
    assert joining({"ethernet": ["x"]}, {"x"}) == []  # one DGX on its fabric: node checks only
