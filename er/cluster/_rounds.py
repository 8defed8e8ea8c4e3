"""Round-based agglomeration on a sparse graph: the engine under SCC, Affinity, RecipNN.

Each round (one level) does four whole-array steps:

1. link: linkage value of every graph edge between current clusters;
2. best neighbour of every cluster by a row argmax (ties: lower node id);
3. keep the chosen edges the rule allows (SCC: value >= tau; RecipNN: reciprocal)
   and find their connected components;
4. contract the graph through the component labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse import csgraph

__all__ = ["Agglomerator", "best_neighbors"]

LINKAGES = ("average", "single", "centroid")


def best_neighbors(
    G: sparse.csr_array, values: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Row argmax of a CSR graph with edge ``values`` aligned to ``G.data``.

    Returns
    -------
    nn : ndarray of int64, shape (m,)
        Column of each row's best value, ties to the lowest column; -1 for empty rows.
    best : ndarray of float64, shape (m,)
        That value; -inf for empty rows.
    """
    m = G.shape[0]
    nn = np.full(m, -1, np.int64)
    best = np.full(m, -np.inf)
    counts = np.diff(G.indptr)
    rows = np.flatnonzero(counts)
    if rows.size == 0:
        return nn, best
    starts = G.indptr[rows]
    best[rows] = np.maximum.reduceat(values, starts)
    row_of = np.repeat(np.arange(m), counts)
    cand = np.where(values == best[row_of], G.indices, np.iinfo(np.int64).max)
    nn[rows] = np.minimum.reduceat(cand, starts)
    return nn, best


