"""LLAMA in the pipeline: partial_fit re-runs over every point, with ids stable by point set.

Oracles: a fresh ``Llama.fit`` on the same points (the same DAG, as point sets) and the
replay of every delta (the final structure, in stable ids).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import Llama


def _families(h, ids=None):  # type: ignore[no-untyped-def]
    """Node -> point set, and the DAG's edges as (child set, parent set)."""
    M = h.leaf_membership()
    sets = [frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist()) for v in range(h.n_nodes)]
    edges = {(sets[c], sets[p]) for c, p in h.edges.tolist()}
    return set(sets), edges


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 15), min_size=1, max_size=5),
    p=st.integers(1, 4),
)
def test_partial_fit_equals_a_fit_on_all_points_and_deltas_replay(
    seed: int, batches: list[int], p: int
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 6))
    X = np.vstack(
        [centres[rng.integers(0, 4, b)] + 0.6 * rng.normal(size=(b, 6)) for b in batches]
    ).astype(np.float32)
    est = Llama(p=p, k=4)
    edges: set[tuple[int, int]] = set()
    alive: set[int] = set()
    kept: dict[frozenset[int], int] = {}
    start = 0
    for b in batches:
        est.partial_fit(X[start : start + b])
        start += b
        assert _families(est.hierarchy_) == _families(Llama(p=p, k=4).fit(X[:start]).hierarchy_)
        d = est.delta_
        edges = (edges - {tuple(e) for e in d.edges_retired.tolist()}) | {
            tuple(e) for e in d.edges_added.tolist()
        }
        alive = (alive | set(d.node_id.tolist())) - set(d.retired.tolist())
        ids = est.node_ids_
        assert edges == {(int(ids[c]), int(ids[q])) for c, q in est.hierarchy_.edges}
        assert alive == set(ids.tolist())
        M = est.hierarchy_.leaf_membership()
        for v in range(est.hierarchy_.n_nodes):  # a point set keeps its id
            key = frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist())
            assert kept.setdefault(key, int(ids[v])) == int(ids[v])
