"""Metrics of hierarchies (trees and DAGs) against a gold flat clustering.

Dendrogram purity is dissertation Eq. 2.4; Jacc/lbl, Jacc/pt, Jacc/node are
Eq. 2.5-2.7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from er.evaluation._flat import _codes, _pairs, pairwise_prf

__all__ = [
    "best_level_f1",
    "dendrogram_purity",
    "dp_means_cost",
    "f1_at_gold_k",
    "jaccard_metrics",
]


def dendrogram_purity(hierarchy: Any, gold: ArrayLike) -> float:
    """Dendrogram purity of a tree, exactly, without enumerating pairs.

    For node v and gold class c, the same-class pairs whose LCA is v number
    (n_vc^2 - sum over children u of n_uc^2) / 2, each of purity n_vc / |v|; so
    DP = sum_v sum_c that count times n_vc / |v|, over all same-class pairs.

    Parameters
    ----------
    hierarchy : Hierarchy
        A tree (one parent per node).
    gold : array-like of shape (n_points,)

    Returns
    -------
    float in [0, 1]; 1.0 when no class has two points.

    Notes
    -----
    O(nnz) sparse operations, where nnz = sum over nodes of classes under it.
    """
    y = _codes(gold)
    counts = hierarchy.leaf_counts(y).astype(np.float64)  # (N, K)
    sizes = np.asarray(counts.sum(axis=1)).ravel()
    A = hierarchy.child_matrix().astype(np.float64)  # A[parent, child]
    sq = counts.multiply(counts)
    # Ordered pairs under v minus those inside one child; the (i, i) pairs cancel
    # except at childless nodes (leaves), whose rows are dropped.
    has_children = np.diff(A.indptr) > 0
    lca_pairs = sparse.diags_array(has_children.astype(np.float64)) @ ((sq - A @ sq) / 2.0)
    purity = sparse.diags_array(1.0 / np.maximum(sizes, 1)) @ counts
    total = _pairs(np.bincount(y))
    if total == 0:
        return 1.0
    return float(sparse.csr_array(lca_pairs).multiply(purity).sum() / total)


def jaccard_metrics(hierarchy: Any, gold: ArrayLike) -> dict[str, float]:
    """Jacc/lbl, Jacc/pt and Jacc/node (Eq. 2.5-2.7) of a tree or DAG.

    Returns
    -------
    dict with ``jacc_lbl``, ``jacc_pt``, ``jacc_node``.
    """
    y = _codes(gold)
    counts = sparse.csr_array(hierarchy.leaf_counts(y).astype(np.float64)).tocoo()
    sizes = np.asarray(counts.sum(axis=1)).ravel()
    gold_sizes = np.bincount(y).astype(np.float64)
    inter = counts.data
    jac = inter / (sizes[counts.row] + gold_sizes[counts.col] - inter)
    J = sparse.csr_array((jac, (counts.row, counts.col)), shape=counts.shape)
    best_per_label = np.asarray(J.max(axis=0).toarray()).ravel()
    best_per_node = np.asarray(J.max(axis=1).toarray()).ravel()
    return {
        "jacc_lbl": float(best_per_label.mean()),
        "jacc_pt": float((best_per_label * gold_sizes).sum() / gold_sizes.sum()),
        "jacc_node": float(best_per_node.mean()),
    }


def _level_range(hierarchy: Any) -> range:
    return range(0, int(hierarchy.level_hi.max(initial=0)) + 1)


def best_level_f1(hierarchy: Any, gold: ArrayLike) -> tuple[float, int]:
    """Best pairwise F1 over every level of the tree, and the first level reaching it.

    One pass for trees whose levels grow towards the root (SCC, MBSCC, GRINCH heights,
    HAC merge ranks): the clusters at level L are the components of the edges whose
    parent has ``level_lo <= L``, so the edges are joined in level order with a
    union-find that keeps each component's gold counts, updating the true and
    predicted pair counts as it goes: O(n log n) for all levels, where cutting each of
    HAC's n - 1 levels costs O(n^2). Other structures cut every level.
    """
    h = hierarchy
    if h.edges.size and np.any(h.level_lo[h.edges[:, 1]] < h.level_lo[h.edges[:, 0]]):
        return _best_level_f1_by_cuts(h, gold)
    codes = np.unique(np.asarray(gold), return_inverse=True)[1].ravel().astype(np.int64)
    gold_pairs = _pair_count(np.bincount(codes))
    order = np.argsort(h.level_lo[h.edges[:, 1]], kind="stable")
    levels = h.level_lo[h.edges[order, 1]]
    tps, preds = joined_pair_counts(h.n_nodes, codes, h.edges[order, 0], h.edges[order, 1])
    best, at = _pair_f1(0, 0, gold_pairs), 0
    for k in range(len(levels)):
        if k + 1 == len(levels) or levels[k + 1] != levels[k]:  # a level is complete
            f1 = _pair_f1(int(tps[k]), int(preds[k]), gold_pairs)
            if f1 > best:
                best, at = f1, int(levels[k])
    return best, at


def joined_pair_counts(
    n_nodes: int, codes: NDArray[np.int64], child: NDArray[np.int64], parent: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pair counts as the edges (child[k], parent[k]) are joined in order.

    A union-find that keeps each component's gold counts (the smaller merged into the
    larger): O(n log n) for every prefix of the edges, where cutting each costs O(n).

    Parameters
    ----------
    n_nodes : int
        Nodes of the structure; the first ``codes.size`` are its points.
    codes : ndarray of int64, shape (n_points,)
        Gold entity code of each point, -1 for an unlabelled one.
    child, parent : ndarray of int64, shape (m,)
        The edges, in the order they join.

    Returns
    -------
    tp, pred : ndarray of int64, shape (m,)
        After the first k + 1 edges: pairs of two labelled points of one gold entity in
        one component; pairs in one component with at least one labelled point (every
        pair, when every point is labelled).
    """
    owner = np.arange(n_nodes)
    counts: list[dict[int, int]] = [{int(c): 1} if c >= 0 else {} for c in codes.tolist()]
    counts += [{} for _ in range(n_nodes - codes.size)]
    labelled = np.zeros(n_nodes, np.int64)
    labelled[: codes.size] = codes >= 0
    size = np.zeros(n_nodes, np.int64)
    size[: codes.size] = 1

    def find(v: int) -> int:
        while owner[v] != v:
            owner[v] = owner[owner[v]]
            v = owner[v]
        return int(v)

    tps = np.zeros(child.size, np.int64)
    preds = np.zeros(child.size, np.int64)
    tp = pred = 0
    for k, (c, p) in enumerate(zip(child.tolist(), parent.tolist(), strict=True)):
        a, b = find(c), find(p)
        if a != b:
            if size[a] < size[b]:
                a, b = b, a
            small, big = counts[b], counts[a]
            tp += sum(n * big.get(g, 0) for g, n in small.items())
            for g, n in small.items():
                big[g] = big.get(g, 0) + n
            counts[b] = {}
            la, lb = int(labelled[a]), int(labelled[b])
            pred += la * int(size[b]) + lb * int(size[a]) - la * lb
            size[a] += size[b]
            labelled[a] += lb
            owner[b] = a
        tps[k], preds[k] = tp, pred
    return tps, preds


