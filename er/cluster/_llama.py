"""LLAMA: DAG-structured clustering by non-reciprocal nearest-neighbour merges.

Each round every cluster of the current cover merges with its nearest neighbour;
a cluster chosen by several others gets several parents (a DAG). At most ``p``
parents per cluster: a pair is kept only if it is among the top-p pairs of both
of its clusters (Eq. 5.3-5.5).

References
----------
Monath et al., AISTATS 2021; dissertation ch. 5 (Alg. 11, §5.2-5.3).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.cluster._graph import as_graph, knn_graph, normalize_rows
from er.cluster._hierarchy import Hierarchy
from er.cluster._params import NONE, Interval, get_params, validate_params
from er.cluster._rounds import best_neighbors
from er.cluster._snapshot import _Snapshot
from er.exceptions import ConfigError

__all__ = ["Llama"]


class Llama:
    """LLAMA over a sparse similarity graph with (approximate) average linkage.

    Parameters
    ----------
    n_rounds : int or None, default None
        Rounds L; None runs until one cluster remains or a round adds nothing.
    p : int, default 5
        Most parents per cluster per round.
    k : int, default 10
        Neighbours per point when the graph is built from X.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        The DAG (several parents per node allowed), with one root over everything.
    delta_ : ClusteringDelta

    Notes
    -----
    Average linkage between clusters of the cover is computed exactly each round
    from point memberships, ``M W M^T`` with W the point graph, rather than with the
    paper's tree update rule (§5.3). That rule counts an edge once per overlapping
    child; on clique-separated data it pushed linkages above 1 and kept a gold
    cluster from forming (seed 145 of the theorem test), while the exact form
    satisfies Theorem 8. Cost per round: O(nnz(M) * k).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_rounds": [Interval(int, 1, None), NONE],
        "p": [Interval(int, 1, None)],
        "k": [Interval(int, 1, None)],
    }
    algorithm = "llama"

    def __init__(self, *, n_rounds: int | None = None, p: int = 5, k: int = 10) -> None:
        self.n_rounds = n_rounds
        self.p = p
        self.k = k

    def fit(self, X: NDArray[np.floating] | None = None, *, graph: Any = None) -> Llama:
        """Build the DAG from points X (cosine k-NN graph) or a precomputed ``graph``."""
        validate_params(self)
        if graph is not None:
            W = as_graph(graph, None if X is None else np.asarray(X).shape[0])
        elif X is not None:
            W = knn_graph(normalize_rows(np.asarray(X)), self.k, normalized=True)
        else:
            raise ConfigError("Llama.fit needs X or graph=.")
        self.hierarchy_ = _run(
            sparse.csr_array(W, dtype=np.float64), self.n_rounds, self.p, get_params(self)
        )
        self.delta_ = self.hierarchy_.to_delta()
        return self

    def partial_fit(self, X: NDArray[np.floating]) -> Llama:
        """Add the rows of X and re-run LLAMA over every point so far.

        LLAMA is a batch algorithm (dissertation ch. 5, Alg. 11: every round looks at
        the whole cover), so an incremental caller such as the pipeline re-runs it on
        all points per batch: O(n^2 d) for the exact k-NN graph plus the rounds, fine
        for collections of some tens of thousands. Node ids stay stable across calls
        (``node_ids_``): points keep the id they got on arrival, a cluster is known by
        its point set, so an unchanged cluster keeps its id and ``delta_`` holds only
        the nodes and edges that changed. An id that leaves and whose set comes back
        gets its old id again (the graph store reopens its life).

        Parameters
        ----------
        X : ndarray of shape (b, d)
        """
        validate_params(self)
        rows = normalize_rows(np.asarray(X))
        if not hasattr(self, "_points"):
            self._points = np.zeros((0, rows.shape[1]), np.float32)
            self._point_ids = np.zeros(0, np.int64)
            self._ids: dict[bytes, int] = {}
            self._next_id = 0
            self._state = _Snapshot.empty()
        elif rows.shape[1] != self._points.shape[1]:
            raise ConfigError(
                f"X has {rows.shape[1]} columns; this Llama was fitted on {self._points.shape[1]}."
            )
        first = self._next_id
        self._next_id += rows.shape[0]
        self._point_ids = np.r_[self._point_ids, np.arange(first, self._next_id)]
        self._points = np.vstack([self._points, rows.astype(np.float32)])
        W = knn_graph(self._points, self.k, normalized=True)
        h = _run(sparse.csr_array(W, dtype=np.float64), self.n_rounds, self.p, get_params(self))
        M = h.leaf_membership()
        self.node_ids_ = self._stable_ids(h, M)
        state = _Snapshot.of(h, self.node_ids_, sizes=np.diff(M.indptr))
        self.delta_ = state.delta_from(self._state, self.algorithm)
        self._state, self.hierarchy_ = state, h
        return self

    def _stable_ids(self, h: Hierarchy, M: sparse.csr_array) -> NDArray[np.int64]:
        """(n_nodes,) id per node: points keep theirs; clusters by their (sorted) point set."""
        ids = np.empty(h.n_nodes, np.int64)
        ids[: h.n_points] = self._point_ids
        M.sort_indices()
        indices, indptr = M.indices.astype(np.int64), M.indptr.tolist()
        for v in range(h.n_points, h.n_nodes):
            key = indices[indptr[v] : indptr[v + 1]].tobytes()
            if key not in self._ids:
                self._ids[key] = self._next_id
                self._next_id += 1
            ids[v] = self._ids[key]
        return ids


