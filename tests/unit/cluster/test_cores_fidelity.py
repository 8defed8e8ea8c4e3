"""Cores against the authors' reference code and the papers' definitions.

LLAMA reaches one cluster on a connected graph, and its quality on digits is measured
against the authors' C++ LLAMA (graphgrove, exact average linkage, p = 5). SCC's
first threshold is the graph's largest linkage.

Before the Eq. 5.2 / 5.5 fix, a kept pair (C, C') with C inside C' was skipped and
came back every round: digits stopped at 21 clusters under a score-0 root (Jacc/pt
0.763 against the reference's 0.892).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from er.cluster import Llama, knn_graph, normalize_rows
from er.evaluation import jaccard_metrics

REFERENCE_DIGITS_JACC_PT = 0.892  # graphgrove LLAMA, exact average linkage, p = 5


@st.composite
def connected_graphs(draw: st.DrawFn) -> sparse.csr_array:
    """A connected weighted graph: the k-NN graph of random points (where overlapping
    clusters and nested kept pairs arise), joined by a light random spanning path.

    Weights are (1 + cosine) / 2 > 0, so every real merge has a positive linkage.
    """
    n = draw(st.integers(2, 150))
    k = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, draw(st.integers(2, 6))))
    W = knn_graph(normalize_rows(X), min(k, n - 1), normalized=True)
    W = sparse.coo_array(W)
    order = rng.permutation(n)
    rows = np.r_[W.row, order[:-1]]
    cols = np.r_[W.col, order[1:]]
    w = np.r_[(1.0 + W.data) / 2, np.full(n - 1, 1e-3)]
    G = sparse.coo_array((w, (rows, cols)), shape=(n, n)).tocsr()
    G = sparse.csr_array(G.maximum(G.T))
    G.setdiag(0)
    G.eliminate_zeros()
    return G


@settings(max_examples=150, deadline=None)
@given(W=connected_graphs(), p=st.integers(1, 5))
def test_reaches_one_cluster_on_any_connected_graph(W: sparse.csr_array, p: int) -> None:
    n = W.shape[0]
    assert connected_components(W, directed=False)[0] == 1
    h = Llama(p=p).fit(graph=W).hierarchy_
    sizes = h.sizes()
    full = np.flatnonzero(sizes == n)
    assert len(h.roots()) == 1
    # A real merge formed the whole set: positive linkage, not the padding root that
    # joins whatever is left when rounds stop early.
    assert full.size >= 1 and np.all(h.score[full] > 0), h.score[full]


def test_digits_quality_against_the_reference() -> None:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    h = Llama(p=5, k=10).fit(X.astype(np.float32)).hierarchy_
    jacc_pt = jaccard_metrics(h, y)["jacc_pt"]
    # measured 0.9077 here; the authors' C++ LLAMA reaches 0.892 on the same data
    assert jacc_pt >= REFERENCE_DIGITS_JACC_PT - 0.002
    assert jacc_pt == pytest.approx(0.9077, abs=0.005)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 80))
def test_scc_first_threshold_is_the_largest_linkage(seed: int, n: int) -> None:
    from er.cluster import SCC

    X = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    W = knn_graph(normalize_rows(X), 4, normalized=True)
    est = SCC(k=4, linkage="average", schedule="geometric", n_levels=30).fit(X)
    assert est.thresholds_[0] == pytest.approx(float(W.max()), rel=1e-6)
    # and the first level merges: at least the best pair is joined at level 1
    assert np.unique(est.hierarchy_.cut(1)).size < n
