"""Seeded datasets with the separation properties the papers' guarantees assume."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

__all__ = ["grinch_synthetic", "hard_mixture"]


def grinch_synthetic(
    n_clusters: int = 100, per_cluster: int = 25, block: int = 100, p: float = 0.1, seed: int = 0
) -> tuple[sparse.csr_array, NDArray[np.int64]]:
    """The synthetic set of dissertation §3.5.1, shuffled.

    Points of cluster k set each bit of the block ``[block*k, block*(k+1))`` to 1
    with probability p, every other bit 0: across clusters cosine is 0, within a
    cluster it may be 0 or positive (chain-like, model-based separated clusters).

    Returns
    -------
    X : csr_array of float32, shape (n_clusters * per_cluster, n_clusters * block)
    y : ndarray of int64, shape (n_clusters * per_cluster,)
    """
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_clusters), per_cluster)
    bits = rng.random((y.size, block)) < p
    rows, offs = np.nonzero(bits)
    cols = y[rows] * block + offs
    X = sparse.csr_array(
        (np.ones(rows.size, np.float32), (rows, cols)), shape=(y.size, n_clusters * block)
    )
    order = rng.permutation(y.size)
    return sparse.csr_array(X[order]), y[order]


def hard_mixture(
    n: int,
    *,
    d: int = 64,
    cluster_size: int = 10,
    noise: float = 1.08,
    seed: int = 0,
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """A Gaussian mixture of many small, overlapping clusters: data where methods differ.

    ``n / cluster_size`` centres drawn from N(0, I_d), points = centre + N(0, noise^2 I_d).
    With the defaults (64-d, clusters of 10, noise 1.08) average-linkage HAC reaches a
    dendrogram purity of about 0.87 at 20k points (fewer points: easier; bench/RESULTS.md),
    unlike the well-separated
    mixtures on which every algorithm scores 1.0.

    Returns
    -------
    X : ndarray of float32, shape (n, d)
    y : ndarray of int64, shape (n,)
    """
    rng = np.random.default_rng(seed)
    k = max(n // cluster_size, 1)
    centers = rng.normal(size=(k, d))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(scale=noise, size=(n, d))
    return X.astype(np.float32), y.astype(np.int64)
