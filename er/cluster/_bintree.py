"""A growing binary tree over points as parallel arrays (GRINCH's structure).

Each node keeps the sum of its leaves' unit vectors and its leaf count, so the
centroid cosine linkage of any two nodes is one dot product (dissertation §3.5.1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

_NONE = -1
# Root paths kept for reuse (see _Tree.root_path): a few MB at depth ~400.
_KEPT_PATHS = 2048


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
        self.norm = np.zeros(capacity)  # |sums[v]|, where not _stale: read through norms()
        self._stale = np.zeros(capacity, bool)  # sums changed since norm was computed
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
        # Root paths computed lately (serial -> path), and for each node the serial of
        # the last one through it and its index there; see root_path.
        self._paths: dict[int, tuple[NDArray[np.int64], int]] = {}  # (path, _links then)
        self._serial = 0
        self._links = 0  # link edits so far
        self._path_of = np.full(capacity, _NONE, np.int64)
        self._index_in = np.zeros(capacity, np.int64)

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
        self._stale = np.resize(self._stale, cap)
        self.count = np.resize(self.count, cap)
        self.alive = np.resize(self.alive, cap)
        self.alive[self.n_nodes :] = False
        self.point_of = np.resize(self.point_of, cap)
        self.point_of[self.n_nodes :] = _NONE
        self.height = np.resize(self.height, cap)
        self.score = np.resize(self.score, cap)
        self._path_of = np.resize(self._path_of, cap)
        self._path_of[self.n_nodes :] = _NONE
        self._index_in = np.resize(self._index_in, cap)

    def new_node(self, vec: NDArray[np.float64], count: int, point: int = _NONE) -> int:
        if self.n_nodes == self.parent.shape[0]:
            self._grow()
        v = self.n_nodes
        self.n_nodes += 1
        self.sums[v] = vec
        self.norm[v] = np.sqrt(vec @ vec)
        self._stale[v] = False
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
        denom = self.norm_of(a) * self.norm_of(b)
        return float(self.sums[a] @ self.sums[b] / denom) if denom > 0 else 0.0

    def f_many(self, nodes: NDArray[np.int64], b: int) -> NDArray[np.float64]:
        """Centroid cosine of each of ``nodes`` with b; shape (len(nodes),)."""
        return cosines(self.sums[nodes], self.norms(nodes), self.sums[b], self.norm_of(b))

    def norms(self, nodes: NDArray[np.int64]) -> NDArray[np.float64]:
        """|sums| of nodes, shape (len(nodes),); those stale are computed now.

        A path update leaves its norms stale: the nodes near the root change with every
        insertion and are seldom read. A row's norm does not depend on the rows computed
        with it, so when it is computed does not change its value.
        """
        stale = nodes[self._stale[nodes]]
        if stale.size:
            self.norm[stale] = row_norms(self.sums.take(stale, axis=0))
            self._stale[stale] = False
        return self.norm[nodes]

    def norm_of(self, v: int) -> float:
        """|sums[v]|, computed now if stale."""
        if self._stale[v]:
            self.norm[v] = row_norms(self.sums[v : v + 1])[0]
            self._stale[v] = False
        norm: np.float64 = self.norm[v]  # a float subclass, returned as is
        return norm

    def siblings(self, nodes: NDArray[np.int64]) -> NDArray[np.int64]:
        """The sibling of each of ``nodes`` (none the root); shape (len(nodes),)."""
        kids = self.kids[self.parent[nodes]]
        return np.where(kids[:, 0] == nodes, kids[:, 1], kids[:, 0])

    def sib(self, v: int) -> int:
        p = self.up[v]
        if p == _NONE:
            return _NONE
        a, b = self.down[p]
        return b if a == v else a

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
        """Lowest common ancestor of a and b (a itself if it is an ancestor of b)."""
        return self.meet(a, b)[0]

    def meet(self, a: int, b: int) -> tuple[int, NDArray[np.int64], NDArray[np.int64]]:
        """Lowest common ancestor of a and b, and the paths up to it from each side.

        Returns
        -------
        lca : int
        from_a, from_b : ndarray of int64, shapes (da,) and (db,)
            a and its ancestors below the LCA, nearest first (empty if a is the LCA);
            the same from b.
        """
        pa, pb = self.root_path(a), self.root_path(b)
        # A node's depth is its distance to the root, so aligned from the root end the
        # two paths hold the same nodes from the root down to the LCA, then differ.
        k = min(pa.size, pb.size)
        j = int(np.argmax(pa[pa.size - k :] == pb[pb.size - k :]))
        return int(pa[pa.size - k + j]), pa[: pa.size - k + j], pb[: pb.size - k + j]

    def root_path(self, v: int) -> NDArray[np.int64]:
        """v and its ancestors, nearest first; shape (depth of v + 1,).

        A climb costs a Python step per node, and every insertion climbs to the root,
        hundreds of nodes deep on large trees. So each path found is kept, and a later
        climb that reaches a node of a kept path takes the rest from it: whole if no
        link changed since it was kept, else as far as ``parent`` confirms its links
        (one array read), the climb going on from the present parent of the last node
        confirmed.
        """
        parts, head, up = [], [], self.up
        while v != _NONE:
            kept = self._paths.get(int(self._path_of[v]))
            if kept is None:
                head.append(v)
                v = up[v]
                continue
            if head:
                parts.append(np.asarray(head, np.int64))
                head = []
            rest = kept[0][self._index_in[v] :]
            if kept[1] == self._links:  # no link changed since: it still ends at the root
                if not parts:
                    return rest  # kept already
                parts.append(rest)
                break
            nxt = self.parent[rest]
            broken = (nxt[:-1] != rest[1:]).nonzero()[0]
            good = int(broken[0]) + 1 if broken.size else rest.size
            parts.append(rest[:good])
            v = int(nxt[good - 1])  # the present parent of the last node confirmed
        if head:
            parts.append(np.asarray(head, np.int64))
        path = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self._keep_path(path)
        return path

    def _keep_path(self, path: NDArray[np.int64]) -> None:
        serial = self._serial
        self._serial += 1
        self._paths[serial] = (path, self._links)
        self._paths.pop(serial - _KEPT_PATHS, None)
        self._path_of[path] = serial
        self._index_in[path] = np.arange(path.size)

    # -- edits ----------------------------------------------------------------------
    def _add_up(self, path: NDArray[np.int64], vec: NDArray[np.float64], count: int) -> None:
        """Add vec/count to the nodes of path, shape (m,)."""
        if path.size == 0:
            return
        rows = self.sums.take(path, axis=0)
        rows += vec
        self.sums[path] = rows
        self._stale[path] = True  # most are not read before their next change
        self.count[path] += count
        self._resummed.append(path)

    def _link(self, child: int, p: int, slot: int) -> None:
        """Make child the slot-th (0 or 1) child of p, or the root if p is _NONE."""
        self._links += 1
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
        self._add_up(self.root_path(p)[1:], self.sums[v], int(self.count[v]))
        return p

    def move(
        self, v: int, target: int, paths: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None
    ) -> int:
        """Detach v and attach it as the sibling of target (disjoint from v); return the
        new parent.

        The nodes above both places hold v before and after, so sums and counts change
        only on the two paths below their lowest common ancestor: a graft costs its
        distance, not twice the depth of the tree.

        ``paths``, if the caller knows them: the nodes that lose v (from its grandparent
        up) and those that gain it (from target's parent up), both to the lowest common
        ancestor of the two places after the move, exclusive.
        """
        old = self.up[self.up[v]]  # v's grandparent: the old place's first survivor
        self._cut(v)
        p = self._join(v, target)
        if paths is None:
            paths = self._move_paths(old, p)
        vec, c = self.sums[v], int(self.count[v])
        self._add_up(paths[0], -vec, -c)
        self._add_up(paths[1], vec, c)
        return p

    def _move_paths(self, old: int, p: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The paths of ``move``, from the old place's first survivor and the new parent."""
        if old == _NONE:
            return np.zeros(0, np.int64), self.root_path(p)[1:]
        from_old, from_p = self.meet(old, p)[1:]  # p is never their LCA: it holds v only
        return from_old, from_p[1:]

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
        self._links += 1
        self._replace_child(self.up[p], p, self.sib(v))
        self.alive[p] = False
        self.score[p] = np.nan
        self.parent[p] = self.parent[v] = _NONE
        self.up[p] = self.up[v] = _NONE
        self.kids[p] = _NONE
        self.down[p] = [_NONE, _NONE]

    def swap(self, a: int, b: int) -> None:
        """Exchange the places of two disjoint subtrees, sums and counts kept."""
        _, from_a, from_b = self.meet(self.up[a], self.up[b])
        self._add_up(from_a, self.sums[b] - self.sums[a], int(self.count[b] - self.count[a]))
        self._add_up(from_b, self.sums[a] - self.sums[b], int(self.count[a] - self.count[b]))
        self.exchange(a, b)

    def exchange(self, a: int, b: int) -> None:
        """Links only: a and b (disjoint) trade places; sums above unchanged."""
        pa, pb = self.up[a], self.up[b]
        slot_a, slot_b = self.down[pa].index(a), self.down[pb].index(b)
        self._link(b, pa, slot_a)
        self._link(a, pb, slot_b)

    def set_path(
        self, nodes: NDArray[np.int64], sums: NDArray[np.float64], counts: NDArray[np.int64]
    ) -> None:
        """Write sums, shape (m, dim), and counts, shape (m,), computed by the caller."""
        self.sums[nodes] = sums
        self._stale[nodes] = True
        self.count[nodes] = counts
        self._resummed.append(nodes)

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
        """From the nodes whose children changed, climb while the heights they set change.

        A round recomputes a set of nodes at once, and the parents of those that changed
        form the next round. A node computed before one of its changed children is
        computed again in the round after that child's, so the last value each node gets
        is its height in the present tree, whatever the order.
        """
        h, kids, parent, alive = self.height, self.kids, self.parent, self.alive
        v = dirty[alive[dirty]]
        while v.size:
            a, b = kids[v, 0], kids[v, 1]
            new = np.where(a == _NONE, 0, 1 + np.maximum(h[a], h[b]))
            changed = new != h[v]
            v = v[changed]
            h[v] = new[changed]
            v = parent[v]
            v = np.unique(v[v != _NONE])

    def _update_scores(self, touched: NDArray[np.int64]) -> None:
        """Rescore touched nodes and their parents (whose children's sums moved)."""
        mark = np.zeros(self.n_nodes, bool)
        mark[touched] = True
        up = self.parent[touched]
        mark[up[up != _NONE]] = True
        v = np.flatnonzero(mark)
        v = v[self.alive[v] & (self.kids[v, 0] != _NONE)]
        a, b = self.kids[v, 0], self.kids[v, 1]
        denom = self.norms(a) * self.norms(b)
        dots = np.einsum("ij,ij->i", self.sums[a], self.sums[b])
        self.score[v] = np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def cosines(
    sums: NDArray[np.float64], norms: NDArray[np.float64], vec: NDArray[np.float64], norm: float
) -> NDArray[np.float64]:
    """Centroid cosine of nodes with one node, from their sums and norms.

    Parameters
    ----------
    sums : ndarray of float64, shape (m, dim)
    norms : ndarray of float64, shape (m,)
    vec : ndarray of float64, shape (dim,)
        The node's sum.
    norm : float
        Its norm.

    Returns
    -------
    ndarray of float64, shape (m,)
    """
    denom = norms * norm
    # denom 0 means a zero sum, whose dot is 0 too: 0 / 1
    return (sums @ vec) / np.where(denom > 0, denom, 1.0)


def row_norms(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """|row| of each of rows, shape (m, dim) -> (m,).

    Each row's value does not depend on the other rows (einsum reduces each row on its
    own), so a norm computed alone equals the one computed with others.
    """
    sq: NDArray[np.float64] = np.einsum("ij,ij->i", rows, rows)
    return np.sqrt(sq)