def _run(W: sparse.csr_array, n_rounds: int | None, p: int, params: dict[str, Any]) -> Hierarchy:
    n = W.shape[0]
    W0 = W
    members = sparse.identity(n, dtype=np.int8, format="csr")  # cover node -> points
    node = np.arange(n, dtype=np.int64)  # cover index -> DAG node id
    edges: list[tuple[int, int]] = []
    score, level_lo, level_hi = [np.nan] * n, [0] * n, [0] * n
    seen: dict[bytes, int] = {}
    level = 0
    while (n_rounds is None or level < n_rounds) and node.size > 1:
        level += 1
        pairs, vals = _kept_pairs(W, np.diff(members.indptr), p)
        if pairs.size == 0:
            break
        unions = _unions(members, pairs)
        # Eq. 5.2 / 5.5: the next cover is {C u C' : kept pairs} plus the clusters no
        # kept pair used. A union that is already a known set (C inside C', or a set an
        # earlier round built) reuses that node: C' is carried forward and C gets it as
        # a parent, so the same pair cannot come back round after round.
        #
        # A known set re-enters the cover only if it is in the cover now and takes no
        # parent this round. One that took a parent this round, or left the cover in
        # an earlier round, only gains the new children: carrying it on would let it
        # merge again and collect more than p parents in all (a point set can be
        # rebuilt from two overlapping DAG clusters); its points stay covered by the
        # clusters it merged into.
        unions.sort_indices()
        created, targets = set(), []
        for j in range(len(pairs)):
            key = unions.indices[unions.indptr[j] : unions.indptr[j + 1]].tobytes()
            if key not in seen:
                seen[key] = len(score)
                created.add(seen[key])
                score.append(float(vals[j]))
                level_lo.append(level)
                level_hi.append(level)
            targets.append((key, seen[key]))
        new_parents = {
            (int(node[c]), v)
            for (a, b), (_, v) in zip(pairs.tolist(), targets, strict=True)
            for c in (a, b)
            if node[c] != v
        }
        parented, in_cover = {c for c, _ in new_parents}, set(node.tolist())
        round_ids: dict[bytes, int] = {}
        new_rows = []
        for j, (key, v) in enumerate(targets):
            open_ = v in created or (v in in_cover and v not in parented)
            if open_ and key not in round_ids:
                round_ids[key] = v
                new_rows.append(j)
        merged = np.unique(pairs)
        next_ids = np.asarray(list(round_ids.values()), np.int64)
        carried = np.setdiff1d(np.arange(node.size), merged)
        carried = carried[~np.isin(node[carried], next_ids)]  # a set never sits twice
        if np.array_equal(np.sort(np.r_[next_ids, node[carried]]), np.sort(node)):
            break  # the cover did not change: nothing more to merge
        edges.extend(new_parents)
        for v in np.r_[next_ids, node[carried]]:
            level_hi[int(v)] = level
        members, node = _next_cover(members, node, unions[new_rows], next_ids, carried)
        W = _cover_graph(W0, members)
    _add_root(node, np.diff(members.indptr), n, edges, score, level_lo, level_hi, level)
    e = np.array(sorted(set(edges)), np.int64).reshape(-1, 2)
    return Hierarchy(
        n, e, np.asarray(score), np.asarray(level_lo), np.asarray(level_hi), "llama", params
    )


