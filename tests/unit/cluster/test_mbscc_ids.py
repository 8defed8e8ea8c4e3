"""MBSCC's stable cluster ids across mini-batches: continuation instead of re-keying.

Oracle: the hierarchies themselves, read as point sets batch after batch.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC


def _sets(m: MBSCC) -> dict[int, frozenset[int]]:
    """Stable id -> the points (global arrival index) under that node."""
    M = m.hierarchy_.leaf_membership()
    return {
        int(m.node_ids_[v]): frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist())
        for v in range(m.hierarchy_.n_nodes)
    }


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_blobs=st.integers(1, 6),
    batches=st.lists(st.integers(1, 12), min_size=2, max_size=7),
    noise=st.floats(0.05, 1.0),
)
def test_ids_are_unique_never_reused_and_kept_by_unchanged_clusters(
    seed: int, n_blobs: int, batches: list[int], noise: float
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_blobs, 5))
    m = MBSCC(k=4)
    retired: set[int] = set()
    before: dict[int, frozenset[int]] = {}
    for size in batches:
        X = centres[rng.integers(0, n_blobs, size)] + noise * rng.normal(size=(size, 5))
        m.partial_fit(X.astype(np.float32))
        ids = m.node_ids_.tolist()
        assert len(set(ids)) == len(ids)  # one id per node
        now = _sets(m)
        assert not retired & now.keys()  # a retired id never comes back
        assert set(m.delta_.retired.tolist()) == before.keys() - now.keys()
        retired |= set(m.delta_.retired.tolist())
        by_set = {s: i for i, s in before.items()}
        for i, s in now.items():
            if s in by_set:  # the same point set as a node of the last batch: same id
                assert by_set[s] == i
        # a continued id keeps more than half of its old points
        for i in before.keys() & now.keys():
            assert 2 * len(before[i] & now[i]) > len(before[i])
        before = now


def test_a_cluster_that_gains_a_point_keeps_its_id() -> None:
    # three tight pairs far apart; a third point joins the first pair
    base = np.array(
        [[1, 0, 0], [0.99, 0.1, 0], [0, 1, 0], [0.1, 0.99, 0], [0, 0, 1], [0, 0.1, 0.99]]
    )
    m = MBSCC(k=3).partial_fit(base.astype(np.float32))
    first = {s: i for i, s in _sets(m).items()}
    pair = first[frozenset({0, 1})]
    m.partial_fit(np.array([[0.98, 0.05, 0.05]], np.float32))
    now = _sets(m)
    assert now[pair] == frozenset({0, 1, 6})  # same id, one more point
    assert pair not in m.delta_.retired.tolist()
    assert [tuple(e) for e in m.delta_.edges_retired.tolist()] == []  # nothing re-parented
