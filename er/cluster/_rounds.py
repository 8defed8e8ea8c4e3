"""Round-based agglomeration on a sparse graph: the engine under SCC, Affinity, RecipNN.

Each round (one level) does four whole-array steps:

1. link: linkage value of every graph edge between current clusters;
2. best neighbour of every cluster by a row argmax (ties: lower node id), except
   clusters whose decision the caller gives (MBSCC's reused ones, ``merge(given=)``);
3. keep the chosen edges the rule allows (SCC: value >= tau; RecipNN: reciprocal)
   and find their connected components;
4. contract the graph through the component labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse import csgraph

from er.cluster._contract import _all_positive, _contract_graph
from er.cluster._graph import row_entries

if TYPE_CHECKING:
    from er.cluster._hierarchy import Hierarchy

__all__ = ["Agglomerator", "best_neighbors"]

LINKAGES = ("average", "single", "centroid", "mean")
# "mean" linkage keeps, in one float per stored edge, the number of graph edges it
# stands for and the sum of their weights shifted by one: PACK * count + sum(w + 1).
# A contraction adds entries, so both add up at once, on the same fast path as
# "average" (every entry stays positive). Weights are clipped to [-1, 1] (cosine
# similarities and match probabilities both lie there), so the shifted sum stays
# below 2 * count, far under PACK.
PACK = float(1 << 24)
# Agglomerator._decisions: share of the graph's edges under which the rows not given
# are computed alone rather than every row
ROWS_ALONE_BELOW = 0.5


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
    # sentinel: the column count, which fits the index type (int32 or int64)
    cand = np.where(values == np.repeat(best, counts), G.indices, G.shape[1])
    nn[rows] = np.minimum.reduceat(cand, starts)
    return nn, best


@dataclass
class Agglomerator:
    """State of a level-wise agglomeration and the hierarchy it has built.

    Parameters
    ----------
    W : csr_array, shape (n, n)
        Symmetric similarity graph over the points.
    linkage : {"average", "single", "centroid", "mean"}
        ``mean``: the mean weight of the graph edges between two clusters, an absent
        pair being no evidence (not 0, as for ``average``); weights are clipped to
        [-1, 1] (match probabilities of a pair model, or cosine similarities).
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
    level: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        n = self.W.shape[0]
        self.W = sparse.csr_array(self.W, dtype=np.float64)
        if self.linkage == "mean":
            # one edge, its shifted weight (see PACK)
            self.W.data = PACK + 1.0 + np.clip(self.W.data, -1.0, 1.0)
        # every entry > 0: then so is every entry of every contraction (_contract_graph)
        self._positive = _all_positive(self.W)
        self.size = np.ones(n, np.int64)
        self.node = np.arange(n, dtype=np.int64)
        self._point_cluster = np.arange(n, dtype=np.int64)
        self.last_decisions = (np.zeros(0, np.int64), np.zeros(0))
        self.sums = None if self.vectors is None else np.asarray(self.vectors, np.float64)
        self._norms = None if self.sums is None else np.linalg.norm(self.sums, axis=1)
        # best neighbour per cluster, kept between rounds; rows to redo after a merge
        self._nearest: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None
        self._merged: NDArray[np.int64] | None = None
        # the hierarchy as per-round arrays, joined in finish()
        self._n_nodes = n
        self._links: list[tuple[NDArray[np.int64], NDArray[np.int64]]] = []  # (child, parent)
        self._scores: list[NDArray[np.float64]] = [np.full(n, np.nan)]
        self._levels: list[NDArray[np.int64]] = [np.zeros(n, np.int64)]

    @property
    def n_clusters(self) -> int:
        return int(self.node.shape[0])

    def use_linkage(self, linkage: str) -> None:
        """Link clusters by ``linkage`` from the next round on (SCC's
        ``centroid-average``). The contracted graph holds the summed edge weights
        under every linkage but ``single`` and ``mean``, so only those two are
        refused; the kept best neighbours are dropped."""
        if linkage in ("single", "mean") or self.linkage in ("single", "mean"):
            raise ValueError(f"cannot switch linkage from {self.linkage!r} to {linkage!r}")
        if linkage == "centroid" and self.sums is None:
            raise ValueError("centroid linkage needs the vectors")
        self.linkage = linkage
        self._nearest, self._merged = None, None

    def link_values(self) -> NDArray[np.float64]:
        """Linkage of every stored edge, aligned with ``W.data``."""
        W = self.W
        counts = np.diff(W.indptr)
        # average and single read each entry once: whole arrays, the row sizes repeated
        # along each row rather than gathered per entry (a quarter of the rounds' time)
        if self.linkage == "average":
            # sizes as floats: the same products (integers below 2^53), no conversion pass
            size = self.size.astype(np.float64)
            average: NDArray[np.float64] = W.data / (np.repeat(size, counts) * size[W.indices])
            return average
        if self.linkage == "single":
            single: NDArray[np.float64] = W.data.copy()
            return single
        if self.linkage == "mean":
            return _unpacked_mean(W.data)
        src = np.repeat(np.arange(W.shape[0]), counts)
        return self._values_at(np.arange(W.data.shape[0]), src)

    def _values_at(self, pos: NDArray[np.int64], src: NDArray[np.int64]) -> NDArray[np.float64]:
        """Linkage of the stored edges at ``pos`` of ``W.data``, whose rows are ``src``."""
        W = self.W
        cols = W.indices[pos]
        if self.linkage == "average":
            # Sparse average linkage: edge sums over |A||B|, absent pairs count 0 (§4.1.1).
            average: NDArray[np.float64] = W.data[pos] / (self.size[src] * self.size[cols])
            return average
        if self.linkage == "single":
            single: NDArray[np.float64] = W.data[pos]
            return single
        if self.linkage == "mean":
            return _unpacked_mean(W.data[pos])
        S = self.sums
        norms = self._norms
        # centroid linkage: both callers (SCC, MBSCC) pass the vectors
        assert S is not None and norms is not None
        dots = np.empty(src.shape[0])
        # Edges in chunks of about 4M floats: gathering every edge's two rows at once
        # held E x d x 2 floats (4 GB for 25k edges of 10,000-d sparse input densified).
        step = max(1, (1 << 22) // max(S.shape[1], 1))
        for s in range(0, src.shape[0], step):
            r, c = src[s : s + step], cols[s : s + step]
            dots[s : s + step] = np.einsum("ij,ij->i", S[r], S[c])
        centroid: NDArray[np.float64] = dots / np.maximum(norms[src] * norms[cols], 1e-300)
        return centroid

    def nearest(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Best neighbour (index into current clusters) and its linkage, per cluster.

        Ties break by the neighbour's node id, ascending (DESIGN, Determinism):
        current clusters are kept sorted by node id, so the lowest column wins.
        A round that merges nothing leaves every answer as it was, and a merge changes
        only the rows of the merged clusters and of their neighbours (a linkage
        depends on its two clusters alone), so with centroid linkage, whose values
        cost a d-dimensional product each, answers are kept between rounds and only
        those rows are recomputed (:meth:`_update_nearest`).
        """
        if self._nearest is None:
            self._nearest = best_neighbors(self.W, self.link_values())
        elif self._merged is not None:
            self._update_nearest(self._merged)
        self._merged = None
        nn, best = self._nearest
        return nn.copy(), best.copy()

    def _update_nearest(self, merged: NDArray[np.int64]) -> None:
        """Bring the kept best neighbours up to date after one contraction.

        Rows of merged clusters, and rows whose best neighbour merged (its linkage
        may have fallen), are recomputed in full. Every other row only gains the
        edges to merged clusters, whose values the merged rows have just given
        (linkages are symmetric): it takes the best of those and its old answer,
        ties to the lower column.
        """
        assert self._nearest is not None  # nearest() calls this only with kept answers
        nn, best = self._nearest
        m = self.n_clusters
        is_merged = np.zeros(m, bool)
        is_merged[merged] = True
        is_full = is_merged | ((nn >= 0) & is_merged[np.maximum(nn, 0)])
        full = np.flatnonzero(is_full)
        sub_nn, sub_best, src, cols, values = self._best_of_rows(full)
        nn[full], best[full] = sub_nn, sub_best
        # reverse edges x -> merged cluster, for rows x not recomputed
        back = is_merged[src] & ~is_full[cols]
        x, to, v = cols[back], src[back], values[back]
        if x.size == 0:
            return
        order = np.lexsort((to, -v, x))
        x, to, v = x[order], to[order], v[order]
        first = np.r_[True, x[1:] != x[:-1]]
        x, to, v = x[first], to[first], v[first]
        better = (v > best[x]) | ((v == best[x]) & ((to < nn[x]) | (nn[x] < 0)))
        nn[x[better]], best[x[better]] = to[better], v[better]

    def _best_of_rows(
        self, rows: NDArray[np.int64]
    ) -> tuple[
        NDArray[np.int64],
        NDArray[np.float64],
        NDArray[np.int64],
        NDArray[np.integer[Any]],
        NDArray[np.float64],
    ]:
        """Best neighbour of the clusters ``rows`` (shape (r,)) alone.

        Returns
        -------
        nn, best : ndarray, shape (r,)
            As :func:`best_neighbors` for those rows.
        src, cols, values : ndarray, shape (e,)
            Their stored edges (row, column) and linkages, row after row.
        """
        pos, slot = row_entries(self.W.indptr, rows)
        src, cols = rows[slot], self.W.indices[pos]
        values = self._values_at(pos, src)
        indptr = np.r_[0, np.cumsum(np.bincount(slot, minlength=rows.size))]
        block = sparse.csr_array((values, cols, indptr), shape=(rows.size, self.n_clusters))
        nn, best = best_neighbors(block, values)
        return nn, best, src, cols, values

    def _decisions(
        self, given: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] | None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Best neighbour and linkage per cluster, ``given`` ones as given.

        Without a kept answer to carry (average and single linkage start each round
        afresh), only the other rows are computed when their edges are under
        ``ROWS_ALONE_BELOW`` of the graph's: gathering a row's edges costs about twice
        a whole-array pass.

        Parameters
        ----------
        given : tuple (rows, nn, best) of ndarrays of shape (r,), or None

        Returns
        -------
        nn : ndarray of int64, shape (m,)
        best : ndarray of float64, shape (m,)
        """
        if given is None:
            return self.nearest()
        rows, to, value = given
        need = np.ones(self.n_clusters, bool)
        need[rows] = False
        alone = self.sums is None and (
            int(np.diff(self.W.indptr)[need].sum()) < ROWS_ALONE_BELOW * self.W.nnz
        )
        if alone:
            nn = np.full(self.n_clusters, -1, np.int64)
            best = np.full(self.n_clusters, -np.inf)
            todo = np.flatnonzero(need)
            nn[todo], best[todo] = self._best_of_rows(todo)[:2]
        else:
            nn, best = self.nearest()
        nn[rows], best[rows] = to, value
        return nn, best

    def merge(
        self,
        keep: Callable[[NDArray[np.int64], NDArray[np.float64]], NDArray[np.bool_]],
        given: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] | None = None,
    ) -> int:
        """One round: join clusters linked by kept best-neighbour edges.

        Parameters
        ----------
        keep : callable (nn, best) -> ndarray of bool, shape (m,)
            Which best-neighbour edges count for this round.
        given : tuple (rows, nn, best) of ndarrays of shape (r,), optional
            Best-neighbour decisions of the clusters ``rows`` taken as they are,
            instead of computed (MBSCC's marking reuses earlier decisions of
            unmarked clusters); ``nn`` indexes the current clusters.

        Returns
        -------
        int
            Number of new clusters formed (0: the level repeats the last one).
        """
        self.level += 1
        nn, best = self._decisions(given)
        self.last_decisions = (nn, best)
        kept = keep(nn, best) & (nn >= 0)
        m = self.n_clusters
        src = np.flatnonzero(kept)
        if src.size == 0:
            return 0
        E = sparse.csr_array((np.ones(src.size), (src, nn[src])), shape=(m, m))
        n_comp, label = csgraph.connected_components(E, directed=True, connection="weak")
        comp_size = np.bincount(label, minlength=n_comp)
        if n_comp == m:
            return 0
        # weakest kept link inside each component = the linkage it formed at
        formed = np.full(n_comp, np.inf)
        np.minimum.at(formed, label[src], best[src])
        first = np.full(n_comp, m, np.int64)  # each component's first (lowest-id) cluster
        np.minimum.at(first, label, np.arange(m))
        new_node = self.node[first]
        merged = np.flatnonzero(comp_size > 1)
        new_node[merged] = self._n_nodes + np.arange(merged.size)
        self._n_nodes += merged.size
        self._scores.append(formed[merged])
        self._levels.append(np.full(merged.size, self.level, np.int64))
        members = np.flatnonzero(comp_size[label] > 1)
        self._links.append((self.node[members], new_node[label[members]]))
        self._contract(label, n_comp, new_node)
        return int(merged.size)

    def merge_exact(self, tau: float) -> int:
        """One level that ends at average-linkage HAC's clusters at ``tau``.

        SCC's round joins whole components of best-neighbour edges, so a chain
        a - b - c forms at tau even when the linkage of {a, b} to c has fallen below
        it. Here reciprocal best pairs linked at ``tau`` or more merge, their
        linkages are updated, and again, until no link of ``tau`` or more is left.
        Average and single linkage are reducible (the linkage of a merged pair to any
        third cluster is at most the larger of its parts' linkages to it), so merging
        reciprocal pairs in any order makes the merges of HAC (the nearest-neighbour
        chain argument, dissertation §2.6.2 on RecipNN), and when none is left the
        best link is below ``tau``: the clusters are HAC's at ``tau``, up to the order
        of ties. Two guards (:meth:`_exact_merges`): a group of clusters all linked
        to each other at their common best linkage (copies of one string) merges at
        once, not a pair per pass; and where rounding leaves the best links in a
        cycle with no reciprocal pair, the single best link merges. The level
        records one node per cluster it formed, its score the weakest merge inside
        it, as :meth:`merge` does.

        Returns
        -------
        int
            Number of new clusters formed (0: the level repeats the last one).
        """
        if self.linkage not in ("average", "single"):
            raise ValueError(f"exact levels need a reducible linkage, not {self.linkage!r}")
        self.level += 1
        start_node = self.node
        start_of_point = self._point_cluster.copy()
        weakest = np.full(self.n_clusters, np.inf)  # per current cluster, this level
        while True:
            found = self._exact_merges(tau)
            if found is None:
                break
            label, n_comp, merge_at = found
            w = np.full(n_comp, np.inf)
            np.minimum.at(w, label, np.minimum(weakest, merge_at))
            # a merged group takes the lowest node id of its members: current clusters
            # stay sorted by node id without new ids until the level ends
            new_node = np.full(n_comp, np.iinfo(np.int64).max)
            np.minimum.at(new_node, label, self.node)
            order = np.argsort(new_node, kind="stable")
            self._contract(label, n_comp, new_node)
            weakest = w[order]
        cur = np.empty(start_node.shape[0], np.int64)
        cur[start_of_point] = self._point_cluster  # each level-start cluster's cluster now
        counts = np.bincount(cur, minlength=self.n_clusters)
        merged = np.flatnonzero(counts > 1)
        if merged.size == 0:
            return 0
        new_id = self.node.copy()
        new_id[merged] = self._n_nodes + np.arange(merged.size)
        self._n_nodes += merged.size
        self._scores.append(weakest[merged])
        self._levels.append(np.full(merged.size, self.level, np.int64))
        members = np.flatnonzero(counts[cur] > 1)
        self._links.append((start_node[members], new_id[cur[members]]))
        # relabel in place (no contraction): the new ids sort last, as after merge()
        self._contract(np.arange(self.n_clusters), self.n_clusters, new_id)
        return int(merged.size)

    def _exact_merges(
        self, tau: float
    ) -> tuple[NDArray[np.int64], int, NDArray[np.float64]] | None:
        """One pass of :meth:`merge_exact`: which current clusters merge now.

        Returns
        -------
        None when no link of ``tau`` or more is left, else
        label : ndarray of int64, shape (m,)
            New cluster of each current one.
        n_comp : int
        merge_at : ndarray of float64, shape (m,)
            The linkage each cluster merges at (inf for one that does not).
        """
        m = self.n_clusters
        values = self.link_values()
        nn, best = best_neighbors(self.W, values)
        if not (best >= tau).any():
            return None
        rows = np.repeat(np.arange(m), np.diff(self.W.indptr))
        cols = self.W.indices.astype(np.int64)
        # edges at both ends' best linkage (reciprocal best pairs, ties included)
        tied = (rows < cols) & (values >= tau) & (values == best[rows]) & (values == best[cols])
        r, c = rows[tied], cols[tied]
        n_tied, group = csgraph.connected_components(
            sparse.coo_array((np.ones(r.size), (r, c)), shape=(m, m)), directed=False
        )
        size = np.bincount(group, minlength=n_tied)
        clique = (size > 1) & (np.bincount(group[r], minlength=n_tied) == size * (size - 1) // 2)
        # outside such groups, the reciprocal pairs (each is the other's best, ties to
        # the lower id); a cycle of best links that rounding left without one: the best
        i = np.arange(m)
        pair = (nn >= 0) & (best >= tau) & (nn[np.maximum(nn, 0)] == i) & (i < nn)
        pair &= ~clique[group]
        src = np.flatnonzero(pair)
        keep = clique[group[r]]
        r, c = np.r_[r[keep], src], np.r_[c[keep], nn[src]]
        if r.size == 0:
            top = int(np.argmax(best))
            r, c = np.array([top]), nn[[top]]
        at = values[tied][keep]
        link = np.r_[at, best[r[at.size :]]]
        n_comp, label = csgraph.connected_components(
            sparse.coo_array((np.ones(r.size), (r, c)), shape=(m, m)), directed=False
        )
        merge_at = np.full(m, np.inf)
        np.minimum.at(merge_at, r, link)
        np.minimum.at(merge_at, c, link)
        return label.astype(np.int64), int(n_comp), merge_at

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
        merged = np.flatnonzero(np.bincount(lab, minlength=n_comp) > 1)
        self.W = _contract_graph(self.W, lab, n_comp, self.linkage == "single", self._positive)
        self.size = np.bincount(lab, weights=self.size, minlength=n_comp).astype(np.int64)
        if self.sums is not None:
            self._sum_members(lab, n_comp, merged)
        self.node = new_node[order]
        self._carry_nearest(lab, merged)

    def _sum_members(self, lab: NDArray[np.int64], n_comp: int, merged: NDArray[np.int64]) -> None:
        """Vector sums (and norms) of the new clusters; only merged ones are added up.

        ``lab`` maps old cluster -> new cluster, shape (m,); ``merged`` lists the new
        clusters of two or more old ones.
        """
        assert self.sums is not None and self._norms is not None  # _contract checks
        first = np.full(n_comp, lab.shape[0], np.int64)
        np.minimum.at(first, lab, np.arange(lab.shape[0]))
        sums, norms = self.sums[first], self._norms[first]
        rest = np.flatnonzero(first[lab] != np.arange(lab.shape[0]))
        if rest.size:
            rest = rest[np.argsort(lab[rest], kind="stable")]
            to = lab[rest]
            starts = np.flatnonzero(np.r_[True, to[1:] != to[:-1]])
            sums[to[starts]] += np.add.reduceat(self.sums[rest], starts, axis=0)
            norms[merged] = np.linalg.norm(sums[merged], axis=1)
        self.sums, self._norms = sums, norms

    def _carry_nearest(self, lab: NDArray[np.int64], merged: NDArray[np.int64]) -> None:
        """Carry best neighbours over a contraction; :meth:`nearest` redoes the rest.

        A row keeps its answer unless it or one of its neighbours merged: its
        linkages are unchanged, and the relabelling keeps the node-id order of the
        unmerged clusters, so the tie rule picks the same one.
        """
        if self._nearest is None or self._merged is not None or self.sums is None:
            # two contractions without a look: start afresh; average / single
            # linkages are one read per edge, so kept answers do not pay there (SCC
            # at 50k, average linkage: the same time either way, alternated runs)
            self._nearest = None
            return
        nn, best = self._nearest
        old_row = np.empty(self.n_clusters, np.int64)
        old_row[lab] = np.arange(lab.shape[0])  # one old row per new cluster
        nn = np.where(nn[old_row] >= 0, lab[np.maximum(nn[old_row], 0)], -1)
        self._nearest = (nn, best[old_row].copy())
        self._merged = merged

    def finish(
        self, algorithm: str, params: dict[str, object], n_points: int, join: bool = True
    ) -> Hierarchy:
        """The hierarchy built so far, joined under one root if several remain
        (``join=False``: left as a forest, each top spanning levels up to the last)."""
        from er.cluster._hierarchy import Hierarchy

        if join and self.n_clusters > 1:
            _, best = self.nearest()
            top = float(np.max(best)) if np.isfinite(best).any() else 0.0
            # Clusters with no edge between them have average linkage 0 (§4.1.1).
            self._scores.append(np.array([min(top, 0.0) if self.linkage != "centroid" else top]))
            self._levels.append(np.array([self.level + 1]))
            self._links.append((self.node, np.full(self.n_clusters, self._n_nodes)))
            self._n_nodes += 1
            self.level += 1
        parent = np.full(self._n_nodes, -1, np.int64)
        for child, par in self._links:
            parent[child] = par
        level_lo = np.concatenate(self._levels).astype(np.int32)
        level_hi = np.where(parent >= 0, level_lo[np.maximum(parent, 0)] - 1, self.level)
        children = np.flatnonzero(parent >= 0)
        edges = np.stack([children, parent[children]], axis=1)
        return Hierarchy(
            n_points=n_points,
            edges=edges,
            score=np.concatenate(self._scores),
            level_lo=level_lo,
            level_hi=level_hi.astype(np.int32),
            algorithm=algorithm,
            params=params,
        )


def _unpacked_mean(packed: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean edge weight of packed entries (PACK * count + sum(w + 1))."""
    count = np.floor(packed / PACK)
    mean: NDArray[np.float64] = (packed - PACK * count) / count - 1.0
    return mean
