"""Approximate k-NN graphs from annoy, in the form the clustering cores take.

annoy indexes are immutable once built and take dense integer ids (annoy README);
this wrapper checks shapes and ids, which annoy does not, and returns the same
symmetric CSR similarity graph as :func:`er.cluster.knn_graph`.
"""

from __future__ import annotations

import numpy as np
from annoy import AnnoyIndex
from numpy.typing import NDArray
from scipy import sparse

from er.cluster import as_graph, normalize_rows
from er.exceptions import ConfigError

__all__ = ["annoy_knn_graph"]


def annoy_knn_graph(
    X: NDArray[np.floating],
    k: int,
    *,
    n_trees: int = 10,
    search_k: int = -1,
    seed: int = 0,
) -> sparse.csr_array:
    """Approximate cosine k-NN graph of the rows of X.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    k : int
        Neighbours per point, excluding the point itself.
    n_trees : int, default 10
        More trees: better recall, larger index, slower build.
    search_k : int, default -1
        Nodes inspected per query (-1: annoy's default, n_trees * (k + 1)).
    seed : int, default 0
        annoy's random seed; the same seed and input give the same graph.

    Returns
    -------
    csr_array of float32, shape (n, n)
        Cosine similarities on the found edges, symmetrised.

    Notes
    -----
    annoy's angular distance is sqrt(2 - 2 cos) on unit vectors, so cos = 1 - d^2 / 2.
    """
    Xn = normalize_rows(np.asarray(X))
    n, d = Xn.shape
    if n == 0 or d == 0:
        raise ConfigError(f"annoy_knn_graph needs a non-empty 2-d X. Got shape {Xn.shape}.")
    k = min(int(k), n - 1)
    if k < 1:
        return sparse.csr_array((n, n), dtype=np.float32)
    index = AnnoyIndex(d, "angular")
    index.set_seed(seed)
    for i in range(n):
        index.add_item(i, Xn[i])
    index.build(n_trees, n_jobs=1)  # one job: the build is deterministic for a seed
    rows, cols, dists = [], [], []
    for i in range(n):
        ids, ds = index.get_nns_by_item(i, k + 1, search_k=search_k, include_distances=True)
        pairs = [(j, dist) for j, dist in zip(ids, ds, strict=True) if j != i][:k]
        rows += [i] * len(pairs)
        cols += [j for j, _ in pairs]
        dists += [dist for _, dist in pairs]
    sims = 1.0 - np.square(np.asarray(dists, np.float64)) / 2.0
    return as_graph((np.asarray(rows), np.asarray(cols), sims.astype(np.float32)), n)