@dataclass
class Agglomerator:
    """State of a level-wise agglomeration and the hierarchy it has built.

    Parameters
    ----------
    W : csr_array, shape (n, n)
        Symmetric similarity graph over the points.
    linkage : {"average", "single", "centroid"}
    vectors : ndarray of shape (n, d), optional
        Unit vectors of the points; required for ``centroid`` linkage.
    """

    W: sparse.csr_array
    linkage: str = "average"
    vectors: NDArray[np.float32] | None = None
    # current clusters (one per row of W)
    size: NDArray[np.int64] = field(init=False)
    node: NDArray[np.int64] = field(init=False)
    sums: NDArray[np.float64] | None = field(init=False)
    # the hierarchy built so far
    parent: list[int] = field(init=False)
    score: list[float] = field(init=False)
    level_lo: list[int] = field(init=False)
    level: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        n = self.W.shape[0]
        self.W = sparse.csr_array(self.W, dtype=np.float64)
        self.size = np.ones(n, np.int64)
        self.node = np.arange(n, dtype=np.int64)
        self._point_cluster = np.arange(n, dtype=np.int64)
        self.last_decisions = (np.zeros(0, np.int64), np.zeros(0))
        self.sums = None if self.vectors is None else np.asarray(self.vectors, np.float64)
        self.parent = [-1] * n
        self.score = [np.nan] * n
        self.level_lo = [0] * n

    @property
    def n_clusters(self) -> int:
        return int(self.node.shape[0])

    def link_values(self) -> NDArray[np.float64]:
        """Linkage of every stored edge, aligned with ``W.data``."""
        W = self.W
        rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
        if self.linkage == "average":
            # Sparse average linkage: edge sums over |A||B|, absent pairs count 0 (§4.1.1).
            return W.data / (self.size[rows] * self.size[W.indices])
        if self.linkage == "single":
            return W.data
        S = self.sums
        norms = np.linalg.norm(S, axis=1)
        cols = W.indices
        dots = np.empty(rows.shape[0])
        # Edges in chunks of about 4M floats: gathering every edge's two rows at once
        # held E x d x 2 floats (4 GB for 25k edges of 10,000-d sparse input densified).
        step = max(1, (1 << 22) // max(S.shape[1], 1))
        for s in range(0, rows.shape[0], step):
            r, c = rows[s : s + step], cols[s : s + step]
            dots[s : s + step] = np.einsum("ij,ij->i", S[r], S[c])
        return dots / np.maximum(norms[rows] * norms[cols], 1e-300)

    def nearest(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Best neighbour (index into current clusters) and its linkage, per cluster.

        Ties break by the neighbour's node id, ascending (DESIGN, Determinism):
        current clusters are kept sorted by node id, so the lowest column wins.
        """
        return best_neighbors(self.W, self.link_values())

    def merge(
        self,
        keep: Callable[[NDArray[np.int64], NDArray[np.float64]], NDArray[np.bool_]],
        decide: Callable[[NDArray[np.int64], NDArray[np.float64]], tuple[NDArray, NDArray]]
        | None = None,
    ) -> int:
        """One round: join clusters linked by kept best-neighbour edges.

        Parameters
        ----------
        keep : callable (nn, best) -> ndarray of bool, shape (m,)
            Which best-neighbour edges count for this round.
        decide : callable (nn, best) -> (nn, best), optional
            Replaces some best-neighbour decisions before ``keep`` sees them (MBSCC's
            marking reuses earlier decisions of unmarked clusters).

        Returns
        -------
        int
            Number of new clusters formed (0: the level repeats the last one).
        """
        self.level += 1
        nn, best = self.nearest()
        if decide is not None:
            nn, best = decide(nn, best)
        self.last_decisions = (nn, best)
        kept = keep(nn, best) & (nn >= 0)
        m = self.n_clusters
        src = np.flatnonzero(kept)
        E = sparse.csr_array((np.ones(src.size), (src, nn[src])), shape=(m, m))
        n_comp, label = csgraph.connected_components(E, directed=True, connection="weak")
        comp_size = np.bincount(label, minlength=n_comp)
        if n_comp == m:
            return 0
        # weakest kept link inside each component = the linkage it formed at
        formed = np.full(n_comp, np.inf)
        np.minimum.at(formed, label[src], best[src])
        new_node = self.node[np.unique(label, return_index=True)[1]]
        merged = np.flatnonzero(comp_size > 1)
        first_id = len(self.parent)
        new_node[merged] = first_id + np.arange(merged.size)
        self.parent.extend([-1] * merged.size)
        self.score.extend(formed[merged].tolist())
        self.level_lo.extend([self.level] * merged.size)
        members = np.flatnonzero(comp_size[label] > 1)
        # plain ints through tolist(): per-element numpy indexing dominated large rounds
        for child, par in zip(
            self.node[members].tolist(), new_node[label[members]].tolist(), strict=True
        ):
            self.parent[child] = par
        self._contract(label, n_comp, new_node)
        return int(merged.size)

    @property
    def point_cluster(self) -> NDArray[np.int64]:
        """(n_points,) index of the current cluster holding each point."""
        return self._point_cluster

    def _contract(self, label: NDArray[np.int64], n_comp: int, new_node: NDArray[np.int64]) -> None:
        # Order the new clusters by node id so that argmax ties favour lower ids.
        order = np.argsort(new_node, kind="stable")
        rank = np.empty(n_comp, np.int64)
        rank[order] = np.arange(n_comp)
        lab = rank[label]
        self._point_cluster = lab[self._point_cluster]
        W = self.W.tocoo()
        r, c = lab[W.row], lab[W.col]
        off = r != c
        if self.linkage == "single":
            W2 = _max_aggregate(r[off], c[off], W.data[off], n_comp)
        else:
            W2 = sparse.csr_array((W.data[off], (r[off], c[off])), shape=(n_comp, n_comp))
            W2.sum_duplicates()
        self.W = W2
        self.size = np.bincount(lab, weights=self.size, minlength=n_comp).astype(np.int64)
        if self.sums is not None:
            # One sparse product sums each component's rows (np.add.at was the slowest
            # step of a centroid round on wide inputs).
            m = lab.shape[0]
            member = sparse.csr_array((np.ones(m), (lab, np.arange(m))), shape=(n_comp, m))
            self.sums = np.asarray(member @ self.sums)
        self.node = new_node[order]

    def finish(self, algorithm: str, params: dict[str, object], n_points: int):
        """The hierarchy built so far, joined under one root if several remain."""
        from er.cluster._hierarchy import Hierarchy

        if self.n_clusters > 1:
            _, best = self.nearest()
            top = float(np.max(best)) if np.isfinite(best).any() else 0.0
            root = len(self.parent)
            self.parent.append(-1)
            # Clusters with no edge between them have average linkage 0 (§4.1.1).
            self.score.append(min(top, 0.0) if self.linkage != "centroid" else top)
            self.level_lo.append(self.level + 1)
            for v in self.node:
                self.parent[v] = root
            self.level += 1
        parent = np.asarray(self.parent, np.int64)
        level_lo = np.asarray(self.level_lo, np.int32)
        level_hi = np.where(parent >= 0, level_lo[np.maximum(parent, 0)] - 1, self.level)
        children = np.flatnonzero(parent >= 0)
        edges = np.stack([children, parent[children]], axis=1)
        return Hierarchy(
            n_points=n_points,
            edges=edges,
            score=np.asarray(self.score),
            level_lo=level_lo,
            level_hi=level_hi.astype(np.int32),
            algorithm=algorithm,
            params=params,
        )


def _max_aggregate(r: NDArray, c: NDArray, v: NDArray, n: int) -> sparse.csr_array:
    """CSR of the max value per (r, c) pair (single linkage contraction)."""
    if r.size == 0:
        return sparse.csr_array((n, n))
    key = r.astype(np.int64) * n + c
    order = np.lexsort((-v, key))
    key, v = key[order], v[order]
    first = np.r_[True, key[1:] != key[:-1]]
    k = key[first]
    return sparse.csr_array((v[first], (k // n, k % n)), shape=(n, n))
