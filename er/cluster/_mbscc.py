"""MBSCC: mini-batch SCC with an incrementally maintained k-NN graph and stable ids.

Each ``partial_fit`` adds a mini-batch: the new points get their k nearest
neighbours, and old points whose top-k a new point enters have their lists updated
(dissertation §4.2, U(0) = new points and their neighbours); the levels are then
brought up to date and the change is returned as a delta in stable node ids: a
cluster whose set of points did not change keeps its id.

Marking modes
-------------
``exact`` re-derives every level from the maintained graph, so after any sequence of
mini-batches the structure equals batch SCC on the same points with the same
thresholds. ``paper`` (default) follows Alg. 10: U(0) holds the new points, their
neighbours and the old points whose neighbour lists changed; only clusters holding a
marked point choose their nearest neighbour afresh, the others keep the previous
batch's choice (its target cluster and linkage value); marks climb to the new
parents, to the members of the previous parents (their siblings) and to the
previous parents' nearest neighbours (Eq. 4.10). Early stopping (§4.2.1) is not
used: re-deriving an unchanged level here costs less than comparing it.

References
----------
Monath et al., KDD 2021; dissertation ch. 4, Alg. 10.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from er.cluster._graph import (
    check_neighbors,
    normalize_rows,
    row_entries,
)
from er.cluster._hierarchy import Hierarchy
from er.cluster._params import Interval, Options, get_params, validate_params
from er.cluster._rounds import LINKAGES, Agglomerator
from er.cluster._scc import thresholds
from er.exceptions import ConfigError

__all__ = ["MBSCC"]


from er.cluster._knn_lists import _KnnLists
from er.cluster._snapshot import _find_sorted, _Snapshot


class MBSCC:
    """Mini-batch SCC (``partial_fit``), equal to SCC on the same points in exact mode.

    Parameters
    ----------
    n_levels : int, default 30
    schedule : {"geometric", "linear"}, default "geometric"
    tau_max, tau_min : float, default 1.0 and 0.0
        Fixed thresholds: levels must mean the same thing from batch to batch.
    linkage : {"average", "single", "centroid", "mean"}, default "average"
    k : int, default 10
    marking : {"paper", "exact"}, default "paper"
        ``exact`` re-derives every level: the result equals SCC on the same points.
        ``paper`` recomputes the nearest neighbour only of marked clusters (Eq.
        4.7-4.12) and reuses the last batch's choice for the others.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        Current structure in the `er cluster` contract (points 0..n-1 by arrival).
    delta_ : ClusteringDelta
        What the last call changed, in stable node ids (see ``node_ids_``).
    node_ids_ : ndarray of int64, shape (hierarchy_.n_nodes,)
        Stable id of each node of ``hierarchy_``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_levels": [Interval(int, 1, None)],
        "schedule": [Options(("geometric", "linear"))],
        "tau_max": [Interval(float, None, None)],
        "tau_min": [Interval(float, None, None)],
        "linkage": [Options(LINKAGES)],
        "k": [Interval(int, 1, None)],
        "marking": [Options(("paper", "exact"))],
    }
    algorithm = "mbscc"
    # only on an instance unpickled from before the member lists (see _upgrade_keys)
    _ids: dict[bytes, int]

    def __init__(
        self,
        *,
        n_levels: int = 30,
        schedule: str = "geometric",
        tau_max: float = 1.0,
        tau_min: float = 0.0,
        linkage: str = "average",
        k: int = 10,
        marking: str = "paper",
    ) -> None:
        self.n_levels = n_levels
        self.schedule = schedule
        self.tau_max = tau_max
        self.tau_min = tau_min
        self.linkage = linkage
        self.k = k
        self.marking = marking

    def fit(self, X: NDArray[np.floating]) -> MBSCC:
        """Start over with the rows of X as the first mini-batch."""
        return self._fit(X, partial=False)

    def partial_fit(
        self,
        X: NDArray[np.floating],
        neighbors: tuple[NDArray[Any], NDArray[Any]] | None = None,
    ) -> MBSCC:
        """Add the rows of X as the next mini-batch.

        Parameters
        ----------
        X : ndarray of shape (b, d)
        neighbors : tuple (idx, sim) of ndarrays of shape (b, w), optional
            The new rows' nearest neighbours among all points so far, from a k-NN
            index (``er.ann.batch_neighbors``): ``idx`` holds global point indices
            (earlier points 0..n0-1, this batch n0..n0+b-1, never the row itself,
            -1 for none), ``sim`` their cosine similarities. MBSCC keeps the top k
            per new row and updates the old points' lists with the reverse edges.
            With the complete exact lists the result equals the default, where
            MBSCC searches exactly itself (O(b n d) per batch). Given with the
            first batch, and the linkage is not centroid, MBSCC keeps no copy of the
            points: every later batch must bring its neighbours too.
        """
        return self._fit(X, partial=True, neighbors=neighbors)

    def _fit(
        self,
        X: NDArray[np.floating],
        partial: bool,
        neighbors: tuple[NDArray[Any], NDArray[Any]] | None = None,
    ) -> MBSCC:
        validate_params(self)
        rows = normalize_rows(np.asarray(X))
        if not partial or not hasattr(self, "_knn"):
            # given neighbours and a linkage that reads no vectors: the caller's index
            # holds the points, a copy here would only double the memory
            keep = not partial or neighbors is None or self.linkage == "centroid"
            self._knn = _KnnLists(self.k, rows.shape[1], keep_points=keep)
            self._prev = _Members.from_sets({})  # the last batch's clusters, by stable id
            self._key_format = "members"
            self._point_ids = np.zeros(0, np.int64)
            self._next_id = 0
            self._state = _Snapshot.empty()
            self._rounds = None
        elif rows.shape[1] != self._knn.dim:
            raise ConfigError(
                f"X has {rows.shape[1]} columns; this MBSCC was fitted on {self._knn.dim}."
            )
        if neighbors is not None:  # checked before any state changes
            n0 = self._knn._n
            neighbors = check_neighbors(*neighbors, n0, n0 + rows.shape[0])
        elif not self._knn.keep_points:
            raise ConfigError(
                "this MBSCC keeps no points (its first batch came with neighbours): "
                "pass neighbors= with every batch."
            )
        self._point_ids = np.r_[self._point_ids, self._take_ids(rows.shape[0])]
        marked = self._knn.add(rows, neighbors)
        taus = thresholds(self.tau_max, self.tau_min, self.n_levels, self.schedule)
        vectors = self._knn.points if self.linkage == "centroid" else None
        agg = Agglomerator(self._knn.graph(), self.linkage, vectors)
        if self.marking == "exact" or not partial:
            marked = np.ones_like(marked)
        self._rounds = _run_marked(agg, taus, marked, getattr(self, "_rounds", None))
        self.hierarchy_ = agg.finish(self.algorithm, get_params(self), self._knn._n)
        M = self.hierarchy_.leaf_membership()
        self.node_ids_ = self._stable_ids(self.hierarchy_, M)
        state = _Snapshot.of(self.hierarchy_, self.node_ids_, sizes=np.diff(M.indptr))
        self.delta_ = state.delta_from(self._state, self.algorithm)
        self._state = state
        return self

    def _take_ids(self, count: int) -> NDArray[np.int64]:
        ids = np.arange(self._next_id, self._next_id + count, dtype=np.int64)
        self._next_id += count
        return ids

    def _stable_ids(self, h: Hierarchy, M: Any) -> NDArray[np.int64]:
        """Stable id per node: points keep theirs; a cluster continues the last batch's.

        A cluster with the same point set as a cluster of the previous batch keeps its
        id. Otherwise it continues the previous cluster ``p``, among the previous
        parents of its children, that shares the most points with it, provided it
        keeps more than half of ``p``'s old points: a cluster that gains a point, or
        swaps a few, keeps its id, so the delta updates its size instead of retiring
        it and re-adding every edge below and above it. Each old id continues at most
        once; the rest get new ids (never reused). Children come before parents (by
        first level), so a child's id is settled before its parent looks at it.

        ``M`` is ``h.leaf_membership()``, shape (n_nodes, n_points).
        """
        self._upgrade_keys()
        n, ids = h.n_points, np.full(h.n_nodes, -1, np.int64)
        ids[:n] = self._point_ids
        M.sort_indices()
        now = _Members.of(M, n)
        prev = self._prev
        same_new, same_old = now.same_sets(prev)
        ids[n + same_new] = prev.ids[same_old]
        self._continue_ids(h, ids, now, prev.ids[same_old])
        now.ids = ids[n:].copy()
        self._prev = now.sorted_by_id()
        return ids

    def _upgrade_keys(self) -> None:
        """Pickles from before kept each live cluster's points as int64 bytes (older
        ones: every set ever seen, as int32 bytes); rebuild the member lists."""
        if getattr(self, "_key_format", None) == "members":
            return
        live = set(self._state.ids.tolist())
        dtype = np.int64 if getattr(self, "_key_format", None) == "int64-live" else np.int32
        sets = {
            i: np.sort(np.frombuffer(key, dtype)).astype(np.int64)
            for key, i in self._ids.items()
            if i in live
        }
        self._prev = _Members.from_sets(sets)
        del self._ids
        self._key_format = "members"

    def _continue_ids(
        self, h: Hierarchy, ids: NDArray[np.int64], now: _Members, used: NDArray[np.int64]
    ) -> None:
        """Fill the clusters left at -1 in ``ids``: continued old ids, else new ones.

        Level by level from the bottom (a child's id is settled before its parent
        looks at it). Clusters formed at one level are disjoint, and continuing an old
        cluster takes more than half of its points, so no two clusters of one level
        can want the same old id: a level is decided at once.
        """
        n = h.n_points
        todo = np.flatnonzero(ids < 0)
        if todo.size == 0:
            return
        prev = self._prev
        old_child, old_parent = self._state.edges[:, 0], self._state.edges[:, 1]
        edges = np.asarray(h.edges, np.int64).reshape(-1, 2)
        edges = edges[ids[edges[:, 1]] < 0]
        level = h.level_lo
        todo = todo[np.argsort(level[todo], kind="stable")]
        edges = edges[np.argsort(level[edges[:, 1]], kind="stable")]
        levels = np.unique(level[todo])
        cut_v = np.searchsorted(level[todo], levels, side="right")
        cut_e = np.searchsorted(level[edges[:, 1]], levels, side="right")
        # old parents are the last batch's clusters: flags by their row in ``prev``,
        # so memory follows the live clusters, not the largest id ever issued
        taken = np.zeros(prev.ids.size, bool)  # continued already
        taken[prev.row_of(used)] = True
        span = np.int64(max(prev.ids.size, 1))
        size = np.diff(now.indptr)
        for i in range(levels.size):
            vs = todo[(cut_v[i - 1] if i else 0) : cut_v[i]]
            at = edges[(cut_e[i - 1] if i else 0) : cut_e[i]]
            q = _lookup(old_child, old_parent, ids[at[:, 0]])
            at, row = at[q >= 0], prev.row_of(q[q >= 0])  # rows of prev: by id order
            # not continued yet, and more than half of q inside v needs |q| < 2 |v|
            ok = ~taken[row] & (prev.size[row] < 2 * size[at[:, 1] - n])
            code = np.unique(at[ok, 1] * span + row[ok])  # (v, row of q), sorted
            if code.size:
                rows = code % span
                won = self._continue_level(ids, code // span, prev.ids[rows], rows, now, n)
                taken[won] = True
            fresh = vs[ids[vs] < 0]
            ids[fresh] = self._take_ids(fresh.size)

    def _continue_level(
        self,
        ids: NDArray[np.int64],
        v: NDArray[np.int64],
        q: NDArray[np.int64],
        rows: NDArray[np.int64],
        now: _Members,
        n: int,
    ) -> NDArray[np.int64]:
        """Give clusters ``v`` (one level) the candidate old id ``q`` they overlap most.

        ``(v[i], q[i])`` are the candidate pairs, sorted by v then q; ``rows[i]`` is
        ``q[i]``'s row in ``self._prev``. Returns the rows of the old ids continued.
        """
        prev = self._prev
        overlap = _level_overlaps(now, v - n, prev, rows, n)
        keep = 2 * overlap > prev.size[rows]
        v, q, rows, overlap = v[keep], q[keep], rows[keep], overlap[keep]
        if v.size == 0:
            return rows
        # per cluster the largest overlap, ties to the lower old id
        order = np.lexsort((q, -overlap, v))
        v, q, rows = v[order], q[order], rows[order]
        first = np.r_[True, v[1:] != v[:-1]]
        ids[v[first]] = q[first]
        return rows[first]


class _Members:
    """Point sets of clusters, CSR-like, with 128-bit set hashes for equality.

    Attributes
    ----------
    ids : ndarray of int64, shape (c,)
        Stable id of each row (set once the ids are known).
    indptr : ndarray of int64, shape (c + 1,)
    indices : ndarray of int64, shape (nnz,)
        Points of each row, sorted.
    hashes : ndarray of uint64, shape (c, 2)
    """

    def __init__(
        self,
        ids: NDArray[np.int64],
        indptr: NDArray[np.int64],
        indices: NDArray[np.int64],
        hashes: NDArray[np.uint64] | None = None,
    ) -> None:
        self.ids, self.indptr, self.indices = ids, indptr, indices
        self.size = np.diff(indptr)
        self.hashes = _set_hashes(indices, indptr) if hashes is None else hashes

    @classmethod
    def of(cls, M: Any, first: int) -> _Members:
        """Rows ``first..`` of a sorted CSR membership (the clusters of a hierarchy)."""
        indptr = M.indptr[first:].astype(np.int64)
        indices = M.indices[indptr[0] : indptr[-1]].astype(np.int64)
        return cls(np.full(indptr.size - 1, -1, np.int64), indptr - indptr[0], indices)

    @classmethod
    def from_sets(cls, sets: dict[int, NDArray[np.int64]]) -> _Members:
        ids = np.array(sorted(sets), np.int64)
        parts = [sets[i] for i in ids.tolist()]
        indptr = np.r_[0, np.cumsum([p.size for p in parts])].astype(np.int64)
        indices = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return cls(ids, indptr, indices)

    def sorted_by_id(self) -> _Members:
        order = np.argsort(self.ids, kind="stable")
        pos, _ = row_entries(self.indptr, order)
        indptr = np.r_[0, np.cumsum(self.size[order])].astype(np.int64)
        return _Members(self.ids[order], indptr, self.indices[pos], self.hashes[order])

    def row_of(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Rows of known ids (``self.ids`` sorted)."""
        return np.searchsorted(self.ids, ids)

    def same_sets(self, other: _Members) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(rows of self, rows of other) holding equal point sets."""
        a = np.c_[self.hashes, self.size.astype(np.uint64)]
        b = np.c_[other.hashes, other.size.astype(np.uint64)]
        rows = np.r_[a, b]
        # equal sets sit side by side once sorted on the first hash (the order of a
        # sort on every column), unless two different sets share it (about 2^-64 a
        # pair): then sort on every column
        order = np.argsort(rows[:, 0], kind="stable")
        both = rows[order]
        equal = (both[1:] == both[:-1]).all(axis=1)
        if np.count_nonzero(both[1:, 0] == both[:-1, 0]) > np.count_nonzero(equal):
            order = np.lexsort(rows.T[::-1])
            both = rows[order]
            equal = (both[1:] == both[:-1]).all(axis=1)
        lo, hi = order[:-1][equal], order[1:][equal]
        mine = np.minimum(lo, hi)
        theirs = np.maximum(lo, hi) - a.shape[0]
        cross = (mine < a.shape[0]) & (theirs >= 0)
        return mine[cross], theirs[cross]


def _splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """A fixed 64-bit mixing of integers (Steele et al.'s SplitMix64 finaliser)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _set_hashes(indices: NDArray[np.int64], indptr: NDArray[np.int64]) -> NDArray[np.uint64]:
    """(c, 2) order-free hashes of each row's point set: sums of mixed point ids.

    Two different sets collide with probability about 2^-128 per pair; the sizes are
    compared as well.
    """
    out = np.zeros((indptr.size - 1, 2), np.uint64)
    if indices.size == 0:
        return out
    p = indices.astype(np.uint64) * np.uint64(2)
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    starts = indptr[nonempty]
    with np.errstate(over="ignore"):
        for j in range(2):
            out[nonempty, j] = np.add.reduceat(_splitmix64(p + np.uint64(j)), starts)
    return out


def _level_overlaps(
    a: _Members, a_rows: NDArray[np.int64], b: _Members, b_rows: NDArray[np.int64], n_points: int
) -> NDArray[np.int64]:
    """|a[a_rows[i]] & b[b_rows[i]]| per pair i, shape (pairs,), for disjoint a-sets.

    The clusters ``a_rows`` belong to one level, so no point is in two of them: an
    owner array (point -> a-row) answers "is this point of b's set in the paired
    a-set" with one gather per point of the b-sets, no sorting.
    """
    owner = np.full(n_points, -1, np.int64)
    rows = np.unique(a_rows)
    pos, slot = row_entries(a.indptr, rows)
    owner[a.indices[pos]] = rows[slot]
    pos, pair = row_entries(b.indptr, b_rows)
    hit = owner[b.indices[pos]] == a_rows[pair]
    return np.bincount(pair[hit], minlength=a_rows.size).astype(np.int64)


def _lookup(
    keys: NDArray[np.int64], values: NDArray[np.int64], at: NDArray[np.int64]
) -> NDArray[np.int64]:
    """values[i] where keys[i] == at (keys sorted), else -1; shape of ``at``."""
    pos = _find_sorted(keys, at)
    return pos if keys.size == 0 else np.where(pos >= 0, values[np.maximum(pos, 0)], -1)


class _Round:
    """One round's decisions, keyed by each input cluster's smallest point.

    Clusters of one level are disjoint, so the smallest point names a cluster; an
    unmarked cluster holds the same points as in the last batch.
    """

    def __init__(
        self,
        key: NDArray[np.int64],
        target: NDArray[np.int64],
        best: NDArray[np.float64],
        out: NDArray[np.int64],
    ) -> None:
        self.key, self.target, self.best = key, target, best  # per input cluster
        self.out = out  # (n,) smallest point of each point's output cluster

    # Point indices fit in int32 (below 2^31 points): a checkpoint stores them so, a
    # third less (the kept rounds were 22 of a 38 MB checkpoint at 40k mentions), and
    # they come back as int64, equal.
    _POINTS: ClassVar[tuple[str, ...]] = ("key", "target", "out")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if max(int(np.abs(state[a]).max(initial=0)) for a in self._POINTS) < 2**31:
            for name in self._POINTS:
                state[name] = state[name].astype(np.int32)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in self._POINTS:
            state[name] = np.asarray(state[name], np.int64)
        self.__dict__.update(state)

    def lookup(
        self, keys: NDArray[np.int64]
    ) -> tuple[NDArray[np.bool_], NDArray[np.int64], NDArray[np.float64]]:
        """(found, target, best) of the clusters named by ``keys``; shape of ``keys``.

        A point-indexed map instead of a sorted search: O(n) plain array work per
        round, where sorting every round's keys cost more than the round at 100k.
        """
        if self.key.size == 0:
            none = np.zeros(keys.shape, bool)
            return none, np.full(keys.shape, -1, np.int64), np.full(keys.shape, -np.inf)
        row = np.full(self.out.size + 1, -1, np.int64)
        row[self.key] = np.arange(self.key.size)
        pos = row[np.minimum(keys, self.out.size)]
        return pos >= 0, self.target[np.maximum(pos, 0)], self.best[np.maximum(pos, 0)]


def _smallest_point(point_cluster: NDArray[np.int64], m: int) -> NDArray[np.int64]:
    first = np.full(m, np.iinfo(np.int64).max)
    np.minimum.at(first, point_cluster, np.arange(point_cluster.size))
    return first


def _run_marked(
    agg: Agglomerator,
    taus: NDArray[np.float64],
    marked: NDArray[np.bool_],
    previous: list[_Round] | None,
) -> list[_Round]:
    """SCC rounds where only clusters holding a marked point decide afresh (Alg. 10)."""
    rounds: list[_Round] = []
    n = marked.size
    pc = agg.point_cluster
    key = _smallest_point(pc, agg.n_clusters)  # a cluster's smallest point names it
    fresh = np.zeros(agg.n_clusters, bool)  # clusters holding a marked point
    fresh[pc[marked]] = True
    for r, tau in enumerate(taus):
        old = previous[r] if previous is not None and r < len(previous) else None
        given = None if old is None or fresh.all() else _reused(old, key, fresh, pc)

        def at_least(
            nn: NDArray[np.int64], best: NDArray[np.float64], tau: float = tau
        ) -> NDArray[np.bool_]:
            return best >= tau

        agg.merge(at_least, given)
        nn, best = agg.last_decisions
        target = np.where(nn >= 0, key[np.maximum(nn, 0)], -1)
        pc = agg.point_cluster
        out_key = _smallest_point(pc, agg.n_clusters)  # the next round's input names
        rounds.append(_Round(key, target, best, out_key[pc]))
        fresh = _next_marks(marked, pc, old, n, agg.n_clusters)
        marked, key = fresh[pc], out_key
    return rounds


def _reused(
    old: _Round, key: NDArray[np.int64], fresh: NDArray[np.bool_], pc: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Decisions unmarked clusters take from the last batch: (rows, nn, best).

    An unmarked cluster found in the last batch's round takes its neighbour (the
    cluster now holding that neighbour's smallest point) and linkage value, unless
    the neighbour has since joined it; the others decide afresh.

    Parameters
    ----------
    old : _Round
        The last batch's decisions in this round.
    key : ndarray of int64, shape (m,)
        Smallest point of each current cluster.
    fresh : ndarray of bool, shape (m,)
        Clusters holding a marked point.
    pc : ndarray of int64, shape (n,)
        Current cluster of each point.

    Returns
    -------
    rows, nn : ndarray of int64, shape (r,)
    best : ndarray of float64, shape (r,)
    """
    stale = np.flatnonzero(~fresh)
    found, target, value = old.lookup(key[stale])
    ok = found & (target >= 0)
    idx, to = stale[ok], pc[target[ok]]
    keep = to != idx
    return idx[keep], to[keep], value[ok][keep]


def _next_marks(
    marked: NDArray[np.bool_], out_pc: NDArray[np.int64], old: _Round | None, n: int, m: int
) -> NDArray[np.bool_]:
    """U(i+1) as a mask of the round's output clusters, shape (m,): new parents,
    previous parents' members and their nearest neighbours (Eq. 4.10)."""
    parents = np.zeros(m, bool)
    parents[out_pc[marked]] = True
    if old is not None:
        n_prev = old.out.size
        was_parent = np.zeros(n_prev, bool)  # keys of the previous parents of marked points
        was_parent[old.out[marked[:n_prev]]] = True
        parents[out_pc[:n_prev][was_parent[old.out]]] = True  # their members (siblings)
        found, target, _ = old.lookup(np.flatnonzero(was_parent))
        best_nbr = target[found & (target >= 0)]
        parents[out_pc[best_nbr[best_nbr < n]]] = True
    return parents
