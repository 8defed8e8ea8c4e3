"""Replaying every ``delta_`` into a plain store reproduces the hierarchy, attributes too.

The store here is a dict that applies a delta as the graph stores do (retire edges,
upsert nodes, un-retiring ids that come back, retire nodes, add edges). After every
``partial_fit`` its current nodes and edges must equal ``hierarchy_``: the same
clusters (compared by the points they hold, since GRINCH numbers its export apart from
its internal ids) with the same size, score and levels. Before the fix GRINCH left
stale heights and scores on nodes that a rotation, graft or restructure changed
without changing their leaf count.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC, Grinch
from er.delta import ClusteringDelta


class _DictStore:
    def __init__(self) -> None:
        self.nodes: dict[int, dict[str, Any]] = {}
        self.alive: set[int] = set()
        self.edges: set[tuple[int, int]] = set()

    def apply(self, d: ClusteringDelta) -> None:
        self.edges -= {tuple(e) for e in d.edges_retired.tolist()}
        for k, v in enumerate(d.node_id.tolist()):
            self.nodes[v] = {
                "leaf": bool(d.is_leaf[k]),
                "size": int(d.size[k]),
                "score": float(d.score[k]),
                "lo": int(d.level_lo[k]),
                "hi": int(d.level_hi[k]),
            }
            self.alive.add(v)
        self.alive -= set(d.retired.tolist())
        self.edges |= {tuple(e) for e in d.edges_added.tolist()}


def _clusters(edges: set[tuple[int, int]], point_of: dict[int, int]) -> dict[int, frozenset]:
    """Node -> the points under it, through the given child -> parent edges."""
    kids = defaultdict(list)
    for c, p in edges:
        kids[p].append(c)
    memo: dict[int, frozenset] = {}

    def under(v: int) -> frozenset:
        if v not in memo:
            memo[v] = (
                frozenset([point_of[v]])
                if v in point_of
                else frozenset().union(*map(under, kids[v]))
            )
        return memo[v]

    return {v: under(v) for v in {*point_of, *kids}}


def _same_score(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-9


def _check(store: _DictStore, est: Any, point_of: dict[int, int]) -> None:
    h = est.hierarchy_
    assert all(c in store.alive and p in store.alive for c, p in store.edges), "edge to a dead node"
    stored = _clusters(store.edges, point_of)
    live = {v: s for v, s in stored.items() if v in store.alive}
    expected = _clusters({tuple(e) for e in h.edges.tolist()}, {i: i for i in range(h.n_points)})
    by_points = {s: v for v, s in expected.items()}
    assert sorted(map(sorted, live.values())) == sorted(map(sorted, expected.values()))
    sizes = h.sizes()
    for v, points in live.items():
        w = by_points[points]
        attrs = store.nodes[v]
        got = (attrs["size"], attrs["lo"], attrs["hi"])
        assert got == (int(sizes[w]), int(h.level_lo[w]), int(h.level_hi[w])), (v, w)
        assert _same_score(attrs["score"], float(h.score[w])), (v, attrs["score"], h.score[w])


@st.composite
def batches(draw: st.DrawFn) -> list[np.ndarray]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(1, 5))
    centers = rng.normal(size=(k, 4)) * draw(st.sampled_from([0.5, 2.0]))
    sizes = draw(st.lists(st.integers(1, 15), min_size=2, max_size=8))
    return [
        (centers[rng.integers(0, k, s)] + rng.normal(size=(s, 4))).astype(np.float32) for s in sizes
    ]


ESTIMATORS = {
    "grinch": lambda: Grinch(mode="grinch"),
    "rotate": lambda: Grinch(mode="rotate"),
    "greedy": lambda: Grinch(mode="greedy"),
    "grinch-capped": lambda: Grinch(mode="grinch", rotate_cap=2, graft_cap=2),
    "grinch-ancestors": lambda: Grinch(graft_from="ancestors", size_cap=None),
    "grinch-size-capped": lambda: Grinch(graft_from="ancestors", size_cap=4, restructure=False),
    "mbscc-paper": lambda: MBSCC(k=3, n_levels=8),
    "mbscc-exact": lambda: MBSCC(k=3, n_levels=8, marking="exact"),
    "mbscc-components": lambda: MBSCC(
        k=3, n_levels=8, tau_min=0.3, linkage="average", marking="components"
    ),
    "mbscc-components-mean": lambda: MBSCC(
        k=3, n_levels=8, tau_min=0.1, linkage="mean", marking="components"
    ),
}


@settings(max_examples=150, deadline=None)
@given(xs=batches(), name=st.sampled_from(sorted(ESTIMATORS)))
def test_replayed_deltas_equal_the_hierarchy(xs: list[np.ndarray], name: str) -> None:
    est = ESTIMATORS[name]()
    store = _DictStore()
    for X in xs:
        est.partial_fit(X)
        store.apply(est.delta_)
        if isinstance(est, Grinch):  # internal leaf id -> point index
            point_of = {leaf: i for i, leaf in enumerate(est._leaf_of)}
        else:  # MBSCC's stable ids: node_ids_[point index]
            point_of = {int(est.node_ids_[i]): i for i in range(est.hierarchy_.n_points)}
        _check(store, est, point_of)
