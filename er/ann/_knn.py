"""k-NN lists and graphs from an index, in the forms the clustering cores take."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.ann._index import NeighborIndex, _check_k, check_rows, exact_search, make_index
from er.cluster import normalize_rows
from er.cluster._graph import best_per_row, knn_lists_graph
from er.exceptions import ConfigError

__all__ = ["batch_neighbors", "index_knn_graph", "neighbors_before_add"]


def drop_self(
    ids: NDArray[np.int64], idx: NDArray[np.int64], sim: NDArray[np.float32]
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Remove each row's own id from its (b, k + 1) list; (b, k) remain.

    A row whose own id is missing (more than k points at least as similar, e.g.
    duplicates with lower ids) loses its last entry instead: either way the rest is
    the top k of the other points.
    """
    keep = idx != ids[:, None]
    keep[keep.all(axis=1), -1] = False
    b, width = idx.shape
    return idx[keep].reshape(b, width - 1), sim[keep].reshape(b, width - 1)


def batch_neighbors(
    index: NeighborIndex, rows: NDArray[np.float32], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Add a mini-batch to the index; return its k-NN among all points (itself excluded).

    Parameters
    ----------
    index : NeighborIndex
    rows : ndarray of float32, shape (b, d)
        Unit rows; they get ids ``len(index)`` .. ``len(index) + b - 1``.
    k : int

    Returns
    -------
    idx : ndarray of int64, shape (b, k)
        Global ids (old points and the batch's own), -1 padded; the form
        ``MBSCC.partial_fit(X, neighbors=(idx, sim))`` takes.
    sim : ndarray of float32, shape (b, k)
    """
    ids = index.add(rows)
    idx, sim = index.query(rows, k + 1)
    return drop_self(ids, idx, sim)


def neighbors_before_add(
    index: NeighborIndex, rows: NDArray[np.float32], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """The k-NN :func:`batch_neighbors` returns, found before the batch enters the index.

    The index is searched for the batch's neighbours among the points already in it,
    and the batch's own rows are compared with each other exactly; the best k of both
    (ties to the lower id, as the index orders them) are the answer. With an exact
    index that is :func:`batch_neighbors`'s answer; with an approximate one, the
    batch's own pairs are exact instead of searched. The caller adds the rows once it
    is done with the result, which lets the insert run beside the clustering step
    that reads it (hnswlib releases the GIL while it inserts).

    Parameters
    ----------
    index : NeighborIndex
        Holds the points before this batch; left unchanged.
    rows : ndarray of float32, shape (b, d)
        Unit rows; they will get ids ``len(index)`` .. ``len(index) + b - 1``.
    k : int

    Returns
    -------
    idx : ndarray of int64, shape (b, k)
        Global ids, -1 padded.
    sim : ndarray of float32, shape (b, k)
        Their cosines, -inf padded.
    """
    k, rows = _check_k(k), check_rows(rows, index.dim)
    n0, b = len(index), rows.shape[0]
    own_idx, own_sim = drop_self(np.arange(b), *exact_search(rows, rows, k + 1))
    own_idx = np.where(own_idx >= 0, own_idx + n0, -1)
    if n0 == 0:
        return own_idx, own_sim
    old_idx, old_sim = index.query(rows, k)
    # best first, ties to the lower id, padding (-1, -inf) last
    return best_per_row(np.hstack([old_idx, own_idx]), np.hstack([old_sim, own_sim]), k)


def index_knn_graph(
    X: NDArray[np.floating], k: int, *, backend: str = "auto", seed: int = 0, **params: Any
) -> sparse.csr_array:
    """Symmetric cosine k-NN graph of the rows of X through a k-NN index.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    k : int
        Neighbours per point, excluding the point itself.
    backend, seed, **params
        As :func:`er.ann.make_index`; ``auto`` is exact below its threshold.

    Returns
    -------
    csr_array of float32, shape (n, n)
        The graph :func:`er.cluster.knn_graph` would give when the index is exact.
    """
    Xn = normalize_rows(np.asarray(X))
    if Xn.ndim != 2 or Xn.shape[0] == 0 or Xn.shape[1] == 0:
        raise ConfigError(f"index_knn_graph needs a non-empty 2-d X. Got shape {Xn.shape}.")
    if (np.abs(Xn).sum(axis=1) == 0).any():
        row = int(np.flatnonzero(np.abs(Xn).sum(axis=1) == 0)[0])
        raise ConfigError(f"X: row {row} is all zeros; cosine needs a non-zero vector.")
    index = make_index(backend, dim=Xn.shape[1], seed=seed, **params)
    idx, sim = batch_neighbors(index, Xn, k)
    # each row's ids are distinct, below n and not its own (drop_self): the lists
    # are the graph's rows as they stand (knn_lists_graph's preconditions)
    return knn_lists_graph(idx, sim)
