"""gHHC's initialisation and tree decoding (paper §3.1 Eq. 4, §4.2).

Decoding turns the node embeddings into an er :class:`Hierarchy`: every point and
every internal node picks the parent with the smallest child-parent dissimilarity
among nodes nearer the origin; a node chosen by points and by nodes gets an extra
child that holds its points; nodes without points are pruned and single-child nodes
spliced out. Memory: blocks of ``block_size`` rows against the m nodes, never n^2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist

from er.cluster._hierarchy import Hierarchy
from er.cluster._poincare import cp_dissimilarity

__all__ = ["decode", "init_nodes", "leaf_subtree", "node_parents"]


def _hac_nodes(leaves: NDArray[np.float64]) -> NDArray[np.float64]:
    """Internal nodes of average-linkage HAC over ``leaves`` embedded in the ball (§4.2).

    The j-th of N merges becomes the mean of its leaves, unit-normed, scaled by
    ``log(N + 1 - j) / log(N + 1)``: the first merges near the rim, the root near the
    origin. (The paper writes log(N - j) / log N, which is 0 for the last merge; the
    authors' code shifts by one, as here, so no node sits exactly at the origin.)

    Returns
    -------
    ndarray of shape (N, d), N = len(leaves) - 1, in merge order.
    """
    n = leaves.shape[0]
    if n < 2:
        return np.zeros((0, leaves.shape[1]))
    merges = linkage(leaves, method="average")
    sums = np.vstack([leaves, np.zeros((n - 1, leaves.shape[1]))])
    counts: NDArray[np.float64] = np.r_[np.ones(n), np.zeros(n - 1)]
    for j, (a, b) in enumerate(merges[:, :2].astype(np.int64)):
        sums[n + j] = sums[a] + sums[b]
        counts[n + j] = counts[a] + counts[b]
    means = sums[n:] / counts[n:, None]
    norms: NDArray[np.float64] = np.linalg.norm(means, axis=1, keepdims=True)
    unit = means / np.where(norms > 0, norms, 1.0)
    scale: NDArray[np.float64] = np.log(n - np.arange(n - 1)) / np.log(n)
    return unit * scale[:, None]


def _kmeanspp(X: NDArray[np.float64], k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Indices of k distinct rows by k-means++ D^2 seeding (what AFK-MC^2 approximates)."""
    picked = [int(rng.integers(X.shape[0]))]
    d2 = ((X - X[picked[0]]) ** 2).sum(axis=1)
    for _ in range(1, k):
        total = d2.sum()
        nxt = int(rng.choice(X.shape[0], p=d2 / total)) if total > 0 else int(rng.integers(len(X)))
        picked.append(nxt)
        d2 = np.minimum(d2, ((X - X[nxt]) ** 2).sum(axis=1))
    return np.asarray(picked, np.int64)


def init_nodes(
    X: NDArray[np.float64], m: int, method: str, scale: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Seeded initial node embeddings (§4.2; the authors' ``randhac`` configuration).

    Half the nodes are leaves picked from the data (at random, or by k-means++), then
    HAC over them gives the other half minus one (:func:`_hac_nodes`), and one more
    node is a random point; everything is scaled by ``scale``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Points already in the ball.
    m : int
        Number of internal nodes.
    method : {"random", "kmeans++"}

    Returns
    -------
    ndarray of shape (m, d)
    """
    n_leaves = min(m // 2, X.shape[0])
    if method == "kmeans++":
        pick = _kmeanspp(X, n_leaves, rng)
    else:
        pick = rng.choice(X.shape[0], size=n_leaves, replace=False)
    leaves = X[pick]
    nodes = [leaves, _hac_nodes(leaves)]
    short = m - n_leaves - nodes[1].shape[0]
    if short > 0:  # the root of the code, and any nodes the data is too small to seed
        extra = X[rng.integers(X.shape[0], size=short)] * rng.uniform(0.05, 1.0, (short, 1))
        nodes.insert(0, extra)
    return scale * np.vstack(nodes)[:m]


def node_parents(Z: NDArray[np.float64], gamma: float, block_size: int = 1024) -> NDArray[np.int64]:
    """Parent of each internal node (Eq. 4): the best d_cp among nodes nearer the origin.

    Nodes are ranked by decreasing norm, ties by index (§4.2); a node may only take a
    parent ranked after it, so the structure is acyclic and the last node is the root.

    Returns
    -------
    ndarray of int64, shape (m,)
        -1 for the root.
    """
    m = Z.shape[0]
    order = np.lexsort((np.arange(m), -np.linalg.norm(Z, axis=1)))
    rank = np.empty(m, np.int64)
    rank[order] = np.arange(m)
    parent = np.full(m, -1, np.int64)
    for start in range(0, m, block_size):
        rows = np.arange(start, min(start + block_size, m))
        (D,) = cp_dissimilarity(Z[rows], Z, gamma)
        D[rank[None, :] <= rank[rows, None]] = np.inf
        best = np.argmin(D, axis=1)
        ok = np.isfinite(D[np.arange(rows.size), best])
        parent[rows[ok]] = best[ok]
    return parent


def point_parents(
    X: NDArray[np.float64], Z: NDArray[np.float64], gamma: float, block_size: int = 1024
) -> NDArray[np.int64]:
    """Internal node each point picks (Eq. 4), blockwise: O(block_size * m) memory.

    Points lie farther from the origin than every node (``max_norm < point_norm``),
    so every node is an eligible parent.
    """
    out = np.empty(X.shape[0], np.int64)
    for start in range(0, X.shape[0], block_size):
        (D,) = cp_dissimilarity(X[start : start + block_size], Z, gamma)
        out[start : start + block_size] = np.argmin(D, axis=1)
    return out


def _bisect(P: NDArray[np.float64], n_iter: int = 10) -> NDArray[np.bool_]:
    """Deterministic 2-means split of the rows of P (seeds: the row farthest from the
    mean, then the row farthest from it); both sides non-empty.

    Returns
    -------
    ndarray of bool, shape (len(P),)
        True for the side of the first seed.
    """
    a = P[np.argmax(((P - P.mean(axis=0)) ** 2).sum(axis=1))]
    b = P[np.argmax(((P - a) ** 2).sum(axis=1))]
    side = np.ones(P.shape[0], bool)
    for _ in range(n_iter):
        new = ((P - a) ** 2).sum(axis=1) <= ((P - b) ** 2).sum(axis=1)
        if new.all() or not new.any():
            new = np.arange(P.shape[0]) < P.shape[0] // 2  # identical rows: halve
        if np.array_equal(new, side):
            break
        side = new
        a, b = P[side].mean(axis=0), P[~side].mean(axis=0)
    return side


def leaf_subtree(P: NDArray[np.float64], cap: int = 1000) -> NDArray[np.int64]:
    """A tree over the points that chose one internal node (not in the paper; see decode).

    Average-linkage HAC over the points when there are at most ``cap`` of them;
    otherwise a deterministic 2-means split first, recursively, so memory stays
    O(cap^2) whatever the holder's size.

    Parameters
    ----------
    P : ndarray of shape (s, d), s >= 2

    Returns
    -------
    ndarray of int64, shape (2s - 1,) at most
        Parent of each node: points 0..s-1, then internal nodes with every child
        before its parent; the last node is the root (-1).
    """
    parent: list[int] = [-1] * P.shape[0]

    def build(rows: NDArray[np.int64]) -> int:
        if rows.size == 1:
            return int(rows[0])
        if rows.size <= cap:
            # condensed distances: the observation form warns when rows happen to look square
            merges = linkage(pdist(P[rows]), method="average")[:, :2].astype(np.int64)
            ids: list[int] = list(rows)
            for a, b in merges:
                ids.append(len(parent))
                parent.append(-1)
                parent[ids[a]] = parent[ids[b]] = ids[-1]
            return ids[-1]
        side = _bisect(P[rows])
        left, right = build(rows[side]), build(rows[~side])
        parent.append(-1)
        parent[left] = parent[right] = len(parent) - 1
        return len(parent) - 1

    build(np.arange(P.shape[0]))
    return np.asarray(parent, np.int64)


def decode(
    X: NDArray[np.float64],
    Z: NDArray[np.float64],
    gamma: float,
    params: dict[str, Any],
    leaf_tree: str = "star",
) -> Hierarchy:
    """The discrete tree the embeddings stand for, pruned, as a :class:`Hierarchy`.

    Node layout before pruning: points 0..n-1, internal nodes n..n+m-1, and for each
    internal node c a "points holder" n+m+c between c and the points that chose it
    (§4.2: keeps a tree-consistent partition matching the point assignments).

    ``leaf_tree`` says how a holder's points hang below it: "star", the paper's
    (§4.2: all of them children of the holder, one flat cluster), or "hac", a
    sub-tree by :func:`leaf_subtree` whose root is the holder (er's addition: when
    thousands of points choose one node, a star makes every same-class pair in it
    meet in that node; the sub-tree refines the holder and changes nothing above it).
    """
    n, m = X.shape[0], Z.shape[0]
    up = node_parents(Z, gamma)
    chosen = point_parents(X, Z, gamma)
    parent = np.r_[n + m + chosen, np.where(up >= 0, n + up, -1), n + np.arange(m)]
    extra, holder_of = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if leaf_tree == "hac":  # sub-tree nodes below holders, children first
        parent, extra, holder_of = _hang_subtrees(X, chosen, parent, n, m)
    # children come before parents: sub-trees, holders, then nodes by decreasing norm
    order = np.lexsort((np.arange(m), -np.linalg.norm(Z, axis=1)))
    bottom_up = np.r_[extra, n + m + np.arange(m), n + order]
    size = parent.size
    count = np.r_[np.ones(n, np.int64), np.zeros(size - n, np.int64)]
    np.add.at(count, parent[:n], 1)
    for v in bottom_up:
        if parent[v] >= 0:
            count[parent[v]] += count[v]
    nonempty = count > 0
    kids = np.bincount(parent[nonempty & (parent >= 0)], minlength=size)
    keep = np.r_[np.ones(n, bool), (kids[n:] >= 2) & nonempty[n:]]
    new_parent = _splice(parent, keep, bottom_up[::-1], n)
    norms = np.linalg.norm(Z, axis=1)
    score = np.r_[norms, norms, norms[holder_of]]  # a sub-tree node scores as its holder
    return _relabel(new_parent, keep, bottom_up, score, n, params)


def _hang_subtrees(
    X: NDArray[np.float64], chosen: NDArray[np.int64], parent: NDArray[np.int64], n: int, m: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Replace each holder's star by :func:`leaf_subtree` over its points (root = holder).

    Returns the extended parent array, the new nodes' indices (children first, numbered
    from n + 2m on) and the internal node (0..m-1) each one hangs below.
    """
    parents, extra, holder = [parent], [], []
    next_id = parent.size
    by_node = np.argsort(chosen, kind="stable")
    bounds = np.searchsorted(chosen[by_node], np.arange(m + 1))
    for c in range(m):
        rows = by_node[bounds[c] : bounds[c + 1]]
        if rows.size < 3:
            continue
        sub = leaf_subtree(X[rows])
        s, inner = rows.size, sub.size - rows.size - 1  # inner: sub-tree nodes but the root
        ids = np.r_[rows, next_id + np.arange(inner), n + m + c]
        parent[rows] = ids[sub[:s]]
        parents.append(ids[sub[s : s + inner]])
        extra.append(next_id + np.arange(inner))
        holder.append(np.full(inner, c))
        next_id += inner
    if not extra:
        return parent, np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(parents), np.concatenate(extra), np.concatenate(holder)


def _splice(
    parent: NDArray[np.int64], keep: NDArray[np.bool_], top_down: NDArray[np.int64], n: int
) -> NDArray[np.int64]:
    """Parent of each node once every dropped node is bypassed (its nearest kept ancestor)."""
    kept_up = np.full(parent.size, -1, np.int64)  # nearest kept node at or above v
    for v in top_down:  # internal nodes and holders, parents first
        p = parent[v]
        above = -1 if p < 0 else (p if keep[p] else kept_up[p])
        kept_up[v] = v if keep[v] else above
    new_parent = np.full(parent.size, -1, np.int64)
    for v in np.r_[np.arange(n), top_down]:
        p = parent[v]
        if keep[v] and p >= 0:
            new_parent[v] = kept_up[p]
    return new_parent


def _relabel(
    parent: NDArray[np.int64],
    keep: NDArray[np.bool_],
    bottom_up: NDArray[np.int64],
    score: NDArray[np.float64],
    n: int,
    params: dict[str, Any],
) -> Hierarchy:
    """Number the kept clusters n.. by (height, position) and attach levels and scores.

    A cluster's level span starts at its height above the leaves and ends one below its
    parent's, so cutting at level L is a partition (as for a linkage tree). Its score
    is the Euclidean norm of its node: larger nearer the leaves, decreasing upwards.
    """
    height = np.zeros(parent.size, np.int64)
    for v in np.r_[np.arange(n), bottom_up]:
        if keep[v] and parent[v] >= 0:
            height[parent[v]] = max(height[parent[v]], height[v] + 1)
    clusters = np.flatnonzero(keep[n:]) + n
    clusters = clusters[np.lexsort((np.arange(clusters.size), height[clusters]))]
    new_id = np.full(parent.size, -1, np.int64)
    new_id[:n] = np.arange(n)
    new_id[clusters] = n + np.arange(clusters.size)
    nodes = np.r_[np.arange(n), clusters]
    has_parent = parent[nodes] >= 0
    edges = np.stack([new_id[nodes[has_parent]], new_id[parent[nodes[has_parent]]]], axis=1)
    lo = height[nodes].astype(np.int32)
    par_lo = np.where(has_parent, height[np.maximum(parent[nodes], 0)] - 1, lo)
    hi = np.maximum(par_lo, lo).astype(np.int32)
    node_score = np.r_[np.full(n, np.nan), score[clusters - n]]
    return Hierarchy(n, edges, node_score, lo, hi, "ghhc", params)
