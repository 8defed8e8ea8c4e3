"""GRINCH: grafting and rotation-based incremental hierarchical clustering.

Points arrive one at a time (``partial_fit`` takes a batch and inserts its rows in
order; the nearest earlier points of all its rows are searched at once, which gives
the same tree as searching before each insertion). Each point is added next to its
nearest leaf, rotated up while its would-be sibling prefers its aunt (Alg. 5), then
grafts are tried (Alg. 6), each successful graft followed by a restructure (Alg. 7).
Alg. 8 tries a graft from every ancestor of the new point (``graft_from="ancestors"``);
both of the authors' codes make one graft search per inserted point, from the new
point's parent (``graft_from="leaf"``).
The linkage is centroid cosine: every node keeps the sum of its leaves' unit vectors.

References
----------
Monath, Kobren et al., KDD 2019; dissertation ch. 3 (Alg. 4-8, §3.5.2 approximations).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.cluster._graph import check_neighbors
from er.cluster._hierarchy import Hierarchy
from er.cluster._params import NONE, Interval, Options, get_params, validate_params
from er.delta import ClusteringDelta
from er.exceptions import ConfigError, NotFittedError

__all__ = ["Grinch"]

from er.cluster._bintree import _NONE, _Tree, cosines, row_norms
from er.cluster._grinch_search import (
    _dense,
    _path_of_sibling,
    _search,
    _top_k,
    _unit_rows,
)


class Grinch:
    """GRINCH and its baselines ROTATE and GREEDY, one point at a time.

    Parameters
    ----------
    mode : {"grinch", "rotate", "greedy"}, default "grinch"
        ``greedy`` inserts next to the nearest leaf; ``rotate`` adds rotations
        (Alg. 5); ``grinch`` adds grafts and restructures (Alg. 8).
    graft_from : {"leaf", "ancestors"}, default "leaf"
        ``ancestors``: a graft search from every ancestor of the new point, as Alg. 8
        reads. ``leaf``: one graft search per inserted point, from the new point's
        parent, as the authors' Scala and Python codes do. ``leaf`` is the better on
        digits and 3-10x faster; ``ancestors`` the better on the hard mixture and the
        GRINCH synthetic set (bench/RESULTS.md, "GRINCH variants"). Without a size cap,
        grafts onto large ancestors mostly move points into mixed clusters.
    restructure : bool, default True
        Run Alg. 7 after each successful graft (the authors' Python code does not).
    rotate_cap, graft_cap, restruct_cap : int or None, default None
        Approximation (§3.5.2, capping): at most this many steps up the tree for
        rotations, graft attempts and restructure swaps. None: no cap.
    size_cap : int or None, default 100
        Capping (§3.5.2: no rearrangement "above a height") as the authors' codes cap,
        by node size, with their value 100: no rotation climbs into, and no graft or
        restructure moves or climbs to, a node of more than this many points. None: no
        cap. The centroid of a large node points near the mean of all the data, close
        to everything when features are not centred (raw digits), so uncapped
        rotations lift points out of their clusters towards the root; on raw digits
        ROTATE falls below GREEDY without the cap (bench/RESULTS.md).
    single_elimination : bool, default False
        Approximation (§3.5.2): stop grafting from a point once both sides of an
        attempt prefer their current siblings.
    graft_candidates : int or None, default None
        Approximation (§3.5.2, single nearest-neighbour search): search the point's
        k nearest leaves once, and look for graft partners only among them. None:
        every graft searches all leaves exactly. The search that finds where a point
        goes is that same one: exact, for a whole mini-batch at once, or supplied by a
        k-NN index through ``partial_fit(X, neighbors=(idx, sim))``.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        The current tree, renumbered to the `er cluster` contract (points 0..n-1 in
        arrival order, clusters from n).
    delta_ : ClusteringDelta
    leaf_ids_ : ndarray of int64, shape (n_points,)
        The node id the deltas give each point (GRINCH numbers its tree apart from
        ``hierarchy_``'s export).
        Changes made by the last ``fit``/``partial_fit`` call, in stable node ids.
    n_points_ : int
    stats_ : dict
        Counts of rotations, graft attempts, grafts and restructure swaps.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 0], [0, 1], [0.9, 0.1], [0.1, 0.9]], dtype=np.float32)
    >>> Grinch().fit(X).hierarchy_.cut(1).tolist()
    [5, 6, 5, 6]
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "mode": [Options(("grinch", "rotate", "greedy"))],
        "graft_from": [Options(("leaf", "ancestors"))],
        "restructure": [Options((True, False))],
        "rotate_cap": [Interval(int, 1, None), NONE],
        "graft_cap": [Interval(int, 1, None), NONE],
        "restruct_cap": [Interval(int, 1, None), NONE],
        "size_cap": [Interval(int, 1, None), NONE],
        "single_elimination": [Options((True, False))],
        "graft_candidates": [Interval(int, 1, None), NONE],
    }
    algorithm = "grinch"
    # fitted state, set by _start (declared here: _fit reads them before it sets them)
    n_points_: int
    _leaf_ids: NDArray[np.int64]

    def __init__(
        self,
        *,
        mode: str = "grinch",
        graft_from: str = "leaf",
        restructure: bool = True,
        rotate_cap: int | None = None,
        graft_cap: int | None = None,
        restruct_cap: int | None = None,
        size_cap: int | None = 100,
        single_elimination: bool = False,
        graft_candidates: int | None = None,
    ) -> None:
        self.mode = mode
        self.graft_from = graft_from
        self.restructure = restructure
        self.rotate_cap = rotate_cap
        self.graft_cap = graft_cap
        self.restruct_cap = restruct_cap
        self.size_cap = size_cap
        self.single_elimination = single_elimination
        self.graft_candidates = graft_candidates

    # -- public API -----------------------------------------------------------------------
    def fit(self, X: Any) -> Grinch:
        """Build a tree from scratch over the rows of X, inserted in order.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n, d)
        """
        return self._fit(X, partial=False, neighbors=None)

    def partial_fit(self, X: Any, neighbors: tuple[Any, Any] | None = None) -> Grinch:
        """Insert the rows of X, in order, into the current tree.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (b, d)
        neighbors : (idx, sim) of shape (b, w) each, optional
            Candidate leaves for each new row from a k-NN index (dissertation §3.5.2:
            one nearest-neighbour search per inserted point), e.g.
            ``er.ann.batch_neighbors``: ``idx`` global point indices (-1 for none),
            ``sim`` their cosines. Entries naming a row of this batch are ignored: the
            rows of a batch are compared with each other exactly, so that a row sees
            exactly the batch rows inserted before it. None: every earlier point is
            searched exactly.
        """
        return self._fit(X, partial=True, neighbors=neighbors)

    def _fit(self, X: Any, partial: bool, neighbors: tuple[Any, Any] | None) -> Grinch:
        validate_params(self)
        rows = _unit_rows(X)
        first_call = not partial or not hasattr(self, "_tree")
        if first_call:
            self._start(rows.shape[1], sparse.issparse(rows))
        elif rows.shape[1] != self._tree.dim:
            raise ConfigError(
                f"X has {rows.shape[1]} columns; this Grinch was fitted on {self._tree.dim}."
            )
        n0 = self.n_points_
        if neighbors is not None:
            neighbors = check_neighbors(*neighbors, n0, n0 + rows.shape[0])
        before = self._snapshot()
        self._append_points(rows)
        if self._leaf_ids.size < n0 + rows.shape[0]:  # leaf node id of each point
            self._leaf_ids = np.resize(self._leaf_ids, 2 * (n0 + rows.shape[0]))
        near = self._nearest_earlier(n0, neighbors)
        for i in range(n0, n0 + rows.shape[0]):
            self._insert(i, near[i - n0])
        self.n_points_ = n0 + rows.shape[0]
        self.leaf_ids_ = self._leaf_ids[: self.n_points_].copy()  # delta node id of each point
        heights, scores = self._tree.refresh()
        self.delta_ = self._delta_since(before, heights, scores)
        self.hierarchy_ = self._export(heights, scores)
        return self

    # -- insertion --------------------------------------------------------------------------
    def _start(self, dim: int, is_sparse: bool) -> None:
        self._tree = _Tree(dim)
        self._stored = (np.zeros(0, np.int32), np.zeros(0))  # what the deltas wrote
        # Sparse points keep the exact leaf searches O(nnz) (e.g. 10,000-d binary data).
        self._sparse = is_sparse
        self._points: Any = sparse.csr_array((0, dim)) if is_sparse else np.zeros((0, dim))
        self._buffer = self._points  # dense: _points is a view of its first rows
        self._leaf_of: list[int] = []
        self._leaf_ids = np.zeros(0, np.int64)  # _leaf_of as an array, grown by doubling
        self._under_cache: tuple[int, NDArray[np.bool_]] | None = None  # see _points_under
        self.n_points_ = 0
        self.stats_ = {"rotations": 0, "graft_attempts": 0, "grafts": 0, "restructures": 0}

    def _append_points(self, rows: Any) -> None:
        """Add the batch's unit rows to ``_points`` (dense: a buffer grown by doubling)."""
        if self._sparse:
            self._points = sparse.csr_array(sparse.vstack([self._points, sparse.csr_array(rows)]))
            return
        dense = rows.toarray() if sparse.issparse(rows) else rows
        n, m = self._points.shape[0], dense.shape[0]
        buf = self._buffer
        if n + m > buf.shape[0]:
            buf = np.resize(buf, (max(2 * buf.shape[0], n + m, 64), dense.shape[1]))
        buf[n : n + m] = dense
        self._buffer, self._points = buf, buf[: n + m]

    def _nearest_earlier(
        self, n0: int, neighbors: tuple[NDArray[np.int64], NDArray[np.float32]] | None
    ) -> NDArray[np.int64]:
        """Each new point's k most similar earlier points, best first.

        One search per inserted point (§3.5.2): its best hit is where the point is
        inserted, and, with ``graft_candidates``, the k hits are the only graft partners
        it considers. Points of earlier calls come from ``neighbors`` or an exact blocked
        search; the batch's own earlier rows always exactly.

        Returns
        -------
        ndarray of int64, shape (b, k)
            Point indices, best first (ties: lower index), -1 padded; k is
            ``graft_candidates`` (1 without it).
        """
        k = self.graft_candidates or 1
        batch = self._points[n0:]
        b = batch.shape[0]
        if neighbors is None:
            old_sim, old_idx = _search(self._points[:n0], batch, k)
        else:
            old_sim, old_idx = self._supplied(neighbors, n0, k)
        own = _dense(batch @ batch.T)
        own[np.triu_indices(b)] = -np.inf  # a row sees the rows inserted before it only
        own_idx = np.broadcast_to(np.arange(n0, n0 + b), (b, b))
        return _top_k(np.hstack([old_sim, own]), np.hstack([old_idx, own_idx]), k)[1]

    def _supplied(
        self, neighbors: tuple[NDArray[np.int64], NDArray[np.float32]], n0: int, k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """The k best supplied neighbours among the n0 points of earlier calls.

        Returns (sim, idx), each of shape (b, k), as :func:`_search`. A row for which
        the index found no earlier point at all is searched exactly.
        """
        idx, sim = neighbors[0].copy(), neighbors[1].astype(np.float64)
        drop = (idx < 0) | (idx >= n0)  # none, or a row of this batch
        idx[drop], sim[drop] = -1, -np.inf
        pad = np.full((idx.shape[0], k), -1, np.int64)
        sim, idx = _top_k(np.hstack([sim, np.full(pad.shape, -np.inf)]), np.hstack([idx, pad]), k)
        lost = np.flatnonzero(idx[:, 0] < 0) if n0 else np.zeros(0, np.int64)
        if lost.size:
            s2, i2 = _search(self._points[:n0], self._points[n0:][lost], k)
            sim[lost], idx[lost] = -np.inf, -1
            sim[lost, : s2.shape[1]], idx[lost, : i2.shape[1]] = s2, i2
        return sim, idx

    def _point_vec(self, i: int) -> NDArray[np.float64]:
        if not self._sparse:
            row: NDArray[np.float64] = self._points[i]
            return row
        return np.asarray(self._points[[i]].toarray(), np.float64).ravel()

    def _similar_leaves(self, vec: NDArray[np.float64]) -> NDArray[np.float64]:
        """Cosine of every point with a direction vec; shape (n_points,)."""
        norm = np.sqrt(vec @ vec)
        sims = self._points[: len(self._leaf_of)] @ vec
        return np.asarray(sims, np.float64).ravel() / (norm if norm > 0 else 1.0)

    def _insert(self, i: int, near: NDArray[np.int64]) -> None:
        """Insert point i; ``near`` holds its k most similar earlier points, best first."""
        t = self._tree
        x = t.new_node(self._point_vec(i), 1, point=i)
        self._leaf_of.append(x)
        self._leaf_ids[i] = x
        if i == 0:
            t.root = x
            return
        nearest = self._leaf_of[int(near[0])]
        self._candidates = None
        if self.graft_candidates is not None:
            self._candidates = self._leaf_ids[near[near >= 0]]
        target = nearest if self.mode == "greedy" else self._rotate(x, nearest)
        t.attach_as_sibling(x, target)
        if self.mode == "grinch":
            self._graft_from(x)

    def _rotate(self, x: int, v: int) -> int:
        """Alg. 5: climb from v while v prefers its sibling to the new point x."""
        t, steps = self._tree, 0
        while v != t.root and t.f(v, x) < t.f(v, t.sib(v)):
            if self.rotate_cap is not None and steps >= self.rotate_cap:
                break
            if self._too_big(t.up[v]):
                break
            v = t.up[v]
            steps += 1
            self.stats_["rotations"] += 1
        return v

    def _too_big(self, v: int) -> bool:
        """True if the size cap forbids moving v or climbing to it."""
        return self.size_cap is not None and int(self._tree.count[v]) > self.size_cap

    # -- grafting (Alg. 6, 8) -----------------------------------------------------------------
    def _graft_from(self, x: int) -> None:
        t = self._tree
        v, steps = t.up[x], 0
        self._under_cache = None  # the cache holds one point's path only
        if self.graft_from == "leaf":
            # The authors' codes: one graft search per inserted point, from x's parent.
            if v != t.root:
                self._graft(v)
            return
        while v != _NONE and v != t.root:
            if self.graft_cap is not None and steps >= self.graft_cap:
                return
            if self._too_big(v):
                return
            nxt, stop = self._graft(v)
            if stop:
                return
            # keep climbing from a live strict ancestor of v
            if nxt in (_NONE, v) or not t.alive[nxt] or not t.is_ancestor(nxt, v):
                nxt = t.up[v]
            v = nxt
            steps += 1

    def _graft_partner(self, v: int) -> int:
        """The leaf outside v most similar to v (line 3 of Alg. 6); ties to the lower id."""
        t = self._tree
        if self._candidates is not None:
            cands = self._candidates
            sims = t.f_many(cands, v)
            for j in np.lexsort((cands, -sims)):  # best first, ties to the lower id
                if not t.is_ancestor(v, int(cands[j])):
                    return int(cands[j])
            return _NONE
        sims = self._similar_leaves(t.sums[v])
        sims[self._points_under(v)] = -np.inf
        j = int(np.argmax(sims))
        return self._leaf_of[j] if np.isfinite(sims[j]) else _NONE

    def _points_under(self, v: int) -> NDArray[np.bool_]:
        """(n_points,) mask of the points under v.

        Grafting from every ancestor asks this of nested nodes, so the mask of the last
        node asked is kept while the tree is unchanged, and grown by the leaves of the
        siblings on the path up to v: O(n) per inserted point instead of O(n) per graft.
        """
        t, n = self._tree, len(self._leaf_of)
        cached = self._under_cache
        if cached is not None and t.is_ancestor(v, cached[0]):
            mask, a = cached[1], cached[0]
            while a != v:
                self._mark_points(t.sib(a), mask)
                a = t.up[a]
        else:
            mask = np.zeros(n, bool)
            self._mark_points(v, mask)
        self._under_cache = (v, mask)
        return mask

    def _mark_points(self, v: int, mask: NDArray[np.bool_]) -> None:
        t, stack = self._tree, [v]
        while stack:
            u = stack.pop()
            a, b = t.down[u]
            if a == _NONE:
                mask[t.point_of[u]] = True
            else:
                stack.append(int(a))
                stack.append(int(b))

    def _graft(self, v: int) -> tuple[int, bool]:
        """Try grafts from v; return (node to continue from, stop grafting?)."""
        t = self._tree
        leaf = self._graft_partner(v)
        if leaf == _NONE:
            return _NONE, False
        # v and l climb their paths to the LCA; the tree is unchanged until a graft
        lca, from_v, from_l = t.meet(v, leaf)
        start, l, iv, il = v, leaf, 0, 0  # noqa: E741 - the paper's name
        while v != lca and l != lca and t.sib(v) != l:
            if self._too_big(v) or self._too_big(l):
                break
            self.stats_["graft_attempts"] += 1
            f_vl, f_v, f_l = t.f(v, l), t.f(v, t.sib(v)), t.f(l, t.sib(l))
            if f_vl > max(f_v, f_l):
                z = self._apply_graft(v, l, (from_l[il + 2 :], from_v[iv + 1 :]))
                if self.restructure:
                    self._restructure(_path_of_sibling(z, from_l[il + 1 :]))
                break
            l_moves, v_moves = f_vl < f_l, f_vl < f_v
            if self.single_elimination and l_moves and v_moves:
                return _NONE, True
            if not (l_moves or v_moves):
                break  # ties: neither side prefers its sibling strictly
            if l_moves:
                il += 1
                l = int(from_l[il]) if il < from_l.size else lca  # noqa: E741
            if v_moves:
                iv += 1
                v = int(from_v[iv]) if iv < from_v.size else lca
        return (lca if v == start else v), False

    def _apply_graft(
        self,
        v: int,
        l: int,  # noqa: E741
        paths: tuple[NDArray[np.int64], NDArray[np.int64]],
    ) -> int:
        """Make l the sibling of v (Eq. 3.6); return l's old sibling z.

        The graft moves l. Its old sibling z climbs into the place of l's retired parent
        and gets a new sibling there: that is where the graft can leave a disconnected
        pair, so the restructure starts from z (§3.3.2: "Z be the previous sibling of
        V", V the node just grafted). Read literally, Alg. 6 line 8 takes the sibling of
        the node that stays, whose only aunt below the LCA is the new parent: a no-op.
        ``paths``: the nodes that lose l and those that gain it (``_Tree.move``).
        """
        t = self._tree
        z = t.sib(l)
        t.move(l, v, paths)
        self._under_cache = None  # the leaf sets changed
        self.stats_["grafts"] += 1
        return z

    def _restructure(self, path: NDArray[np.int64]) -> None:
        """Alg. 7: from z = ``path[0]`` up to r, swap z's sibling for a better-matching aunt.

        ``path`` holds z and its ancestors below r, nearest first. ``aunts[i]`` is the
        sibling of ``path[i]``. Climbing one step drops the first entry; a swap of z's
        sibling s with the aunt m exchanges their two entries (the path itself does not
        move), so the path is walked once per restructure, not once per step. An aunt
        lies outside the subtree of the path node it is the sibling of, which holds s:
        m and s are never nested.
        """
        t = self._tree
        aunts = t.siblings(path)
        # A swap moves two aunts whole and changes the sums of path nodes only: the
        # aunts' rows are read once, the path's kept here and written back at the end.
        sums, norms = t.sums[aunts], t.norms(aunts)
        rows, counts = t.sums.take(path, axis=0), t.count[path]
        changed = np.zeros(path.size, bool)
        steps = path.size if self.restruct_cap is None else min(path.size, self.restruct_cap)
        for i in range(steps):
            if self.size_cap is not None and counts[i] > self.size_cap:
                break
            # a changed row's norm as _Tree.norms computes it; else the tree's own
            z_norm = row_norms(rows[i : i + 1])[0] if changed[i] else t.norm_of(int(path[i]))
            # z's sibling s is aunts[i]: one product scores all, f(z, s) = scores[0]
            scores = cosines(sums[i:], norms[i:], rows[i], z_norm)
            j = int(scores.argmax())
            if j > 0 and scores[0] < scores[j]:
                s, m = int(aunts[i]), int(aunts[i + j])
                # the sums change from s's parent up to (excluding) m's parent
                rows[i + 1 : i + j + 1] += sums[i + j] - sums[i]
                counts[i + 1 : i + j + 1] += int(t.count[m] - t.count[s])
                changed[i + 1 : i + j + 1] = True
                self._apply_swap(s, m)
                swap = [i + j, i]
                aunts[[i, i + j]] = aunts[swap]
                sums[[i, i + j]] = sums[swap]
                norms[[i, i + j]] = norms[swap]
        if changed.any():
            t.set_path(path[changed], rows[changed], counts[changed])

    def _apply_swap(self, s: int, m: int) -> None:
        """Exchange z's sibling s with its better-matching aunt m (Alg. 7, line 7); links
        only, the caller updates the sums."""
        self._tree.exchange(s, m)
        self._under_cache = None
        self.stats_["restructures"] += 1

    # -- outputs ------------------------------------------------------------------------------
    def _snapshot(self) -> tuple[NDArray[Any], ...]:
        """Parents, counts, liveness, and the heights and scores the last delta stored."""
        t = self._tree
        n = t.n_nodes
        heights, scores = getattr(self, "_stored", (np.zeros(0, np.int32), np.zeros(0)))
        return t.parent[:n].copy(), t.count[:n].copy(), t.alive[:n].copy(), heights, scores

    def _delta_since(
        self,
        before: tuple[NDArray[Any], ...],
        heights: NDArray[np.int32],
        scores: NDArray[np.float64],
    ) -> ClusteringDelta:
        """Diff against the last delta: every node whose stored attributes changed.

        Rotations, grafts and restructures change heights and scores of nodes whose
        leaf count stays the same, so counts alone do not tell what a store must
        rewrite; the heights and scores stored by the previous delta are compared too.
        """
        t = self._tree
        n, m = t.n_nodes, before[0].shape[0]
        old_parent = np.r_[before[0], np.full(n - m, _NONE)]
        old_count = np.r_[before[1], np.zeros(n - m, np.int64)]
        was_alive = np.r_[before[2], np.zeros(n - m, bool)]
        old_height = np.r_[before[3], np.full(n - before[3].shape[0], -1, np.int32)]
        old_score = np.r_[before[4], np.full(n - before[4].shape[0], np.nan)]
        parent, alive = t.parent[:n], t.alive[:n]
        moved = parent != old_parent
        retired_edges = np.flatnonzero(moved & (old_parent != _NONE) & was_alive)
        added_edges = np.flatnonzero(moved & (parent != _NONE) & alive)
        rescored = ~((scores == old_score) | (np.isnan(scores) & np.isnan(old_score)))
        stale = (t.count[:n] != old_count) | (heights != old_height) | rescored
        changed = np.flatnonzero(alive & (stale | ~was_alive))
        self._stored = (heights.copy(), scores.copy())
        return ClusteringDelta(
            node_id=changed,
            is_leaf=t.point_of[changed] != _NONE,
            size=t.count[changed],
            score=scores[changed],
            level_lo=heights[changed],
            level_hi=heights[changed],
            retired=np.flatnonzero(was_alive & ~alive),
            edges_added=np.stack([added_edges, parent[added_edges]], axis=1),
            edges_retired=np.stack([retired_edges, old_parent[retired_edges]], axis=1),
            algorithm=self.mode,
        )

    def _export(self, heights: NDArray[np.int32], scores: NDArray[np.float64]) -> Hierarchy:
        """The tree renumbered to the `er cluster` contract."""
        t = self._tree
        leaves = self._leaf_ids[: self.n_points_]
        internal = np.flatnonzero(t.alive[: t.n_nodes] & (t.point_of[: t.n_nodes] == _NONE))
        new_id = np.full(t.n_nodes, _NONE, np.int64)
        new_id[leaves] = np.arange(leaves.size)
        new_id[internal] = leaves.size + np.arange(internal.size)
        nodes = np.r_[leaves, internal]
        child = nodes[t.parent[nodes] != _NONE]
        edges = np.stack([new_id[child], new_id[t.parent[child]]], axis=1)
        return Hierarchy(
            n_points=int(leaves.size),
            edges=edges,
            score=scores[nodes],
            level_lo=heights[nodes],
            level_hi=heights[nodes],
            algorithm=self.mode,
            params=get_params(self),
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "_tree"):
            raise NotFittedError("This Grinch instance is not fitted yet; call fit.")
