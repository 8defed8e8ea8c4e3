"""The annoy k-NN graph against the exact one: recall, determinism, shape."""

from __future__ import annotations

import numpy as np
import pytest

from er.ann import annoy_knn_graph
from er.cluster import knn_graph


def mixture(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n // 10, 32))
    return (centers[rng.integers(0, len(centers), n)] + rng.normal(size=(n, 32)) * 0.25).astype(
        np.float32
    )


def test_recall_against_exact_knn() -> None:
    X = mixture(3000)
    exact = knn_graph(X, 10)
    approx = annoy_knn_graph(X, 10, n_trees=10, search_k=2000)
    recall = exact.multiply(approx != 0).nnz / exact.nnz
    assert recall >= 0.9
    # where an edge is found its weight is the true cosine (annoy's distance converted)
    both = exact.multiply(approx != 0)
    np.testing.assert_allclose(approx.multiply(exact != 0).data, both.data, atol=1e-5)


def test_same_seed_same_graph() -> None:
    X = mixture(500, seed=3)
    a = annoy_knn_graph(X, 5, seed=7)
    b = annoy_knn_graph(X, 5, seed=7)
    assert (a != b).nnz == 0
    assert a.shape == (500, 500) and (a != a.T).nnz == 0  # symmetric
    assert a.diagonal().sum() == 0  # no self-edges


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_inputs(n: int) -> None:
    G = annoy_knn_graph(np.eye(3, dtype=np.float32)[:n], 10)
    assert G.shape == (n, n) and G.nnz == max(0, n * (n - 1))
