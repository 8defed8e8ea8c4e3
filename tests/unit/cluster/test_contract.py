"""Graph contraction (one SCC round's relabelling) against a dense numpy oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from er.cluster._contract import _contract_graph


@st.composite
def graphs(draw):
    """A symmetric sparse graph with some exact zeros or negatives (or none), and a
    labelling of its rows onto fewer clusters."""
    n = draw(st.integers(2, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = np.triu(rng.random((n, n)) < draw(st.floats(0.05, 0.9)), 1)
    values = rng.integers(1, 5, (n, n)).astype(np.float64) / 4  # ties and exact sums
    kind = draw(st.sampled_from(["positive", "zeros", "negatives"]))
    if kind == "zeros":
        values[rng.random((n, n)) < 0.3] = 0.0
    elif kind == "negatives":
        values[rng.random((n, n)) < 0.3] *= -1  # sums that cancel to exactly 0
    A = np.where(dense, values, 0.0)
    pattern = dense | dense.T
    A = A + A.T
    n_comp = draw(st.integers(1, n))
    lab = np.concatenate([np.arange(n_comp), rng.integers(0, n_comp, n - n_comp)])
    lab = rng.permutation(lab)
    rows, cols = np.nonzero(pattern)
    W = sparse.csr_array((A[rows, cols], (rows, cols)), shape=(n, n))
    return W, pattern, A, lab.astype(np.int64), n_comp


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_contraction_sums_each_pair_of_clusters_and_keeps_every_connected_pair(case) -> None:
    """Entry (a, b) = sum of W over rows in a and columns in b, a != b; stored exactly
    where some edge joins a and b, even when its sum is 0 (a stored 0 is still a
    candidate neighbour for the linkages)."""
    W, pattern, A, lab, n_comp = case
    P = np.zeros((lab.size, n_comp))
    P[np.arange(lab.size), lab] = 1
    want = P.T @ A @ P
    joined = (P.T @ pattern.astype(float) @ P) > 0
    np.fill_diagonal(want, 0)
    np.fill_diagonal(joined, False)
    got = _contract_graph(W, lab, n_comp, use_max=False)
    stored = np.zeros((n_comp, n_comp), bool)
    r = np.repeat(np.arange(n_comp), np.diff(got.indptr))
    stored[r, got.indices] = True
    assert got.nnz == int(stored.sum())  # no pair stored twice
    np.testing.assert_array_equal(stored, joined)
    np.testing.assert_allclose(got.toarray(), want, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_scipy_kernel_path_equals_the_public_product(case) -> None:
    """Positive graphs contract through scipy's kernel with a bounded output
    (_product_bounded); the public ``@`` it stands in for gives the same entries."""
    from er.cluster import _contract

    W, _, _, lab, n_comp = case
    if not (W.nnz and W.data.min() > 0):
        return
    assert _contract._csr_matmat is not None  # this scipy has the kernel: the fast path runs
    fast = _contract_graph(W, lab, n_comp, use_max=False)
    kernel, _contract._csr_matmat = _contract._csr_matmat, None
    try:
        public = _contract_graph(W, lab, n_comp, use_max=False)
    finally:
        _contract._csr_matmat = kernel
    fast.sort_indices()
    public.sort_indices()
    np.testing.assert_array_equal(fast.indptr, public.indptr)
    np.testing.assert_array_equal(fast.indices, public.indices)
    np.testing.assert_array_equal(fast.data, public.data)


@settings(max_examples=150, deadline=None)
@given(graphs(), st.sampled_from(["average", "single"]))
def test_rounds_that_trust_the_graphs_sign_equal_rounds_that_look(case, linkage) -> None:
    """The round engine decides once whether every entry is > 0 and passes that to
    each contraction; contractions that look at every graph again store the same
    entries round after round, also on graphs with stored zeros and negative entries
    (a stored 0 stays a candidate neighbour)."""
    from er.cluster import _rounds

    W = case[0]
    real = _rounds._contract_graph

    def looking(W, lab, n_comp, use_max, positive=None):  # type: ignore[no-untyped-def]
        return real(W, lab, n_comp, use_max)

    def every_other(nn, best):  # type: ignore[no-untyped-def]
        return np.arange(nn.size) % 2 == 0  # half the clusters join their neighbour

    trusting = _rounds.Agglomerator(W, linkage)
    _rounds._contract_graph = looking
    try:
        oracle = _rounds.Agglomerator(W, linkage)
        for _ in range(3):
            oracle.merge(every_other)
            _rounds._contract_graph = real
            trusting.merge(every_other)
            _rounds._contract_graph = looking
            a, b = trusting.W.copy(), oracle.W.copy()
            a.sort_indices()
            b.sort_indices()
            np.testing.assert_array_equal(a.indptr, b.indptr)
            np.testing.assert_array_equal(a.indices, b.indices)
            np.testing.assert_allclose(a.data, b.data, atol=1e-12)
    finally:
        _rounds._contract_graph = real
