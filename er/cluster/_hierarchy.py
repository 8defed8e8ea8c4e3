"""The structure every core returns: a tree or DAG over points, as parallel arrays.

Points are nodes ``0 .. n_points-1`` in input order; clusters have ids >= n_points
from one append-only id space. A tree gives every node but the root one parent; a
DAG (LLAMA) may give a node several.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.delta import ClusteringDelta
from er.exceptions import ConfigError

__all__ = ["Hierarchy"]


@dataclass(frozen=True)
class Hierarchy:
    """A hierarchy of clusters over ``n_points`` points.

    Parameters
    ----------
    n_points : int
        Number of leaves; leaves are nodes ``0 .. n_points-1``.
    edges : ndarray of int64, shape (e, 2)
        ``(child, parent)`` rows.
    score : ndarray of float64, shape (n_nodes,)
        Linkage at which each node formed; NaN for leaves.
    level_lo, level_hi : ndarray of int32, shape (n_nodes,)
        Levels each node spans (leaves: 0..0 unless they stay singletons longer).
    algorithm : str
    params : dict
        Hyper-parameters that produced it.
    """

    n_points: int
    edges: NDArray[np.int64]
    score: NDArray[np.float64]
    level_lo: NDArray[np.int32]
    level_hi: NDArray[np.int32]
    algorithm: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "edges", np.asarray(self.edges, np.int64).reshape(-1, 2))
        for name, dtype in (("score", np.float64), ("level_lo", np.int32), ("level_hi", np.int32)):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype))
        n = self.score.shape[0]
        if self.n_points > n or self.level_lo.shape[0] != n or self.level_hi.shape[0] != n:
            raise ConfigError("Hierarchy arrays must have one entry per node.")
        if self.edges.size and (self.edges.min() < 0 or self.edges.max() >= n):
            raise ConfigError("Hierarchy edges must name nodes in [0, n_nodes).")

    # -- shape --------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.score.shape[0])

    @property
    def is_tree(self) -> bool:
        """True when no node has more than one parent."""
        return bool(np.all(np.bincount(self.edges[:, 0], minlength=self.n_nodes) <= 1))

    def parents(self) -> NDArray[np.int64]:
        """(n_nodes,) parent of each node, -1 for roots; trees only."""
        if not self.is_tree:
            raise ConfigError("parents() needs a tree; this hierarchy is a DAG.")
        parent = np.full(self.n_nodes, -1, np.int64)
        parent[self.edges[:, 0]] = self.edges[:, 1]
        return parent

    def roots(self) -> NDArray[np.int64]:
        """Nodes without a parent."""
        has_parent = np.zeros(self.n_nodes, bool)
        has_parent[self.edges[:, 0]] = True
        return np.flatnonzero(~has_parent)

    def child_matrix(self) -> sparse.csr_array:
        """(n_nodes, n_nodes) 0/1 matrix with ``A[parent, child] = 1``."""
        ones = np.ones(len(self.edges), np.int8)
        return sparse.csr_array(
            (ones, (self.edges[:, 1], self.edges[:, 0])), shape=(self.n_nodes, self.n_nodes)
        )

    def topological_levels(self) -> list[NDArray[np.int64]]:
        """Nodes grouped so that every child comes in an earlier group than its parents.

        Raises
        ------
        ConfigError
            If the parent edges contain a cycle.
        """
        indeg = np.bincount(self.edges[:, 1], minlength=self.n_nodes)  # children per node
        by_child = sparse.csr_array(
            (np.ones(len(self.edges), np.int8), (self.edges[:, 0], self.edges[:, 1])),
            shape=(self.n_nodes, self.n_nodes),
        )
        remaining = indeg.copy()
        frontier = np.flatnonzero(remaining == 0)
        groups, seen = [], 0
        while frontier.size:
            groups.append(frontier)
            seen += frontier.size
            parents = by_child[frontier].indices
            np.subtract.at(remaining, parents, 1)
            frontier = np.unique(parents[remaining[parents] == 0])
        if seen != self.n_nodes:
            raise ConfigError("Hierarchy parent edges contain a cycle.")
        return groups

    # -- leaves under nodes -------------------------------------------------------------
    def leaf_counts(self, labels: NDArray[np.int64] | None = None) -> sparse.csr_array:
        """Leaves under each node, per label.

        Parameters
        ----------
        labels : ndarray of int, shape (n_points,), optional
            Class of each leaf (values 0..K-1); default: one class.

        Returns
        -------
        csr_array of int64, shape (n_nodes, K)
            ``C[v, c]`` = number of leaves of class c under v. For a DAG a leaf
            reached through several children is counted once.
        """
        if self.is_tree:
            return self._tree_counts(labels)
        M = self.leaf_membership().astype(np.int64)
        return sparse.csr_array(M @ _one_hot(labels, self.n_points))

    def _tree_counts(self, labels: NDArray[np.int64] | None) -> sparse.csr_array:
        return self._propagate(_one_hot(labels, self.n_points), union=False)

    def leaf_membership(self) -> sparse.csr_array:
        """(n_nodes, n_points) 0/1 int8 matrix: ``M[v, i] = 1`` iff leaf i is under v.

        Rows hold their points in increasing order.
        """
        if self.is_tree:
            return self._tree_membership()
        eye = sparse.identity(self.n_points, dtype=np.int8, format="csr")
        return self._propagate(eye, union=True)

    def _tree_membership(self) -> sparse.csr_array:
        """:meth:`leaf_membership` of a tree: every leaf climbs its ancestor chain, all
        leaves one step at a time (as many steps as the tree is deep), instead of one
        sparse product per topological level."""
        parent = self.parents()
        point = np.arange(self.n_points, dtype=np.int64)
        node = point.copy()
        nodes, points = [node], [point]
        while node.size:
            up = parent[node]
            keep = up >= 0
            node, point = up[keep], point[keep]
            nodes.append(node)
            points.append(point)
        r, c = np.concatenate(nodes), np.concatenate(points)
        # the conversion sorts each row's points (a tree gives no pair twice)
        return sparse.csr_array(
            (np.ones(r.size, np.int8), (r, c)), shape=(self.n_nodes, self.n_points)
        )

    def _propagate(self, leaf_rows: sparse.csr_array, union: bool) -> sparse.csr_array:
        """Push per-leaf rows up the hierarchy, children before parents.

        Parameters
        ----------
        leaf_rows : csr_array of shape (n_points, K)
        union : bool
            True: 0/1 union of the children's rows (DAGs share leaves); False: sums.

        Returns
        -------
        csr_array of shape (n_nodes, K)
        """
        empty = sparse.csr_array((self.n_nodes - self.n_points, leaf_rows.shape[1]))
        X = sparse.csr_array(sparse.vstack([leaf_rows, empty.astype(leaf_rows.dtype)]))
        A = self.child_matrix().astype(leaf_rows.dtype)
        for group in self.topological_levels()[1:]:
            X = X + _rows_only(A, group) @ X
            if union:
                X.data = np.minimum(X.data, 1).astype(leaf_rows.dtype)
        return sparse.csr_array(X)

    def sizes(self) -> NDArray[np.int64]:
        """(n_nodes,) number of distinct leaves under each node."""
        return np.asarray(self.leaf_counts().sum(axis=1)).ravel().astype(np.int64)

    def cut(self, level: int) -> NDArray[np.int64]:
        """(n_points,) flat clustering at ``level``: id of the node holding each point.

        A node holds the points at level L when level_lo <= L <= level_hi; a point
        that no cluster of that level holds labels itself. Trees only.
        """
        parent = self.parents()
        label = np.arange(self.n_points, dtype=np.int64)
        active = np.ones(self.n_points, bool)
        while active.any():
            up = parent[label[active]]
            ok = up >= 0
            ok[ok] &= self.level_lo[up[ok]] <= level
            idx = np.flatnonzero(active)
            label[idx[ok]] = up[ok]
            active[idx[~ok]] = False
        return label

    # -- exports ------------------------------------------------------------------------
    def to_delta(self) -> ClusteringDelta:
        """Everything as new: the delta that writes this hierarchy to an empty store."""
        return ClusteringDelta(
            node_id=np.arange(self.n_nodes),
            is_leaf=np.arange(self.n_nodes) < self.n_points,
            size=self.sizes(),
            score=self.score,
            level_lo=self.level_lo,
            level_hi=self.level_hi,
            edges_added=self.edges,
            algorithm=self.algorithm,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``S.json`` form of the `er cluster` contract."""
        nodes = {
            str(v): {
                "level_lo": int(self.level_lo[v]),
                "level_hi": int(self.level_hi[v]),
                "score": None if np.isnan(self.score[v]) else float(self.score[v]),
            }
            for v in range(self.n_points, self.n_nodes)
        }
        return {
            "n_points": self.n_points,
            "algorithm": self.algorithm,
            "params": self.params,
            "edges": self.edges.tolist(),
            "nodes": nodes,
        }

    @classmethod
    def from_linkage(cls, Z: Any, algorithm: str = "hac") -> Hierarchy:
        """A binary tree from a scipy/fastcluster linkage matrix.

        Parameters
        ----------
        Z : ndarray of float, shape (n - 1, 4)
            Rows ``(a, b, distance, size)`` in merge order; cluster ``n + i`` is row i.

        Returns
        -------
        Hierarchy
            Score ``1 - distance`` (cosine distances give cosine similarities); levels
            are merge ranks, so cutting level L leaves n - L clusters.
        """
        Z = np.asarray(Z, dtype=np.float64)
        n = Z.shape[0] + 1
        edges = np.empty((2 * (n - 1), 2), np.int64)
        edges[0::2, 0], edges[1::2, 0] = Z[:, 0], Z[:, 1]
        edges[:, 1] = np.repeat(np.arange(n, 2 * n - 1), 2)
        lo = np.r_[np.zeros(n, np.int32), np.arange(1, n, dtype=np.int32)]
        parent = np.full(2 * n - 1, -1)
        parent[edges[:, 0]] = edges[:, 1]
        hi = np.where(parent >= 0, lo[np.maximum(parent, 0)] - 1, n - 1).astype(np.int32)
        return cls(n, edges, np.r_[np.full(n, np.nan), 1 - Z[:, 2]], lo, hi, algorithm)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Hierarchy:
        """Inverse of :meth:`to_json`."""
        n = int(doc["n_points"])
        ids = [int(k) for k in doc.get("nodes", {})]
        edges = np.asarray(doc["edges"], np.int64).reshape(-1, 2)
        n_nodes = max([n - 1, *ids, *(edges.ravel().tolist() or [0])]) + 1
        score = np.full(n_nodes, np.nan)
        lo = np.zeros(n_nodes, np.int32)
        hi = np.zeros(n_nodes, np.int32)
        for key, attrs in doc.get("nodes", {}).items():
            v = int(key)
            score[v] = np.nan if attrs.get("score") is None else attrs["score"]
            lo[v], hi[v] = attrs.get("level_lo", 0), attrs.get("level_hi", 0)
        return cls(n, edges, score, lo, hi, doc.get("algorithm", ""), doc.get("params", {}))


def _one_hot(labels: NDArray[np.int64] | None, n: int) -> sparse.csr_array:
    if labels is None:
        labels = np.zeros(n, np.int64)
    labels = np.asarray(labels)
    _, codes = np.unique(labels, return_inverse=True)
    k = int(codes.max(initial=-1)) + 1
    return sparse.csr_array((np.ones(n, np.int64), (np.arange(n), codes)), shape=(n, k))


def _rows_only(A: sparse.csr_array, rows: NDArray[np.int64]) -> sparse.csr_array:
    """A with every row outside ``rows`` zeroed (same shape)."""
    mask = np.zeros(A.shape[0], A.dtype)
    mask[rows] = 1
    return sparse.csr_array(sparse.diags_array(mask, dtype=A.dtype) @ A)
