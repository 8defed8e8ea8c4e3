"""Mean linkage (the mean weight of the graph edges between two clusters, absent pairs
no evidence) against a brute-force mean over the original edges, after contractions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from er.cluster import MBSCC
from er.cluster._rounds import Agglomerator


def _graph(n: int, density: float, seed: int) -> sparse.csr_array:
    rng = np.random.default_rng(seed)
    A = np.triu(rng.random((n, n)) < density, 1)
    # weights in [-1, 1] without 0 (an absent pair): probabilities or cosines
    w = rng.uniform(-1.0, 1.0, (n, n)).round(3)
    W = np.where(A, np.where(w == 0, 0.5, w), 0.0)
    W = W + W.T
    return sparse.csr_array(W)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 14),
    density=st.floats(0.1, 1.0),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_mean_linkage_is_the_mean_of_the_original_edges(
    n: int, density: float, seed: int, data: st.DataObject
) -> None:
    W = _graph(n, density, seed)
    agg = Agglomerator(W, "mean")
    orig = W.toarray()
    present = np.zeros_like(orig, bool)
    present[W.nonzero()] = True
    members = [[i] for i in range(n)]
    for _ in range(data.draw(st.integers(1, 3))):  # several contractions: levels
        m = agg.n_clusters
        if m < 2:
            break
        label = np.array(data.draw(st.lists(st.integers(0, m - 1), min_size=m, max_size=m)))
        label = np.unique(label, return_inverse=True)[1].reshape(-1)
        k = int(label.max()) + 1
        agg._contract(label.astype(np.int64), k, agg._n_nodes + np.arange(k))
        grouped: list[list[int]] = [[] for _ in range(k)]
        for old, new in enumerate(label):
            grouped[new] += members[old]
        # _contract orders new clusters by node id: the same order as label here
        members = grouped
        values = agg.link_values()
        rows = np.repeat(np.arange(agg.n_clusters), np.diff(agg.W.indptr))
        for a, b, v in zip(rows, agg.W.indices, values, strict=True):
            block = present[np.ix_(members[a], members[b])]
            assert block.any()
            assert v == pytest.approx(orig[np.ix_(members[a], members[b])][block].mean(), abs=1e-6)


def test_mbscc_mean_forms_an_entity_larger_than_its_neighbour_lists() -> None:
    # 30 records of one entity, each listing only 5 neighbours, all at probability 0.9:
    # sparse average linkage needs most of the 30 x 30 pairs; mean linkage does not.
    rng = np.random.default_rng(0)
    n, k = 30, 5
    X = rng.normal(size=(n, 8)).astype(np.float32)
    idx = np.array([[(i + d) % n for d in range(1, k + 1)] for i in range(n)])
    sim = np.full((n, k), 0.9, np.float32)
    idx[0] = -1  # the first point has no neighbours of its own: others list it
    for linkage, entities in (("mean", 1), ("average", None)):
        est = MBSCC(k=k, linkage=linkage).partial_fit(X, neighbors=(idx, sim))
        from er.evaluation import cut_at_score

        found = np.unique(cut_at_score(est.hierarchy_, 0.5)).size
        if entities is None:
            assert found > 1
        else:
            assert found == entities


def test_mean_linkage_clips_weights_to_the_cosine_range() -> None:
    # a rounded cosine of a duplicate (1 + 1e-7) and any weight outside [-1, 1]
    W = sparse.csr_array(np.array([[0, 1.5, -3.0], [1.5, 0, 1 + 1e-7], [-3.0, 1 + 1e-7, 0]]))
    values = Agglomerator(W, "mean").link_values()
    assert sorted(values.tolist()) == pytest.approx([-1, -1, 1, 1, 1, 1])
