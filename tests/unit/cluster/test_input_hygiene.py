"""Inputs the cores must not silently change (issue: bad input, core side).

Cosine similarity is scale-free, so rows scaled by 1e20 or 1e-25 must cluster exactly
like the unscaled rows (before: float32 norms overflowed or underflowed, the rows
became zero vectors and DP fell from 1.0 to 0.2). Duplicate graph entries keep the
larger similarity, as ``as_graph``'s docstring says (before: they were summed).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from er.cluster import SCC, as_graph, normalize_rows
from er.exceptions import ConfigError


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-30, 1e-25, 1e20, 1e30]))
def test_scaled_rows_cluster_like_unscaled(seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 6))
    U = normalize_rows(X)
    assert np.allclose(np.linalg.norm(normalize_rows(X * scale), axis=1), 1.0, atol=1e-6)
    assert np.allclose(normalize_rows(X * scale), U, atol=1e-6)
    a = SCC(k=5).fit(X.astype(np.float32)).hierarchy_
    b = SCC(k=5).fit(X * scale).hierarchy_
    assert np.array_equal(a.edges, b.edges)


def test_zero_rows_stay_zero() -> None:
    assert np.array_equal(normalize_rows(np.zeros((2, 3))), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("as_sparse", [False, True])
def test_duplicate_edges_keep_the_larger(as_sparse: bool) -> None:
    row, col = np.array([0, 0, 1, 2]), np.array([1, 1, 0, 0])
    sim = np.array([0.2, 0.7, 0.4, 0.5])
    edges = sparse.coo_array((sim, (row, col)), shape=(3, 3)) if as_sparse else (row, col, sim)
    G = as_graph(edges, None if as_sparse else 3)
    assert G[0, 1] == pytest.approx(0.7) and G[1, 0] == pytest.approx(0.7)
    assert G[0, 2] == pytest.approx(0.5) and G[2, 0] == pytest.approx(0.5)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 30),
    k=st.integers(1, 8),
    missing=st.floats(0.0, 0.6),
)
def test_knn_lists_graph_keeps_the_larger_of_each_pair_like_as_graph(
    seed: int, n: int, k: int, missing: float
) -> None:
    """k-NN lists (distinct neighbours, -1 for none, zero and negative values, values
    that differ between (i, j) and (j, i)) -> the symmetric graph: a dense loop oracle
    keeps the larger of the two directions, and as_graph of the same triples agrees."""
    from er.cluster._graph import knn_lists_graph

    rng = np.random.default_rng(seed)
    k = min(k, max(n - 1, 1))
    idx = np.full((n, k), -1, np.int64)
    sim = np.full((n, k), -np.inf, np.float32)
    for i in range(n):
        others = rng.permutation(np.delete(np.arange(n), i))[:k]
        idx[i, : others.size] = others
        sim[i, : others.size] = rng.integers(-2, 5, others.size) / 4  # ties, 0, < 0
    idx[rng.random((n, k)) < missing] = -1
    stored = np.zeros((n, n), bool)
    want = np.full((n, n), -np.inf)
    for i in range(n):
        for j, s in zip(idx[i], sim[i], strict=True):
            if j >= 0:
                for a, b in ((i, j), (j, i)):
                    stored[a, b] = True
                    want[a, b] = max(want[a, b], s)
    got = knn_lists_graph(idx, sim)
    ok = idx >= 0
    rows = np.repeat(np.arange(n), k).reshape(n, k)[ok]
    ref = as_graph((rows, idx[ok], sim[ok]), n, distinct=True)
    for G in (got, ref):
        assert G.has_sorted_indices
        dense_stored = np.zeros((n, n), bool)
        dense_stored[np.repeat(np.arange(n), np.diff(G.indptr)), G.indices] = True
        np.testing.assert_array_equal(dense_stored, stored)  # zeros kept as entries
        np.testing.assert_array_equal(G.toarray()[stored], want[stored].astype(np.float32))
    np.testing.assert_array_equal(got.indptr, ref.indptr)
    np.testing.assert_array_equal(got.indices, ref.indices)
    np.testing.assert_array_equal(got.data, ref.data)


def test_knn_lists_graph_refuses_a_row_naming_one_neighbour_twice() -> None:
    """scipy would add the two entries (0.5 + 0.5 = 1.0) where as_graph keeps 0.5."""
    from er.cluster._graph import knn_lists_graph

    idx = np.array([[1, -1, 2], [0, -1, -1], [1, 0, 1]], np.int64)
    sim = np.array([[0.5, -np.inf, 0.3], [0.5, -np.inf, -np.inf], [0.5, 0.3, 0.5]], np.float32)
    with pytest.raises(ConfigError, match="row 2 names one neighbour twice"):
        knn_lists_graph(idx, sim)
    idx[2, 2] = -1  # the same lists without the repeat
    assert knn_lists_graph(idx, sim)[2, 1] == pytest.approx(0.5)
