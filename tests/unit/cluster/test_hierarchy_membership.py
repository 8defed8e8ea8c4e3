"""Leaf membership of trees (an ancestor walk) against a plain Python oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import Hierarchy


@st.composite
def forests(draw):
    """Random trees and forests: each new node takes 1-4 current roots as children,
    over several rounds; some roots stay unparented; node ids not in level order."""
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    roots, edges, next_id = list(range(n)), [], n
    for _ in range(draw(st.integers(0, 12))):
        if len(roots) < 1:
            break
        k = int(rng.integers(1, min(4, len(roots)) + 1))
        pick = rng.choice(len(roots), k, replace=False)
        for i in sorted(pick, reverse=True):
            edges.append((roots.pop(i), next_id))
        roots.append(next_id)
        next_id += 1
    m = next_id
    return Hierarchy(
        n_points=n,
        edges=np.array(edges, np.int64).reshape(-1, 2),
        score=np.full(m, np.nan),
        level_lo=np.zeros(m, np.int32),
        level_hi=np.zeros(m, np.int32),
    )


def leaves_below(h: Hierarchy) -> list[set[int]]:
    children: dict[int, list[int]] = {}
    for c, p in h.edges.tolist():
        children.setdefault(p, []).append(c)

    def walk(v: int) -> set[int]:
        if v < h.n_points:
            return {v}
        return set().union(*(walk(c) for c in children.get(v, [])))

    return [walk(v) for v in range(h.n_nodes)]


@settings(max_examples=200, deadline=None)
@given(forests())
def test_tree_membership_lists_each_nodes_leaves_in_order(h: Hierarchy) -> None:
    M = h.leaf_membership()
    assert M.dtype == np.int8 and M.shape == (h.n_nodes, h.n_points)
    for v, want in enumerate(leaves_below(h)):
        row = M.indices[M.indptr[v] : M.indptr[v + 1]]
        assert row.tolist() == sorted(want)
        assert np.all(M.data[M.indptr[v] : M.indptr[v + 1]] == 1)