def _pair_count(sizes: NDArray[np.int64]) -> int:
    return int((sizes * (sizes - 1) // 2).sum())


def _pair_f1(tp: int, pred_pairs: int, gold_pairs: int) -> float:
    """F1 as :func:`pairwise_prf` defines it (1.0 precision/recall without pairs)."""
    p = tp / pred_pairs if pred_pairs else 1.0
    r = tp / gold_pairs if gold_pairs else 1.0
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _best_level_f1_by_cuts(hierarchy: Any, gold: ArrayLike) -> tuple[float, int]:
    best, at = -1.0, 0
    for level in _level_range(hierarchy):
        f1 = pairwise_prf(gold, hierarchy.cut(level))[2]
        if f1 > best:
            best, at = f1, level
    return best, at


def f1_at_gold_k(hierarchy: Any, gold: ArrayLike) -> float:
    """Pairwise F1 of the level whose number of clusters is closest to the gold number."""
    k = np.unique(np.asarray(gold)).size
    levels = list(_level_range(hierarchy))
    cuts = [hierarchy.cut(level) for level in levels]
    gaps = [abs(np.unique(c).size - k) for c in cuts]
    return pairwise_prf(gold, cuts[int(np.argmin(gaps))])[2]


def dp_means_cost(X: NDArray[np.floating], labels: ArrayLike, lam: float) -> float:
    """DP-means cost: squared distances to cluster means plus ``lam`` per cluster.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    labels : array-like of shape (n,)
    lam : float
        Cost of opening a cluster.
    """
    X = np.asarray(X, np.float64)
    codes = _codes(labels)
    k = codes.max(initial=-1) + 1
    sums = np.zeros((k, X.shape[1]))
    np.add.at(sums, codes, X)
    counts = np.bincount(codes, minlength=k)[:, None]
    means = sums / counts
    return float(((X - means[codes]) ** 2).sum() + lam * k)
