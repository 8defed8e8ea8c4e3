"""Stable node ids across mini-batches: a cluster keeps or continues an earlier one's id.

Shared by MBSCC's whole-hierarchy steps and its per-component steps
(:mod:`er.cluster._components`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er._arrays import find_sorted
from er.cluster._graph import row_entries
from er.cluster._hierarchy import Hierarchy
from er.cluster._snapshot import _in_sorted

__all__ = ["match_ids"]


def match_ids(
    h: Hierarchy,
    M: Any,
    point_ids: NDArray[np.int64],
    prev: _Members,
    old_edges: NDArray[np.int64],
    take: Callable[[int], NDArray[np.int64]],
) -> tuple[NDArray[np.int64], _Members]:
    """Stable id per node: points keep theirs; a cluster continues an earlier one.

    A cluster with the same point set as a cluster of ``prev`` keeps its id.
    Otherwise it continues the earlier cluster ``p``, among the earlier parents of
    its children, that shares the most points with it, provided it keeps more than
    half of ``p``'s points: a cluster that gains a point, or swaps a few, keeps its
    id, so the delta updates its size instead of retiring it and re-adding every
    edge below and above it. Each old id continues at most once; the rest get new
    ids from ``take`` (never reused). Children come before parents (by first
    level), so a child's id is settled before its parent looks at it.

    Parameters
    ----------
    h : Hierarchy
        The new structure; its points are the points ``prev`` indexes.
    M : csr_array, shape (n_nodes, n_points)
        ``h.leaf_membership()``.
    point_ids : ndarray of int64, shape (n_points,)
        Stable id of each point.
    prev : _Members
        The earlier clusters, sorted by id, their points as indices of ``h``'s.
    old_edges : ndarray of int64, shape (e, 2)
        The earlier (child, parent) edges in stable ids, sorted by child.
    take : callable (count) -> ndarray of int64
        Issues that many new ids.

    Returns
    -------
    ids : ndarray of int64, shape (n_nodes,)
    now : _Members
        The new clusters with their ids, sorted by id (the next call's ``prev``).
    """
    n, ids = h.n_points, np.full(h.n_nodes, -1, np.int64)
    ids[:n] = point_ids
    M.sort_indices()
    now = _Members.of(M, n)
    same_new, same_old = now.same_sets(prev)
    ids[n + same_new] = prev.ids[same_old]
    _continue_ids(h, ids, now, prev, old_edges, prev.ids[same_old], take)
    now.ids = ids[n:].copy()
    return ids, now.sorted_by_id()


def _continue_ids(
    h: Hierarchy,
    ids: NDArray[np.int64],
    now: _Members,
    prev: _Members,
    old_edges: NDArray[np.int64],
    used: NDArray[np.int64],
    take: Callable[[int], NDArray[np.int64]],
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
    old_child, old_parent = old_edges[:, 0], old_edges[:, 1]
    edges = np.asarray(h.edges, np.int64).reshape(-1, 2)
    edges = edges[ids[edges[:, 1]] < 0]
    level = h.level_lo
    todo = todo[np.argsort(level[todo], kind="stable")]
    edges = edges[np.argsort(level[edges[:, 1]], kind="stable")]
    levels = np.unique(level[todo])
    cut_v = np.searchsorted(level[todo], levels, side="right")
    cut_e = np.searchsorted(level[edges[:, 1]], levels, side="right")
    # old parents are the earlier clusters: flags by their row in ``prev``, so
    # memory follows the live clusters, not the largest id ever issued
    taken = np.zeros(prev.ids.size, bool)  # continued already
    taken[prev.row_of(used)] = True
    span = np.int64(max(prev.ids.size, 1))
    size = np.diff(now.indptr)
    for i in range(levels.size):
        vs = todo[(cut_v[i - 1] if i else 0) : cut_v[i]]
        at = edges[(cut_e[i - 1] if i else 0) : cut_e[i]]
        q = _lookup(old_child, old_parent, ids[at[:, 0]])
        q_ok = (q >= 0) & _in_sorted(q, prev.ids)  # a parent outside prev (a root) stays
        at, row = at[q_ok], prev.row_of(q[q_ok])  # rows of prev: by id order
        # not continued yet, and more than half of q inside v needs |q| < 2 |v|
        ok = ~taken[row] & (prev.size[row] < 2 * size[at[:, 1] - n])
        code = np.unique(at[ok, 1] * span + row[ok])  # (v, row of q), sorted
        if code.size:
            rows = code % span
            won = _continue_level(ids, code // span, prev.ids[rows], rows, now, prev, n)
            taken[won] = True
        fresh = vs[ids[vs] < 0]
        ids[fresh] = take(fresh.size)


def _continue_level(
    ids: NDArray[np.int64],
    v: NDArray[np.int64],
    q: NDArray[np.int64],
    rows: NDArray[np.int64],
    now: _Members,
    prev: _Members,
    n: int,
) -> NDArray[np.int64]:
    """Give clusters ``v`` (one level) the candidate old id ``q`` they overlap most.

    ``(v[i], q[i])`` are the candidate pairs, sorted by v then q; ``rows[i]`` is
    ``q[i]``'s row in ``prev``. Returns the rows of the old ids continued.
    """
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
    pos = find_sorted(keys, at)
    return pos if keys.size == 0 else np.where(pos >= 0, values[np.maximum(pos, 0)], -1)
