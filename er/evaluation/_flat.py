"""Flat clustering metrics, all built on one sparse contingency matrix.

Coreference metrics follow their standard definitions: pairwise (dissertation
Eq. 2.1-2.3), B-cubed (Bagga & Baldwin 1998), MUC (Vilain et al. 1995), CEAF-e
(Luo 2005) and CoNLL F1 (their mean F1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

__all__ = [
    "bcubed",
    "ceaf_e",
    "conll_f1",
    "contingency_matrix",
    "muc",
    "pairwise_prf",
]

PRF = tuple[float, float, float]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _codes(labels: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-d. Got shape {arr.shape}.")
    return np.unique(arr, return_inverse=True)[1].astype(np.int64)


def contingency_matrix(gold: ArrayLike, pred: ArrayLike) -> sparse.csr_array:
    """(n_gold_clusters, n_pred_clusters) counts of points in both.

    Parameters
    ----------
    gold, pred : array-like of shape (n,)
        Cluster labels of the same points (any hashable, sortable values).
    """
    g, p = _codes(gold), _codes(pred)
    if g.shape != p.shape:
        raise ValueError(f"gold and pred must label the same points: {g.shape} vs {p.shape}.")
    C = sparse.csr_array(
        (np.ones(g.size, np.int64), (g, p)), shape=(g.max(initial=-1) + 1, p.max(initial=-1) + 1)
    )
    C.sum_duplicates()
    return C


def _pairs(x: NDArray[np.int64]) -> float:
    """Number of unordered pairs within groups of the given sizes (float: no overflow)."""
    x = np.asarray(x, np.float64)
    return float((x * (x - 1)).sum() / 2)


def pairwise_prf(gold: ArrayLike, pred: ArrayLike) -> PRF:
    """Pairwise precision, recall, F1 over pairs of co-clustered points (Eq. 2.1-2.3).

    Precision (recall) is 1.0 when the prediction (gold) has no pair at all.
    """
    C = contingency_matrix(gold, pred)
    tp = _pairs(C.data)
    pred_pairs = _pairs(np.asarray(C.sum(axis=0)).ravel())
    gold_pairs = _pairs(np.asarray(C.sum(axis=1)).ravel())
    p = tp / pred_pairs if pred_pairs else 1.0
    r = tp / gold_pairs if gold_pairs else 1.0
    return p, r, _f1(p, r)


def bcubed(gold: ArrayLike, pred: ArrayLike) -> PRF:
    """B-cubed precision, recall, F1 (mean over points)."""
    C = contingency_matrix(gold, pred).tocoo()
    n = C.data.sum()
    gold_size = np.asarray(C.sum(axis=1)).ravel()[C.row]
    pred_size = np.asarray(C.sum(axis=0)).ravel()[C.col]
    sq = C.data.astype(np.float64) ** 2
    p = float((sq / pred_size).sum() / n)
    r = float((sq / gold_size).sum() / n)
    return p, r, _f1(p, r)


def _muc_side(C: sparse.csr_array) -> float:
    # For each key cluster k: |k| - |partition of k by the response|, over sum (|k| - 1).
    sizes = np.asarray(C.sum(axis=1)).ravel()
    parts = np.diff(C.indptr)
    denom = (sizes - 1).sum()
    return float((sizes - parts).sum() / denom) if denom else 0.0


def muc(gold: ArrayLike, pred: ArrayLike) -> PRF:
    """MUC link-based precision, recall, F1."""
    C = contingency_matrix(gold, pred)
    r = _muc_side(C)
    p = _muc_side(sparse.csr_array(C.T))
    return p, r, _f1(p, r)


def ceaf_e(gold: ArrayLike, pred: ArrayLike) -> PRF:
    """Entity-based CEAF: best one-to-one alignment under phi_4 = 2|K∩R| / (|K|+|R|).

    Memory and time follow the non-zero cells of the contingency table, never the
    (n_gold, n_pred) product: only overlapping clusters can be aligned with a
    positive score, so the alignment is a maximum-weight matching on the sparse
    overlap graph (:func:`_max_weight_matching`).
    """
    C = contingency_matrix(gold, pred).tocoo()
    gs = np.asarray(C.sum(axis=1)).ravel()
    ps = np.asarray(C.sum(axis=0)).ravel()
    phi = sparse.coo_array((2.0 * C.data / (gs[C.row] + ps[C.col]), (C.row, C.col)), shape=C.shape)
    sim = _max_weight_matching(phi)
    p = sim / len(ps) if len(ps) else 0.0
    r = sim / len(gs) if len(gs) else 0.0
    return p, r, _f1(p, r)


def _max_weight_matching(w: sparse.coo_array) -> float:
    """Total weight of a maximum-weight matching (not necessarily full) of a sparse
    bipartite graph with positive weights ``w`` of shape (m, n).

    Rows and columns that share an edge with nothing else match each other at once;
    what is left goes to scipy's sparse Jonker-Volgenant (LAPJVsp), which only finds
    *full* matchings. Each row i gets a private stand-in column and each column j a
    private stand-in row, and stand-in row j meets stand-in column i wherever (i, j)
    is an edge, so a full matching always exists and every partial matching of the
    real edges extends to one. Every stand-in edge weighs 1 and every real edge
    1 + w: a full matching with k real edges then weighs sum(w) + (m + n), whatever
    k is, so its maximum is the maximum-weight matching of ``w``.
    """
    if w.nnz == 0:
        return 0.0
    rows, cols, data = w.row, w.col, w.data
    lone = (np.bincount(rows, minlength=w.shape[0])[rows] == 1) & (
        np.bincount(cols, minlength=w.shape[1])[cols] == 1
    )
    total = float(data[lone].sum())
    rows, cols, data = rows[~lone], cols[~lone], data[~lone]
    if data.size == 0:
        return total
    r_ids, r = np.unique(rows, return_inverse=True)
    c_ids, c = np.unique(cols, return_inverse=True)
    m, n = r_ids.size, c_ids.size
    ones = np.ones
    aug = sparse.coo_array(
        (
            np.r_[1.0 + data, ones(m), ones(n), ones(data.size)],
            (
                np.r_[r, np.arange(m), m + np.arange(n), m + c],
                np.r_[c, n + np.arange(m), np.arange(n), n + r],
            ),
        ),
        shape=(m + n, n + m),
    ).tocsr()
    row_ind, col_ind = min_weight_full_bipartite_matching(aug, maximize=True)
    real = (row_ind < m) & (col_ind < n)
    picked = sparse.csr_array((data, (r, c)), shape=(m, n))[row_ind[real], col_ind[real]]
    return total + float(np.asarray(picked).sum())


def conll_f1(gold: ArrayLike, pred: ArrayLike) -> float:
    """Mean of MUC, B-cubed and CEAF-e F1."""
    return float(np.mean([muc(gold, pred)[2], bcubed(gold, pred)[2], ceaf_e(gold, pred)[2]]))
