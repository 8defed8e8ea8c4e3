"""Graph contraction: the relabelling at the end of each agglomeration round.

A round's merges map the current clusters onto fewer (``lab``: old -> new); the graph
between clusters is the old one with rows and columns relabelled, self-loops dropped
and repeated entries summed (the maximum kept for single linkage). Split from
``er.cluster._rounds``, which decides the merges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse


def _matmat_kernel() -> Callable[..., None] | None:
    """scipy's CSR product kernel, which ``@`` calls after a counting pass
    (:func:`_product_bounded`), if this scipy has it and it behaves as relied on:
    the expected signature, and sums that come to 0 left out. Otherwise None, and
    contraction goes through the public ``@``."""
    try:
        from scipy.sparse._sparsetools import csr_matmat
    except ImportError:  # pragma: no cover - a scipy that moved it
        return None
    ptr, col = np.array([0, 1], np.int32), np.zeros(1, np.int32)
    try:
        for value, stored in ((3.0, [0, 1]), (0.0, [0, 0])):  # [[1]] @ [[value]]
            out_ptr, out_cols, out_data = np.empty(2, np.int32), np.empty(1, np.int32), np.empty(1)
            csr_matmat(1, 1, ptr, col, np.ones(1), ptr, col, np.full(1, value),
                       out_ptr, out_cols, out_data)  # fmt: skip
            if out_ptr.tolist() != stored or (value and out_data[0] != value):
                return None  # pragma: no cover - a kernel that changed
    except Exception:  # pragma: no cover - a changed signature
        return None
    kernel: Callable[..., None] = csr_matmat
    return kernel


_csr_matmat = _matmat_kernel()


def _contract_graph(
    W: sparse.csr_array,
    lab: NDArray[np.int64],
    n_comp: int,
    use_max: bool,
    positive: bool | None = None,
) -> sparse.csr_array:
    """W with rows and columns relabelled by ``lab`` (old -> new cluster), self-loops
    dropped, repeated entries summed (the maximum kept for single linkage).

    ``positive``: whether every entry of W is > 0, if the caller knows (sums and
    maxima of positive entries stay positive, so it holds for every contraction of
    a positive graph); None: look.

    (Copying untouched rows and sorting only the merged ones was tried: more passes
    over the entries in numpy than scipy's one conversion, 1.2-2x slower at 20k; so
    was keeping the entries no merge touches and summing only the others, 1.15x
    slower at 100k, where 20-30% of the entries touch a merged cluster per round.)
    """
    if n_comp < np.iinfo(np.int32).max:
        lab = lab.astype(np.int32)  # scipy's own index type: no conversions below
    if positive is None:
        positive = _all_positive(W)
    if not use_max and W.nnz and positive:
        return _contract_positive(W, lab, n_comp)
    r = np.repeat(lab, np.diff(W.indptr))
    c = lab[W.indices]
    off = np.flatnonzero(r != c)
    r, c, v = r[off], c[off], W.data[off]
    if use_max:
        key = r.astype(np.int64) * n_comp + c
        order = np.lexsort((-v, key))
        key, v = key[order], v[order]
        first = np.r_[True, key[1:] != key[:-1]][: key.size]
        r, c, v = key[first] // n_comp, key[first] % n_comp, v[first]
    W2 = sparse.csr_array((v, (r, c)), shape=(n_comp, n_comp))
    W2.sum_duplicates()
    return W2


def _all_positive(W: sparse.csr_array) -> bool:
    """Whether every stored entry of W is > 0 (true of an empty W)."""
    return bool(W.nnz == 0 or W.data.min() > 0)


def _contract_positive(
    W: sparse.csr_array, lab: NDArray[np.integer], n_comp: int
) -> sparse.csr_array:
    """:func:`_contract_graph` for a graph whose entries are all > 0, as one sparse
    product: (clusters x old rows) indicator @ W with its columns relabelled.

    The product adds repeated entries in a dense accumulator per row instead of
    sorting each row, and keeps only sums that are not 0. Edges inside a new cluster
    are set to 0 first, so the product leaves the self-loops out; sums of positive
    entries cannot come to 0 otherwise (with a zero or negative entry the caller
    sums by sorting: a stored 0 is still a candidate neighbour).
    """
    m = lab.shape[0]
    cols = lab[W.indices]
    data = np.where(np.repeat(lab, np.diff(W.indptr)) == cols, 0.0, W.data)
    members = np.argsort(lab, kind="stable").astype(lab.dtype)  # old rows, by cluster
    indptr = np.zeros(n_comp + 1, lab.dtype)
    np.cumsum(np.bincount(lab, minlength=n_comp), out=indptr[1:])
    if _csr_matmat is not None and W.nnz < np.iinfo(lab.dtype).max:
        ptr = W.indptr.astype(lab.dtype, copy=False)  # the kernel takes one index type
        return _product_bounded(indptr, members, ptr, cols, data, n_comp)
    relabelled = sparse.csr_array((data, cols, W.indptr), shape=(m, n_comp))
    gather = sparse.csr_array((np.ones(m), members, indptr), shape=(n_comp, m))
    C = sparse.csr_array(gather @ relabelled)
    C.eliminate_zeros()  # the zeroed self-loops, should a product keep zero sums
    return C


def _product_bounded(
    gather_ptr: NDArray[np.integer[Any]],
    members: NDArray[np.integer[Any]],
    ptr: NDArray[np.integer[Any]],
    cols: NDArray[np.integer[Any]],
    data: NDArray[np.float64],
    n_comp: int,
) -> sparse.csr_array:
    """The indicator product of :func:`_contract_positive` in scipy's own kernel.

    Each output entry comes from at least one input entry, so the input's size bounds
    the output's: the kernel runs once into arrays of that size, without the counting
    pass and the format checks of ``@`` (one 100k MBSCC batch's 29 contractions, the
    self-loops zeroed either way: 0.46 s through ``@``, 0.20 s here).

    Parameters
    ----------
    gather_ptr : ndarray, shape (n_comp + 1,)
        Row pointers of the (clusters x old rows) indicator.
    members : ndarray, shape (m,)
        Its column indices: old rows, by cluster.
    ptr : ndarray, shape (m + 1,)
    cols, data : ndarray, shape (e,)
        The graph with relabelled columns and zeroed self-loops; every index array
        shares one integer type.
    n_comp : int

    Returns
    -------
    csr_array of float64, shape (n_comp, n_comp)
    """
    assert _csr_matmat is not None  # _contract_positive checks
    dtype = ptr.dtype
    out_ptr = np.empty(n_comp + 1, dtype)
    out_cols = np.empty(cols.shape[0], dtype)
    out_data = np.empty(cols.shape[0])
    _csr_matmat(
        n_comp, n_comp, gather_ptr, members, np.ones(members.shape[0]),
        ptr, cols, data, out_ptr, out_cols, out_data,
    )  # fmt: skip
    e = int(out_ptr[-1])
    return sparse.csr_array((out_data[:e], out_cols[:e], out_ptr), shape=(n_comp, n_comp))
