"""Which DGXs test RDMA bandwidth with which, and when: a ring per fabric, run in rounds.

Every DGX of a fabric is tested against its two neighbours in a ring (1-2,
2-3, ..., n-1), so each node's links are measured twice, by two different
partners, and a slow node shows up in both of its pairs while a slow cable
shows up in one. Two DGXs form one pair; one DGX forms none.

A node takes part in one test at a time (two tests on one node share its NICs
and halve both figures), so the ring's edges run in rounds in which no node
appears twice: a proper edge colouring of the cycle. An even ring needs two
colours (alternate edges); an odd ring needs three (alternate edges, with the
closing edge alone in a third round).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    """Two nodes of one fabric measured together: `server` listens, `client` connects and reports."""

    server: str
    client: str
    fabric: str
    round: int

    @property
    def name(self) -> str:
        """`a<->b`, the way tables and diagnoses name the pair."""
        return f"{self.server}<->{self.client}"


def ring(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """The ring's edges in order: (1,2), (2,3), ..., (n,1); one edge for two nodes, none for one."""
    n = len(nodes)
    if n < 2:
        return []
    if n == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % n]) for i in range(n)]


def edge_round(index: int, n: int) -> int:
    """The round of the ring's edge `index` (0-based) among `n` nodes.

    Rounds 0 and 1 alternate; an odd ring's closing edge touches the first node
    (whose edge 0 is in round 0) and the last (whose edge n-2 is in round 1), so
    it takes round 2.
    """
    if n % 2 == 1 and index == n - 1:
        return 2
    return index % 2


def schedule(fabrics: Mapping[str, Sequence[str]]) -> list[Pair]:
    """Every fabric's ring as pairs with their round; the fabrics' rounds run together (disjoint nodes)."""
    out: list[Pair] = []
    for fabric, nodes in fabrics.items():
        edges = ring(nodes)
        out += [Pair(a, b, fabric, edge_round(i, len(nodes))) for i, (a, b) in enumerate(edges)]
    return out


def joining(fabrics: Mapping[str, Sequence[str]], new: Collection[str]) -> list[Pair]:
    """`upi nodes add`: each new DGX measured once, against an existing DGX of its fabric, not the whole ring.

    The existing DGXs take the new ones in turn (inventory order), each as the
    server; a fabric with no existing DGX pairs its new ones in a ring. Rounds
    are given greedily so that no node is in two tests of one round (an
    existing DGX serving two new ones does so in two rounds).
    """
    out: list[Pair] = []
    for fabric, nodes in fabrics.items():
        old = [n for n in nodes if n not in new]
        added = [n for n in nodes if n in new]
        edges = [(old[i % len(old)], n) for i, n in enumerate(added)] if old else ring(added)
        busy: list[set[str]] = []
        for a, b in edges:
            r = next((i for i, taken in enumerate(busy) if not {a, b} & taken), len(busy))
            if r == len(busy):
                busy.append(set())
            busy[r] |= {a, b}
            out.append(Pair(a, b, fabric, r))
    return out


def rounds(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """The pairs grouped by round, in round order (empty rounds left out)."""
    numbers = sorted({p.round for p in pairs})
    return [[p for p in pairs if p.round == r] for r in numbers]
