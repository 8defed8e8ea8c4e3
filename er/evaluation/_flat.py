"""Flat clustering metrics, all built on one sparse contingency matrix.

Coreference metrics follow their standard definitions: pairwise (dissertation
Eq. 2.1-2.3), B-cubed (Bagga & Baldwin 1998), MUC (Vilain et al. 1995), CEAF-e
(Luo 2005) and CoNLL F1 (their mean F1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.optimize import linear_sum_assignment

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
    """Entity-based CEAF: best one-to-one alignment under phi_4 = 2|K∩R| / (|K|+|R|)."""
    C = contingency_matrix(gold, pred).tocoo()
    gs = np.asarray(C.sum(axis=1)).ravel()
    ps = np.asarray(C.sum(axis=0)).ravel()
    phi = sparse.csr_array((2.0 * C.data / (gs[C.row] + ps[C.col]), (C.row, C.col)), shape=C.shape)
    # Only overlapping clusters can score: align within the non-zero pattern.
    rows, cols = linear_sum_assignment(phi.toarray(), maximize=True)
    sim = float(phi.toarray()[rows, cols].sum())
    p, r = sim / len(ps), sim / len(gs)
    return p, r, _f1(p, r)


def conll_f1(gold: ArrayLike, pred: ArrayLike) -> float:
    """Mean of MUC, B-cubed and CEAF-e F1."""
    return float(np.mean([muc(gold, pred)[2], bcubed(gold, pred)[2], ceaf_e(gold, pred)[2]]))
