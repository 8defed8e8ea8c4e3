"""A growing binary tree over points as parallel arrays (GRINCH's structure).

Each node keeps the sum of its leaves' unit vectors and its leaf count, so the
centroid cosine linkage of any two nodes is one dot product (dissertation §3.5.1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

_NONE = -1


class _Tree:
    """A growing binary tree over points, as parallel arrays indexed by node id.

    ``parent`` and ``kids`` are numpy arrays for the whole-tree outputs; ``up`` and
    ``down`` hold the same links as Python lists, which the per-point climbs read (a
    list read costs a fraction of a numpy scalar read). Every edit goes through
    ``_link``, which writes both.
    """

    def __init__(self, dim: int, capacity: int = 64) -> None:
        self.dim = dim
        self.parent = np.full(capacity, _NONE, np.int64)
        self.kids = np.full((capacity, 2), _NONE, np.int64)
        self.up: list[int] = []  # parent, as a list
        self.down: list[list[int]] = []  # the two children, as lists
        self.sums = np.zeros((capacity, dim))
        self.norm = np.zeros(capacity)  # |sums[v]|, kept in step with sums
        self.count = np.zeros(capacity, np.int64)
        self.alive = np.zeros(capacity, bool)
        self.point_of = np.full(capacity, _NONE, np.int64)  # node -> point index, leaves only
        self.height = np.zeros(capacity, np.int32)  # kept by heights(), see _dirty
        self.score = np.full(capacity, np.nan)  # kept by scores(), see _resummed
        self.n_nodes = 0
        self.root = _NONE
        # Since the last heights() / scores(): nodes whose children changed, and the
        # paths whose sums changed. Only those can have a new height or linkage, so the
        # per-batch outputs cost the changed paths, not the whole tree.
        self._dirty: list[int] = []
        self._resummed: list[NDArray[np.int64]] = []

    def _grow(self) -> None:
        cap = 2 * self.parent.shape[0]
        self.parent = np.resize(self.parent, cap)
        self.parent[self.n_nodes :] = _NONE
        self.kids = np.resize(self.kids, (cap, 2))
        self.kids[self.n_nodes :] = _NONE
        sums = np.zeros((cap, self.dim))
        sums[: self.n_nodes] = self.sums[: self.n_nodes]
        self.sums = sums
        self.norm = np.resize(self.norm, cap)
        self.count = np.resize(self.count, cap)
        self.alive = np.resize(self.alive, cap)
        self.alive[self.n_nodes :] = False
        self.point_of = np.resize(self.point_of, cap)
        self.point_of[self.n_nodes :] = _NONE
        self.height = np.resize(self.height, cap)
        self.score = np.resize(self.score, cap)

    def new_node(self, vec: NDArray[np.float64], count: int, point: int = _NONE) -> int:
        if self.n_nodes == self.parent.shape[0]:
            self._grow()
        v = self.n_nodes
        self.n_nodes += 1
        self.sums[v] = vec
        self.norm[v] = np.sqrt(vec @ vec)
        self.count[v] = count
        self.alive[v] = True
        self.point_of[v] = point
        self.up.append(_NONE)
        self.down.append([_NONE, _NONE])
        self.height[v] = 0
        self.score[v] = np.nan
        self._dirty.append(v)
        return v

    # -- queries ------------------------------------------------------------------
    def f(self, a: int, b: int) -> float:
        """Centroid cosine linkage of two nodes."""
        denom = self.norm[a] * self.norm[b]
        return float(self.sums[a] @ self.sums[b] / denom) if denom > 0 else 0.0

    def f_many(self, nodes: NDArray[np.int64], b: int) -> NDArray[np.float64]:
        """Centroid cosine of each of ``nodes`` with b; shape (len(nodes),)."""
        denom = self.norm[nodes] * self.norm[b]
        # denom 0 means a zero sum, whose dot is 0 too: 0 / 1
        return (self.sums[nodes] @ self.sums[b]) / np.where(denom > 0, denom, 1.0)

    def sib(self, v: int) -> int:
        p = self.up[v]
        if p == _NONE:
            return _NONE
        a, b = self.down[p]
        return b if a == v else a

    def ancestors(self, v: int) -> list[int]:
        """v's ancestors, nearest first (v excluded)."""
        out, up = [], self.up
        p = up[v]
        while p != _NONE:
            out.append(p)
            p = up[p]
        return out

    def is_ancestor(self, a: int, v: int) -> bool:
        """True if a is v or an ancestor of v."""
        # Counts grow strictly going up: past a node larger than a, a cannot follow.
        up, count, size = self.up, self.count, self.count[a]
        while v != _NONE and count[v] <= size:
            if v == a:
                return True
            v = up[v]
        return False

    def lca(self, a: int, b: int) -> int:
        """Lowest common ancestor, climbing from both sides in turn.

        Costs the distance to the LCA rather than to the root: the first node one climb
        finds on the other's path is the LCA, since the other climb, had it passed a
        lower common node, would have stopped there first.
        """
        up, seen_a, seen_b = self.up, {a}, {b}
        while True:
            if a in seen_b:
                return a
            if b in seen_a:
                return b
            if up[a] != _NONE:
                a = up[a]
                seen_a.add(a)
            if up[b] != _NONE:
                b = up[b]
                seen_b.add(b)

    # -- edits ----------------------------------------------------------------------
    def path_up(self, v: int, stop: int = _NONE) -> list[int]:
        """v and its ancestors, nearest first, up to (excluding) stop."""
        out, up = [], self.up
        while v != _NONE and v != stop:
            out.append(v)
            v = up[v]
        return out

    def _add_up(self, v: int, vec: NDArray[np.float64], count: int, stop: int = _NONE) -> None:
        """Add vec/count to v and its ancestors, up to (excluding) stop."""
        path = np.asarray(self.path_up(v, stop), np.int64)
        if path.size == 0:
            return
        rows = self.sums[path] + vec
        self.sums[path] = rows
        self.norm[path] = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        self.count[path] += count
        self._resummed.append(path)

    def _link(self, child: int, p: int, slot: int) -> None:
        """Make child the slot-th (0 or 1) child of p, or the root if p is _NONE."""
        self.parent[child] = p
        self.up[child] = p
        if p == _NONE:
            self.root = child
            return
        self.kids[p, slot] = child
        self.down[p][slot] = child
        self._dirty.append(p)

    def _replace_child(self, p: int, old: int, new: int) -> None:
        self._link(new, p, 0 if p == _NONE or self.down[p][0] == old else 1)

    def attach_as_sibling(self, v: int, target: int) -> int:
        """Make detached subtree v the sibling of target under a new parent; return it."""
        p = self._join(v, target)
        self._add_up(self.up[p], self.sums[v], int(self.count[v]))
        return p

    def move(self, v: int, target: int) -> int:
        """Detach v and attach it as the sibling of target (disjoint from v); return the
        new parent.

        The nodes above both places hold v before and after, so sums and counts change
        only on the two paths below their lowest common ancestor: a graft costs its
        distance, not twice the depth of the tree.
        """
        old = self.up[self.up[v]]  # v's grandparent: the old place's first survivor
        self._cut(v)
        p = self._join(v, target)
        top = _NONE if old == _NONE else self.lca(old, p)
        vec, c = self.sums[v], int(self.count[v])
        self._add_up(old, -vec, -c, top)
        self._add_up(self.up[p], vec, c, top)
        return p

    def _join(self, v: int, target: int) -> int:
        """Links only: a new parent of target and v, in target's place; sums above unchanged."""
        p = self.new_node(self.sums[target] + self.sums[v], self.count[target] + self.count[v])
        self._replace_child(self.up[target], target, p)
        self._link(target, p, 0)
        self._link(v, p, 1)
        return p

    def _cut(self, v: int) -> None:
        """Links only: retire v's parent, its sibling takes the place; sums above unchanged."""
        p = self.up[v]
        self._replace_child(self.up[p], p, self.sib(v))
        self.alive[p] = False
        self.score[p] = np.nan
        self.parent[p] = self.parent[v] = _NONE
        self.up[p] = self.up[v] = _NONE
        self.kids[p] = _NONE
        self.down[p] = [_NONE, _NONE]

    def swap(self, a: int, b: int, top: int | None = None) -> None:
        """Exchange the places of two disjoint subtrees.

        ``top``, if the caller knows it: the lowest common ancestor of their parents.
        """
        pa, pb = self.up[a], self.up[b]
        top = self.lca(pa, pb) if top is None else top
        self._add_up(pa, self.sums[b] - self.sums[a], int(self.count[b] - self.count[a]), top)
        self._add_up(pb, self.sums[a] - self.sums[b], int(self.count[a] - self.count[b]), top)
        slot_a, slot_b = self.down[pa].index(a), self.down[pb].index(b)
        self._link(b, pa, slot_a)
        self._link(a, pb, slot_b)

    # -- outputs --------------------------------------------------------------------
    def refresh(self) -> tuple[NDArray[np.int32], NDArray[np.float64]]:
        """Heights and linkages brought up to date, for the nodes that changed only.

        Returns
        -------
        height : ndarray of int32, shape (n_nodes,)
            Leaves 0, an internal node 1 + its taller child's height.
        score : ndarray of float64, shape (n_nodes,)
            Centroid cosine of each live internal node's two children; NaN for leaves
            and retired nodes.
        """
        dirty, self._dirty = np.unique(np.asarray(self._dirty, np.int64)), []
        resummed, self._resummed = self._resummed, []
        self._update_heights(dirty)
        self._update_scores(np.concatenate([dirty, *resummed]))
        return self.height[: self.n_nodes], self.score[: self.n_nodes]

    def _update_heights(self, dirty: NDArray[np.int64]) -> None:
        """From each node whose children changed, climb while the height it sets changes.

        Any order reaches the fixed point: a node computed before one of its changed
        children is computed again when that child's climb reaches it.
        """
        h, down, up, alive = self.height, self.down, self.up, self.alive
        for v in dirty.tolist():
            while v != _NONE and alive[v]:
                a, b = down[v]
                new = 0 if a == _NONE else 1 + max(h[a], h[b])
                if new == h[v]:
                    break
                h[v] = new
                v = up[v]

    def _update_scores(self, touched: NDArray[np.int64]) -> None:
        """Rescore touched nodes and their parents (whose children's sums moved)."""
        v = np.unique(touched)
        v = np.unique(np.r_[v, self.parent[v]])
        v = v[v != _NONE]
        v = v[self.alive[v] & (self.kids[v, 0] != _NONE)]
        a, b = self.kids[v, 0], self.kids[v, 1]
        denom = self.norm[a] * self.norm[b]
        dots = np.einsum("ij,ij->i", self.sums[a], self.sums[b])
        self.score[v] = np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)
