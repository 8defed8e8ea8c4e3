"""GRINCH's helpers outside the tree: nearest-leaf search, paths and row norms."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.cluster._graph import normalize_rows
from er.exceptions import ConfigError


def _path_of_sibling(z: int, above_l: NDArray[np.int64]) -> NDArray[np.int64]:
    """z and its ancestors below the graft's LCA, once z took the place of l's parent.

    ``above_l``: l's ancestors below the LCA before the graft, nearest first. If l's
    parent was the LCA itself, the graft retired it and put z above l: no path.
    """
    if above_l.size == 0:
        return above_l
    return np.concatenate((np.asarray([z], np.int64), above_l[1:]))


def _unit_rows(X: Any) -> Any:
    """Unit-length rows; sparse input stays sparse (CSR), dense becomes float64."""
    if sparse.issparse(X):
        X = sparse.csr_array(X, dtype=np.float64)
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        return sparse.csr_array(sparse.diags_array(inv) @ X)
    X = np.asarray(X)
    if X.ndim != 2:
        raise ConfigError(f"X must be 2-d (n, d). Got shape {X.shape}.")
    return normalize_rows(X).astype(np.float64)


def _dense(a: Any) -> NDArray[np.float64]:
    """A product of dense or sparse operands as a dense float64 array."""
    return np.asarray(a.toarray() if sparse.issparse(a) else a, np.float64)


def _search(
    points: Any, rows: Any, k: int, block: int = 8192
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Exact k most similar points to each row, in column blocks.

    Parameters
    ----------
    points : ndarray or sparse matrix, shape (n, d)
        Unit rows.
    rows : ndarray or sparse matrix, shape (b, d)
    k : int
    block : int
        Points per matrix product, to bound memory at (b, block).

    Returns
    -------
    sim : ndarray of float64, shape (b, k)
        Cosines, best first, -inf padded when n < k.
    idx : ndarray of int64, shape (b, k)
        Point indices (ties: lower index), -1 padded.
    """
    b = rows.shape[0]
    sim, idx = np.full((b, 0), -np.inf), np.full((b, 0), -1, np.int64)
    for lo in range(0, points.shape[0], block):
        part = _dense(rows @ points[lo : lo + block].T)
        ids = np.broadcast_to(np.arange(lo, lo + part.shape[1]), part.shape)
        sim, idx = _top_k(np.hstack([sim, part]), np.hstack([idx, ids]), k)
    return sim, idx


def _top_k(
    sim: NDArray[np.float64], idx: NDArray[np.int64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each row's k best entries by (highest sim, lowest idx), in that order.

    Exact under ties, so the top k of a union is the top k of the parts' top k:
    blocked and one-shot searches agree.

    Parameters
    ----------
    sim : ndarray of float64, shape (b, m)
        -inf marks an empty entry.
    idx : ndarray of int64, shape (b, m)

    Returns
    -------
    sim, idx : ndarrays of shape (b, min(k, m)); empty entries get idx -1.
    """
    b, m = sim.shape
    if m > k:
        kth = -np.partition(-sim, k - 1, axis=1)[:, k - 1 : k]
        keep = sim >= kth  # at least k per row; more only under ties
        exact = keep.sum(axis=1) == k
        rows = np.flatnonzero(exact)
        out_s, out_i = np.empty((b, k)), np.empty((b, k), np.int64)
        out_s[rows] = sim[rows][keep[rows]].reshape(-1, k)
        out_i[rows] = idx[rows][keep[rows]].reshape(-1, k)
        for r in np.flatnonzero(~exact):  # ties at the k-th value: lowest idx wins
            order = np.lexsort((idx[r], -sim[r]))[:k]
            out_s[r], out_i[r] = sim[r, order], idx[r, order]
        sim, idx = out_s, out_i
    order = np.lexsort((idx, -sim), axis=1)
    sim, idx = np.take_along_axis(sim, order, 1), np.take_along_axis(idx, order, 1)
    return sim, np.where(np.isneginf(sim), -1, idx)