def _kept_pairs(
    W: sparse.csr_array, sizes: NDArray[np.int64], p: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Nearest-neighbour pairs kept by the top-p rule on both sides (Eq. 5.1, 5.3-5.4).

    Returns
    -------
    pairs : ndarray of int64, shape (q, 2)
        Unordered pairs ``(a, b)``, a < b, of cover indices.
    vals : ndarray of float64, shape (q,)
        Their linkage.
    """
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    link = W.data / (sizes[rows] * sizes[W.indices])
    nn, best = best_neighbors(W, link)
    src = np.flatnonzero(nn >= 0)
    a, b = np.minimum(src, nn[src]), np.maximum(src, nn[src])
    uniq, idx = np.unique(np.stack([a, b], axis=1), axis=0, return_index=True)
    vals = best[src][idx]
    if uniq.size == 0:
        return uniq.reshape(0, 2), vals
    keep = _top_p_mask(uniq, vals, p, W.shape[0])
    return uniq[keep], vals[keep]


def _top_p_mask(
    pairs: NDArray[np.int64], vals: NDArray[np.float64], p: int, m: int
) -> NDArray[np.bool_]:
    """True for pairs among the p best of both their clusters (Eq. 5.3-5.4).

    A cluster's candidates are all kept-NN pairs containing it, on either side;
    ties go to the lower partner id.
    """
    q = len(pairs)
    owner = np.r_[pairs[:, 0], pairs[:, 1]]
    partner = np.r_[pairs[:, 1], pairs[:, 0]]
    value = np.r_[vals, vals]
    which = np.r_[np.arange(q), np.arange(q)]
    order = np.lexsort((partner, -value, owner))
    owner = owner[order]
    start = np.r_[0, np.flatnonzero(owner[1:] != owner[:-1]) + 1]
    rank = np.arange(owner.size) - np.repeat(start, np.diff(np.r_[start, owner.size]))
    ok = np.ones(q, bool)
    ok[which[order][rank >= p]] = False
    return ok


def _unions(members: sparse.csr_array, pairs: NDArray[np.int64]) -> sparse.csr_array:
    U = members[pairs[:, 0]] + members[pairs[:, 1]]
    U = sparse.csr_array(U)
    U.data = np.minimum(U.data, 1).astype(np.int8)
    U.sort_indices()
    return U


def _next_cover(
    members: sparse.csr_array,
    node: NDArray[np.int64],
    new_members: sparse.csr_array,
    new_ids: NDArray[np.int64],
    carried: NDArray[np.int64],
) -> tuple[sparse.csr_array, NDArray[np.int64]]:
    """The next cover: the new unions, then the clusters no kept pair used."""
    members2 = sparse.csr_array(sparse.vstack([new_members, members[carried]]))
    return members2, np.r_[new_ids, node[carried]]


def _cover_graph(W0: sparse.csr_array, members: sparse.csr_array) -> sparse.csr_array:
    """Edge sums between cover clusters over all their point pairs: ``M W0 M^T``."""
    M = members.astype(np.float64)
    W = sparse.csr_array(M @ W0 @ M.T)
    W.setdiag(0)
    W.eliminate_zeros()
    W.sort_indices()
    return W


def _add_root(
    node: NDArray[np.int64],
    sizes: NDArray[np.integer[Any]],
    n: int,
    edges: list[tuple[int, int]],
    score: list[float],
    level_lo: list[int],
    level_hi: list[int],
    level: int,
) -> None:
    """Join what is left under one root (Def. 5: the DAG contains the whole set).

    If the last cover already has a node holding every point, it is the root;
    otherwise a new node over everything is added.
    """
    if node.size <= 1:
        return
    full = np.flatnonzero(sizes == n)
    if full.size:
        root = int(node[full[0]])
    else:
        root = len(score)
        score.append(0.0)
        level_lo.append(level + 1)
        level_hi.append(level + 1)
    for v in node:
        if v == root:
            continue
        edges.append((int(v), root))
        level_hi[int(v)] = level
