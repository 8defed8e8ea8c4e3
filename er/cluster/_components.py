"""MBSCC with a floor, batch by batch over the components a batch touches (issue #30).

With a floor ``tau_min > 0`` and a linkage read off the graph's edges (average, single,
mean), two clusters can only ever merge across an edge of weight ``>= tau_min``: each
of these linkages is at most the largest edge between the two clusters, and no round's
threshold is below the floor. So the hierarchy below the root is a forest, one part
per connected component of the graph's edges ``>= tau_min`` ("floor components"), and
each part depends only on its component's edges. A cluster whose best neighbour lies
outside its component has linkage ``< tau_min`` to it and merges with nothing in that
round, which is what it does when the other components are left out.

A mini-batch writes the k-NN lists of the new points and rewrites those of the old
points a new point enters (dissertation §4.2, U(0)). An edge's value is the larger of
its two list entries, so every pair whose value changed has an entry in one of those
lists, before or after (:func:`changed_points`). A changed pair *matters* when its
value before or after is at or above the floor (it may join or split floor
components), or when its two ends are old points of one floor component (the linkage
inside a component reads every pair of it, those under the floor too). The points to
redo are ``S`` = the new points and every point of a floor component holding an old
end of a pair that matters. They are closed: an edge of the new graph at or above the
floor from an old point of ``S`` either was one before (its ends shared a component,
in ``S`` whole) or changed and matters (both ends are in ``S``); one from a new point
changed and matters. And a component outside ``S`` is as it was: a changed pair inside
it would matter, and one leaving it stayed under the floor, where no merge crosses.
So a pair from a new point to an old one under the floor redoes nothing (U(0)'s old
points redid 3.6-4.4x as many points on people at 48k-296k, the same deltas: issue
#56, bench/RESULTS.md "What a writer step re-derives as the collection grows").
Running the rounds on ``S``'s own graph gives exactly what a run over every point
gives for those points (batch SCC with the same thresholds), and the rest of the
forest is as it was. The cost of a batch follows ``|S|`` and its edges, not n: on
synthetic people scored by the pair model, floor components held at most 7 points.

The structure is kept by stable id (:class:`Forest`); the root that joins the tops
has score 0 (the pipeline's weights, probabilities or clipped means, are >= 0, where
batch SCC's root score ``min(best, 0)`` is 0 too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse import csgraph

from er._arrays import grown
from er.cluster._complete import REFINE_PASSES, Completion
from er.cluster._graph import knn_lists_graph
from er.cluster._hierarchy import Hierarchy
from er.cluster._mbscc_ids import _Members, match_ids
from er.cluster._snapshot import _Snapshot
from er.delta import ClusteringDelta


@dataclass
class Touched:
    """What one batch redid: the points ``S`` and their forest, in stable ids.

    Attributes
    ----------
    points : ndarray of int64, shape (s,)
        Point indices of ``S``, ascending.
    hierarchy : Hierarchy or None
        The forest over ``S`` (its points are ``points``, in that order), no root;
        None for a grafted batch (er.cluster._graft), which gives ``labels`` instead.
    ids : ndarray of int64, shape (hierarchy.n_nodes,)
        Stable id of each of its nodes.
    labels : ndarray of int64, shape (s,), optional
        A grafted batch's clusters at the score ``at`` (stable ids), per point: every
        point of each cluster a new point is in.
    at : float
    """

    points: NDArray[np.int64]
    hierarchy: Hierarchy | None
    ids: NDArray[np.int64]
    labels: NDArray[np.int64] | None = None
    at: float = 0.0


class Forest:
    """The floored hierarchy by stable id, and the floor components of the points.

    Node attributes live in arrays indexed by stable id (ids are issued densely from
    0, points and clusters alike), so reading a node is one gather whatever n.

    Attributes
    ----------
    parent : ndarray of int64, shape (cap,)
        Stable id of each node's parent; -1 for none (and for ids not alive).
    size, score, lo, hi, alive : ndarray, shape (cap,)
        Points under each node, its formation score (NaN for points), first and last
        level, and whether the id is a current node.
    comp : ndarray of int64, shape (>= n,)
        Floor component of each point, named by its smallest point index.
    ring : ndarray of int64, shape (>= n,)
        The next point of the same component (a cycle per component).
    root : int
        Stable id of the root over the tops, -1 while fewer than two tops exist.
    n_tops : int
        Nodes without a parent but the root.
    """

    def __init__(self, n_levels: int) -> None:
        self.n_levels = n_levels
        self.parent = np.zeros(0, np.int64)
        self.size = np.zeros(0, np.int64)
        self.score = np.zeros(0)
        self.lo = np.zeros(0, np.int32)
        self.hi = np.zeros(0, np.int32)
        self.alive = np.zeros(0, bool)
        self.comp = np.zeros(0, np.int64)
        self.ring = np.zeros(0, np.int64)
        self.n_points = 0
        self.root = -1
        self.n_tops = 0

    # -- points and components ---------------------------------------------------------
    def touched(self, marked: NDArray[np.int64], n: int) -> NDArray[np.int64]:
        """``S``: points ``n0..n-1`` (new) and every point of the components of the old
        points in ``marked``; ascending, shape (s,)."""
        n0 = self.n_points
        old = marked[marked < n0]
        starts = np.unique(self.comp[old])  # a component's name is one of its points
        parts = [starts, np.arange(n0, n, dtype=np.int64)]
        cur = self.ring[starts]
        # walk every cycle at once: as many steps as the largest component has points
        while cur.size:
            live = cur != starts
            cur, starts = cur[live], starts[live]
            parts.append(cur)
            cur = self.ring[cur]
        return np.unique(np.concatenate(parts))

    def set_components(self, points: NDArray[np.int64], label: NDArray[np.int64], n: int) -> None:
        """Give the points of ``S`` (ascending) their new components (``label`` per point,
        any integers) and grow the per-point arrays to ``n`` points."""
        if n > self.comp.size:  # double the room: a batch copies nothing it did not add
            room = max(n, 2 * self.comp.size)
            self.comp = grown(self.comp, room, -1)
            self.ring = grown(self.ring, room, -1)
        self.n_points = n
        order = np.lexsort((points, label))  # by component, then point
        p, lab = points[order], label[order]
        first = np.r_[True, lab[1:] != lab[:-1]]
        head = np.flatnonzero(first)
        name = np.repeat(p[head], np.diff(np.r_[head, p.size]))  # smallest point
        self.comp[p] = name
        nxt = np.r_[p[1:], 0]
        last = np.r_[head[1:] - 1, p.size - 1]
        nxt[last] = p[head]  # close each cycle
        self.ring[p] = nxt

    def add_points(self, points: NDArray[np.int64], names: NDArray[np.int64]) -> None:
        """Points ``n_points..`` (``points``, shape (b,), ascending and consecutive)
        into the components ``names`` (b,), each an existing component's name or a
        new point's own; the cycles are spliced, nothing else is read."""
        n = int(points[-1]) + 1 if points.size else self.n_points
        if n > self.comp.size:
            room = max(n, 2 * self.comp.size)
            self.comp = grown(self.comp, room, -1)
            self.ring = grown(self.ring, room, -1)
        self.n_points = n
        self.comp[points] = names
        order = np.lexsort((points, names))
        p, name = points[order], names[order]
        head = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
        last = np.r_[head[1:] - 1, p.size - 1]
        nxt = np.r_[p[1:], 0]
        # each run of points goes in after its component's name: name -> run -> old next
        fresh = name[head] == p[head]  # a new component, named by its own first point
        old_next = np.where(fresh, p[head], self.ring[name[head]])
        nxt[last] = old_next
        self.ring[p] = nxt
        grafted = ~fresh
        self.ring[name[head][grafted]] = p[head][grafted]

    # -- nodes -------------------------------------------------------------------------
    def reserve(self, cap: int) -> None:
        """Room for ids below ``cap``."""
        if cap <= self.parent.size:
            return
        cap = max(cap, 2 * self.parent.size)
        self.parent = grown(self.parent, cap, -1)
        self.size = grown(self.size, cap, 0)
        self.score = grown(self.score, cap, np.nan)
        self.lo = grown(self.lo, cap, 0)
        self.hi = grown(self.hi, cap, 0)
        self.alive = grown(self.alive, cap, False)

    def old_nodes(
        self, point_ids: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Every (point row, cluster id) with the cluster an ancestor of the point, the
        root left out; ``point_ids`` (s,) are stable ids, -1 for points not yet placed.

        Returns
        -------
        rows, clusters : ndarray of int64, shape (p,)
        """
        rows = np.flatnonzero(point_ids >= 0)
        up = self.parent[point_ids[rows]]
        out_r, out_c = [rows[:0]], [up[:0]]
        while rows.size:
            live = (up >= 0) & (up != self.root)
            rows, up = rows[live], up[live]
            out_r.append(rows)
            out_c.append(up)
            up = self.parent[up]
        return np.concatenate(out_r), np.concatenate(out_c)

    def snapshot(self, ids: NDArray[np.int64]) -> _Snapshot:
        """The nodes ``ids`` (distinct) and their parent edges, in stable ids."""
        ids = np.sort(np.asarray(ids, np.int64))
        attrs = np.stack([self.size[ids], self.lo[ids], self.hi[ids]], axis=1).astype(np.int64)
        par = self.parent[ids]
        has = par >= 0
        edges = np.stack([ids[has], par[has]], axis=1)
        leaf = np.isnan(self.score[ids]) & (self.lo[ids] == 0)
        return _Snapshot(ids, attrs, self.score[ids], leaf, edges)

    def place(
        self,
        ids: NDArray[np.int64],
        parent: NDArray[np.int64],
        h: Hierarchy,
        sizes: NDArray[np.int64],
    ) -> None:
        """Store the nodes of ``h`` under their stable ``ids`` (parents ``parent``)."""
        self.reserve(int(ids.max(initial=-1)) + 1)
        self.parent[ids] = parent
        self.size[ids] = sizes
        self.score[ids] = h.score
        self.lo[ids] = h.level_lo
        self.hi[ids] = h.level_hi
        self.alive[ids] = True

    def retire(self, ids: NDArray[np.int64]) -> None:
        self.alive[ids] = False
        self.parent[ids] = -1

    def tops_outside(self, exclude: NDArray[np.int64]) -> NDArray[np.int64]:
        """Live nodes without a parent, the root and ``exclude`` left out (a scan of
        every id: only when the root comes or goes)."""
        ids = np.flatnonzero(self.alive & (self.parent < 0))
        return np.setdiff1d(ids[ids != self.root], exclude)

    def hierarchy(
        self, point_ids: NDArray[np.int64], algorithm: str, params: dict[str, Any]
    ) -> tuple[Hierarchy, NDArray[np.int64]]:
        """The whole structure (points first, then clusters by id) and each node's stable
        id; O(ids issued), for readers of the full hierarchy."""
        n = self.n_points
        live = np.flatnonzero(self.alive)
        clusters = np.setdiff1d(live, point_ids[:n])
        ids = np.r_[point_ids[:n], clusters]
        index = np.full(self.parent.size, -1, np.int64)
        index[ids] = np.arange(ids.size)
        par = self.parent[ids]
        has = np.flatnonzero(par >= 0)
        edges = np.stack([has, index[par[has]]], axis=1)
        h = Hierarchy(
            n_points=n,
            edges=edges,
            score=self.score[ids],
            level_lo=self.lo[ids],
            level_hi=self.hi[ids],
            algorithm=algorithm,
            params=params,
        )
        return h, ids


def local_graph(
    points: NDArray[np.int64], idx: NDArray[np.int64], sim: NDArray[np.floating]
) -> sparse.csr_array:
    """The k-NN graph among ``points`` (ascending, shape (s,)) from their own lists.

    Every edge between two points of ``S`` is in one of their lists, so their rows
    alone give the induced graph (:func:`knn_lists_graph` of the lists with
    neighbours outside ``S`` dropped); shape (s, s).
    """
    pos = np.searchsorted(points, idx).clip(max=max(points.size - 1, 0))
    inside = (idx >= 0) & (points[pos] == idx)
    local = np.where(inside, pos, -1)
    return knn_lists_graph(local, np.where(inside, sim, 0.0))


def changed_points(
    forest: Forest,
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    replaced: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.floating]],
    floor: float,
) -> NDArray[np.int64]:
    """The old ends of the pairs a batch changed that matter (the module's docstring):
    those whose floor components :func:`step` redoes; ascending, shape (c,).

    Parameters
    ----------
    forest : Forest
        As before the batch: points ``0..forest.n_points-1`` are the old ones.
    idx, sim : ndarray, shape (n, k)
        Every point's k-NN list after the batch (new points last).
    replaced : tuple (rows (r,), idx (r, k), sim (r, k))
        The old lists the batch rewrote, as they were before it, ``rows`` ascending
        (``_KnnLists.replaced_``); every other old list is as it was.
    floor : float

    Notes
    -----
    O(p k) for the p = (2 r + b) k pairs of those lists and the b new points' lists.
    """
    n0, n = forest.n_points, idx.shape[0]
    rows, idx0, _ = replaced
    if n0 == 0:
        return np.zeros(0, np.int64)
    k = idx.shape[1]
    new = np.arange(n0, n, dtype=np.int64)
    a = np.r_[np.repeat(rows, k), np.repeat(rows, k), np.repeat(new, k)]
    b = np.r_[idx0.ravel(), idx[rows].ravel(), idx[n0:].ravel()]
    ok = b >= 0
    a, b = a[ok], b[ok]
    key = np.unique(np.minimum(a, b) * n + np.maximum(a, b))  # each pair once
    lo, hi = key // n, key % n
    before = np.maximum(
        _entries(idx, sim, lo, hi, n0, replaced), _entries(idx, sim, hi, lo, n0, replaced)
    )
    after = np.maximum(_entries(idx, sim, lo, hi), _entries(idx, sim, hi, lo))
    same = np.zeros(lo.size, bool)  # two old points of one floor component
    old = hi < n0
    same[old] = forest.comp[lo[old]] == forest.comp[hi[old]]
    # float32 values against the floor: the comparison floor_components makes
    matters = (before != after) & ((np.maximum(before, after) >= floor) | same)
    ends = np.r_[lo[matters], hi[matters]]
    return np.unique(ends[ends < n0])


def _entries(
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    n0: int = -1,
    replaced: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.floating]] | None = None,
) -> NDArray[np.float32]:
    """(p,) the similarity at which a[i]'s list holds b[i], -inf where it does not, in
    float32 as the graph holds it (:func:`knn_lists_graph`); with ``replaced``, in the
    lists as they were before the batch (points n0 and above had none)."""
    held, value = idx[a], sim[a].astype(np.float32)
    if replaced is not None:
        rows, idx0, sim0 = replaced
        if rows.size:
            pos = np.searchsorted(rows, a).clip(max=rows.size - 1)
            was = rows[pos] == a
            held[was], value[was] = idx0[pos[was]], sim0[pos[was]]
        held[a >= n0] = -1
    best: NDArray[np.float32] = np.where(held == b[:, None], value, -np.inf).max(
        axis=1, initial=-np.inf
    )
    return best


def floor_components(G: sparse.csr_array, floor: float) -> NDArray[np.int64]:
    """(s,) component label of each row in the graph of G's edges ``>= floor``."""
    keep = G.data >= floor
    row = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    H = sparse.csr_array((G.data[keep], (row[keep], G.indices[keep])), shape=G.shape)
    _, label = csgraph.connected_components(H, directed=False)
    return np.asarray(label, np.int64)


def step(
    forest: Forest,
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    marked: NDArray[np.int64],
    point_ids: NDArray[np.int64],
    agglomerate: Callable[[sparse.csr_array, int], Hierarchy],
    take: Callable[[int], NDArray[np.int64]],
    algorithm: str,
    floor: float,
    completion: Completion | None = None,
) -> tuple[ClusteringDelta, Touched]:
    """Bring the forest up to date after a mini-batch; its delta and what it redid.

    Parameters
    ----------
    forest : Forest
        Updated in place; its points are the first ``forest.n_points`` of ``idx``.
    idx, sim : ndarray, shape (n, k)
        Every point's k-NN list after the batch (new points last).
    marked : ndarray of int64, shape (u,)
        The old points whose floor components are redone (:func:`changed_points`;
        any superset is exact too, U(0) for one); new points in it are ignored.
    point_ids : ndarray of int64, shape (n,)
        Stable id of every point (the new ones issued already).
    agglomerate : callable (graph (s, s), s) -> Hierarchy
        The rounds on a graph over s points, left as a forest.
    take : callable (count) -> ndarray of int64
        Issues new stable ids.
    completion : Completion, optional
        Scores the graph the rounds run on, from the lists' graph among ``S`` and its
        floor components (:meth:`Completion.graph`), then around the clusters of each
        pass (:meth:`Completion.refine`, at most REFINE_PASSES); it keeps every edge
        across two floor components as the lists give it.
    """
    n0, n = forest.n_points, idx.shape[0]
    S = forest.touched(np.asarray(marked, np.int64), n)
    G = local_graph(S, idx[S], sim[S])
    # the lists' components, not the completed graph's: a list edge >= floor that the
    # pair scores put below it must still bring its two ends into one S
    label = floor_components(G, floor)
    if completion is not None:
        G = completion.graph(S, G, label)
    h = agglomerate(G, S.size)
    if completion is not None:
        h = refined(completion, S, G, label, h, agglomerate)
    M = h.leaf_membership()
    pids = point_ids[S]
    old_pids = np.where(n0 <= S, -1, pids)
    prev, old_edges, old_ids = _previous(forest, old_pids)
    ids, _ = match_ids(h, M, pids, prev, old_edges, take)
    parent_local = h.parents()
    tops = np.flatnonzero(parent_local < 0)
    old_tops = np.count_nonzero(np.isin(forest.parent[old_ids], (-1, forest.root)))
    n_tops = forest.n_tops - int(old_tops) + int(tops.size)
    extra = _root_change(forest, n_tops >= 2, old_ids)
    had_root = forest.root >= 0
    before = forest.snapshot(np.r_[old_ids, extra, [forest.root] if had_root else []])
    forest.retire(np.setdiff1d(old_ids, ids))
    if n_tops >= 2 and forest.root < 0:
        forest.root = int(take(1)[0])
    elif n_tops < 2 and forest.root >= 0:
        forest.retire(np.array([forest.root]))
        forest.root = -1
    parent = np.where(parent_local >= 0, ids[np.maximum(parent_local, 0)], forest.root)
    forest.place(ids, parent, h, np.diff(M.indptr))
    forest.parent[extra] = forest.root
    forest.n_tops = n_tops
    forest.set_components(S, label, n)
    after_ids = np.r_[ids, extra]
    if forest.root >= 0:
        place_root(forest, n)
        after_ids = np.r_[after_ids, forest.root]
    delta = forest.snapshot(after_ids).delta_from(before, algorithm)
    return delta, Touched(S, h, ids)


def refined(
    completion: Completion,
    S: NDArray[np.int64],
    G: sparse.csr_array,
    label: NDArray[np.int64],
    h: Hierarchy,
    agglomerate: Callable[[sparse.csr_array, int], Hierarchy],
) -> Hierarchy:
    """The rounds again on G completed around h's clusters, until nothing is added or
    REFINE_PASSES passes are done."""
    for _ in range(REFINE_PASSES):
        refined = completion.refine(S, G, label, h)
        if refined is None:
            break
        G, h = refined, agglomerate(refined, S.size)
    return h


def _previous(
    forest: Forest, old_pids: NDArray[np.int64]
) -> tuple[_Members, NDArray[np.int64], NDArray[np.int64]]:
    """The touched points' old clusters (members as rows of ``old_pids``, shape (s,),
    -1 for new points), their old (child, parent) edges below the root sorted by
    child, and every old node id among them (points and clusters)."""
    rows, clusters = forest.old_nodes(old_pids)
    order = np.lexsort((rows, clusters))
    rows, clusters = rows[order], clusters[order]
    uniq, start = np.unique(clusters, return_index=True)
    indptr = np.r_[start, rows.size].astype(np.int64)
    prev = _Members(uniq, indptr, rows)
    old_ids = np.r_[old_pids[old_pids >= 0], uniq]
    par = forest.parent[old_ids]
    below = (par >= 0) & (par != forest.root)
    edges = np.stack([old_ids[below], par[below]], axis=1)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    return prev, edges, old_ids


def _root_change(forest: Forest, want_root: bool, old_ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """Tops outside the touched nodes whose root edge comes or goes this batch (none
    unless the root itself comes or goes)."""
    if want_root == (forest.root >= 0):
        return np.zeros(0, np.int64)
    if want_root:
        return forest.tops_outside(old_ids)
    under = np.flatnonzero(forest.alive & (forest.parent == forest.root))
    return np.setdiff1d(under, old_ids)


def place_root(forest: Forest, n: int) -> None:
    """The root spans every point, one level above the rounds, score 0."""
    r = forest.root
    forest.reserve(r + 1)
    level = forest.n_levels + 1
    forest.parent[r], forest.size[r], forest.score[r] = -1, n, 0.0
    forest.lo[r] = forest.hi[r] = level
    forest.alive[r] = True
