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
