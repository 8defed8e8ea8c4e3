"""A hierarchy's nodes and edges in stable ids, and the delta between two of them."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from er._arrays import find_sorted
from er.cluster._hierarchy import Hierarchy
from er.delta import ClusteringDelta

# ids below this pair into one int64 key, child * base + parent (floor of sqrt(2^63))
_KEY_BASE_MAX = 3_037_000_499


class _Snapshot:
    """A structure in stable ids, as arrays sorted by id: node attributes, parent edges.

    Comparing two snapshots is whole-array (searchsorted on the sorted arrays): at 100k points a
    per-node Python loop here cost more than the SCC rounds.
    """

    def __init__(
        self,
        ids: NDArray[np.int64],
        attrs: NDArray[np.int64],
        score: NDArray[np.float64],
        leaf: NDArray[np.bool_],
        edges: NDArray[np.int64],
    ) -> None:
        self.ids, self.attrs, self.score, self.leaf = ids, attrs, score, leaf
        self.edges = edges  # (e, 2) (child, parent), sorted by child then parent

    @classmethod
    def empty(cls) -> _Snapshot:
        z = np.zeros(0, np.int64)
        return cls(
            z, np.zeros((0, 3), np.int64), np.zeros(0), z.astype(bool), np.zeros((0, 2), np.int64)
        )

    @classmethod
    def of(cls, h: Hierarchy, ids: NDArray[np.int64], sizes: NDArray[np.int64]) -> _Snapshot:
        order = np.argsort(ids, kind="stable")
        attrs = np.stack([sizes, h.level_lo, h.level_hi], axis=1).astype(np.int64)
        leaf = np.arange(h.n_nodes) < h.n_points
        edges = np.asarray(ids)[np.asarray(h.edges, np.int64).reshape(-1, 2)]
        edges = edges[np.argsort(_edge_keys(edges, int(edges.max(initial=0)) + 1))]
        score = np.asarray(h.score, np.float64)
        return cls(ids[order], attrs[order], score[order], leaf[order], edges)

    def delta_from(self, old: _Snapshot, algorithm: str) -> ClusteringDelta:
        changed = np.ones(self.ids.size, bool)
        if old.ids.size:
            pos = np.minimum(np.searchsorted(old.ids, self.ids), old.ids.size - 1)
            a, b = old.score[pos], self.score
            changed = ~(
                (old.ids[pos] == self.ids)
                & (old.attrs[pos] == self.attrs).all(axis=1)
                & ((a == b) | (np.isnan(a) & np.isnan(b)))
            )
        return ClusteringDelta(
            node_id=self.ids[changed],
            is_leaf=self.leaf[changed],
            size=self.attrs[changed, 0],
            score=self.score[changed],
            level_lo=self.attrs[changed, 1],
            level_hi=self.attrs[changed, 2],
            retired=old.ids[~_in_sorted(old.ids, self.ids)],
            edges_added=_edge_difference(self.edges, old.edges),
            edges_retired=_edge_difference(old.edges, self.edges),
            algorithm=algorithm,
        )


def _edge_difference(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """Rows of a (sorted (e, 2) edges) that are not rows of b, in a's order."""
    if a.size == 0 or b.size == 0:
        return a
    base = int(max(a.max(), b.max())) + 1
    return a[~_in_sorted(_edge_keys(a, base), _edge_keys(b, base))]


_EDGE_ROW = np.dtype([("child", np.int64), ("parent", np.int64)])


def _edge_keys(edges: NDArray[np.int64], base: int) -> NDArray[Any]:
    """One sortable key per ``(child, parent)`` row (ids below ``base``), ordered as
    the rows are by child, then parent.

    Parameters
    ----------
    edges : ndarray of int64, shape (e, 2)
        Node ids, all >= 0 (stable ids count up from 0): with a negative id two
        different rows could share a key.
    base : int
        Above every id in ``edges``.

    Returns
    -------
    ndarray, shape (e,)
        ``child * base + parent`` as int64 while that cannot wrap (ids below
        ``_KEY_BASE_MAX``); past it, the rows themselves as (child, parent) records,
        which numpy sorts and searches field by field.
    """
    if base <= _KEY_BASE_MAX:
        return edges[:, 0] * np.int64(base) + edges[:, 1]
    return np.ascontiguousarray(edges, np.int64).view(_EDGE_ROW).reshape(-1)


def _in_sorted(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.bool_]:
    """(len(a),) whether each value of a is in b, b sorted (``np.isin`` sorts both)."""
    return find_sorted(b, a) >= 0
