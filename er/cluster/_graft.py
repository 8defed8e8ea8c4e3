"""A batch grafted onto the clusters it joins instead of re-deriving them (issue #56).

The components marking (:mod:`er.cluster._components`) re-derives every floor component
a batch touches, exactly. On free text one component spans the whole collection (on
20,000 organisation strings it holds 19,978; bench/RESULTS.md, "What a writer step
re-derives as the collection grows"), and its entities grow with it, so neither the
component nor the entities a batch touches are a bounded amount of work. Once the old
floor components a batch's new points reach hold more than ``graft_past`` points, the
batch is grafted instead:

1. its new points are clustered among themselves, as a step over them alone would
   (their lists' graph, completed, the rounds, refined);
2. each of their clusters at ``at`` (the entity cut) meets the old clusters at ``at``
   that its points' lists reach at ``at`` or more;
3. the two are linked by the mean score of GRAFT_PAIRS of their pairs, spread evenly
   over them (every pair when they have no more), scored on demand: average linkage
   estimated from a sample, not bounded by the lists, with the GRAFT_CANDIDATES old
   clusters the new one's lists reach most often;
4. a new cluster whose best such link reaches ``at`` is grafted under that old
   cluster: its nodes formed before the old cluster's first level become children of
   it (an old point alone gets a new parent over both, formed at the link's score).
   Any other new cluster becomes a top of the forest.

The work is the batch's own pairs and at most GRAFT_CANDIDATES * GRAFT_PAIRS per new
cluster, whatever the sizes of the component and its entities; finding an old
cluster's points is one pass over an array of n integers. What it gives up against a
re-derivation (measured in bench/RESULTS.md, "What a writer step re-derives as the
collection grows"): old clusters neither split nor merge with each other, a new
cluster joins one old cluster at most, an old cluster keeps its first level and score
when grafted onto, and nothing is built above ``at`` for the new points (their
clusters hang from the old cluster or the root). The new floor components are joined
to the largest old one each reaches, not merged with each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er._arrays import grown
from er.cluster import _components
from er.cluster._complete import Completion, PairScores
from er.cluster._hierarchy import Hierarchy
from er.delta import ClusteringDelta

# Pairs a new cluster and an old one are linked over: the mean of 128 scores in [0, 1]
# lies within 0.09 of the mean over all their pairs at two standard deviations
# whatever their spread (sd <= 0.5).
GRAFT_PAIRS = 128
# Old clusters a new one is linked to: those its points' lists reach at the cut most
# often, ties to the lower id. With GRAFT_PAIRS, a batch of b new points scores at
# most b * GRAFT_CANDIDATES * GRAFT_PAIRS pairs to graft, whatever the collection.
GRAFT_CANDIDATES = 8


@dataclass
class CutIndex:
    """Each point's cluster at the score ``at``, and each floor component's size.

    Attributes
    ----------
    at : float
    past : int
        A batch whose new points reach old floor components of more points together
        is grafted (:meth:`grafts`).
    ent : ndarray of int64, shape (>= n,)
        Stable id of each point's highest ancestor reached through clusters formed at
        ``at`` or more (``er.evaluation.cut_at_score``); its own id under none.
    csize : ndarray of int64, shape (>= n,)
        Points of each floor component, indexed by its name (``Forest.comp``).
    """

    at: float
    past: int
    ent: NDArray[np.int64]
    csize: NDArray[np.int64]

    @classmethod
    def of(
        cls, forest: _components.Forest, point_ids: NDArray[np.int64], at: float, past: int
    ) -> CutIndex:
        """The index of every point of ``forest`` (O(n) once)."""
        index = cls(at, past, np.zeros(0, np.int64), np.zeros(0, np.int64))
        index.refresh(forest, np.arange(forest.n_points, dtype=np.int64), point_ids)
        return index

    def refresh(
        self, forest: _components.Forest, points: NDArray[np.int64], point_ids: NDArray[np.int64]
    ) -> None:
        """Read ``points`` (shape (s,), whole floor components: a step's ``S``) again
        from the forest."""
        self.room(forest.n_points)
        self.ent[points] = _cluster_at(forest, point_ids[points], self.at)
        name, count = np.unique(forest.comp[points], return_counts=True)
        self.csize[name] = count

    def room(self, n: int) -> None:
        """Room for ``n`` points (doubled as the forest doubles its own)."""
        if self.ent.size < n:
            self.ent = grown(self.ent, max(n, 2 * self.ent.size), -1)
            self.csize = grown(self.csize, max(n, 2 * self.csize.size), 0)

    def grafts(
        self,
        forest: _components.Forest,
        idx: NDArray[np.int64],
        sim: NDArray[np.floating],
        floor: float,
        redo_all: bool,
    ) -> bool:
        """Whether a batch is grafted: the old floor components its new points' lists
        (``idx``, ``sim``, shape (b, k)) reach at the floor hold more than ``past``
        points together (the exact step would re-derive them all, and more). Read off
        the batch's own lists: the pairs it changed are not looked at. A first batch
        (no root yet) and a batch after every list was re-scored (a new pair model)
        are re-derived in full."""
        if redo_all or forest.root < 0:
            return False
        reach = idx[(idx >= 0) & (idx < forest.n_points) & (sim >= floor)]
        return self.redoes_past(forest, reach)

    def redoes_past(self, forest: _components.Forest, old: NDArray[np.int64]) -> bool:
        """Whether the floor components of the old points ``old`` (shape (m,)) hold
        more than ``past`` points together, a new one counted too."""
        names = np.unique(forest.comp[old[old < forest.n_points]])
        return int(self.csize[names].sum()) + 1 > self.past


def marks(
    index: CutIndex | None,
    forest: _components.Forest,
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    replaced: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.floating]],
    floor: float,
    redo_all: bool,
) -> NDArray[np.int64] | None:
    """The old points whose floor components an exact step redoes
    (:func:`_components.changed_points`; every one after a re-scoring), or None when
    the batch is grafted: its new points' lists reach more than ``index.past`` old
    points' components (:meth:`CutIndex.grafts`, read first: the marking's cost grows
    with the lists a batch rewrites), or the marking does. Without ``index``, never."""
    n0 = forest.n_points
    if redo_all:  # every list re-scored: every old point's component redone
        return np.arange(n0, dtype=np.int64)
    if index is not None and index.grafts(forest, idx[n0:], sim[n0:], floor, redo_all):
        return None
    changed = _components.changed_points(forest, idx, sim, replaced, floor)
    if index is not None and forest.root >= 0 and index.redoes_past(forest, changed):
        return None
    return changed


def _cluster_at(forest: _components.Forest, ids: NDArray[np.int64], at: float) -> NDArray[np.int64]:
    """(s,) for nodes ``ids``: the highest ancestor-or-self reached through parents
    formed at ``at`` or more, the root left out."""
    cur = np.array(ids, np.int64)
    live = np.arange(cur.size)
    while live.size:
        up = forest.parent[cur[live]]
        ok = (up >= 0) & (up != forest.root)
        ok[ok] = forest.score[up[ok]] >= at
        cur[live[ok]] = up[ok]
        live = live[ok]
    return cur


def _tops_in(h: Hierarchy, at: float) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each point's highest ancestor-or-self in ``h`` formed at ``at`` or more (shape
    (n_points,)), and each node's such top, -1 for nodes above every one (n_nodes,)."""
    n, parent = h.n_points, h.parents()
    top = np.full(h.n_nodes, -1, np.int64)
    cur = np.arange(n, dtype=np.int64)
    path = [cur]
    while True:
        up = parent[cur]
        ok = up >= 0
        ok[ok] = h.score[up[ok]] >= at
        if not ok.any():
            break
        cur = np.where(ok, up, cur)
        path.append(cur)
    for nodes in path:  # every node on a point's path lies under that point's top
        top[nodes] = cur
    return cur, top


@dataclass
class _Members:
    """The old points of some clusters at the cut (one pass over the n old points).

    Attributes
    ----------
    clusters : ndarray of int64, shape (t,)
        The clusters' stable ids, sorted.
    points : ndarray of int64, shape (m,)
        Their points, by cluster, then in arrival order.
    start : ndarray of int64, shape (t,)
        Where each cluster's points begin in ``points``.
    """

    clusters: NDArray[np.int64]
    points: NDArray[np.int64]
    start: NDArray[np.int64]

    @classmethod
    def of(cls, ent: NDArray[np.int64], n0: int, wanted: NDArray[np.int64]) -> _Members:
        """The points among the first ``n0`` whose cluster (``ent``) is in ``wanted``."""
        clusters = np.unique(wanted)
        points = np.flatnonzero(np.isin(ent[:n0], clusters))
        points = points[np.argsort(ent[points], kind="stable")]
        return cls(clusters, points, np.searchsorted(ent[points], clusters))

    def at(self, clusters: NDArray[np.int64]) -> NDArray[np.int64]:
        """(c,) where each of ``clusters`` (all held) begins in ``points``."""
        return self.start[np.searchsorted(self.clusters, clusters)]

    def sizes(self, clusters: NDArray[np.int64]) -> NDArray[np.int64]:
        """(c,) the points of each of ``clusters`` (all held)."""
        size: NDArray[np.int64] = np.diff(np.r_[self.start, self.points.size])
        return size[np.searchsorted(self.clusters, clusters)]


def _links(
    groups: NDArray[np.int64],
    cand_g: NDArray[np.int64],
    cand_e: NDArray[np.int64],
    members: _Members,
    new_points: NDArray[np.int64],
    pair_scores: PairScores,
) -> NDArray[np.float64]:
    """(c,) mean score over GRAFT_PAIRS pairs of new group ``cand_g[i]`` and old
    cluster ``cand_e[i]`` (every pair when they have no more), spread evenly over the
    grid of the group's points by the cluster's points in arrival order.

    ``groups`` (b,) is each new point's group; ``new_points`` (b,) their indices;
    ``members`` holds every ``cand_e``.
    """
    size = members.sizes(cand_e)
    order = np.argsort(groups, kind="stable")
    g_start = np.searchsorted(groups[order], np.arange(int(groups.max()) + 1))
    g_size = np.bincount(groups, minlength=g_start.size)[cand_g]
    grid = g_size * size
    per = np.minimum(grid, GRAFT_PAIRS)  # pairs of each candidate
    cand = np.repeat(np.arange(cand_g.size), per)
    q = np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per)
    flat = q * np.repeat(grid, per) // np.repeat(per, per)  # evenly over the grid
    a, j = flat // np.repeat(size, per), flat % np.repeat(size, per)
    left = new_points[order[g_start[cand_g][cand] + a]]
    right = members.points[np.repeat(members.at(cand_e), per) + j]
    score = np.nan_to_num(np.asarray(pair_scores(left, right), np.float64))
    total = np.bincount(cand, weights=score, minlength=cand_g.size)
    mean: NDArray[np.float64] = total / np.maximum(per, 1).astype(np.float64)
    return mean


def step(
    forest: _components.Forest,
    index: CutIndex,
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    point_ids: NDArray[np.int64],
    agglomerate: Callable[[sparse.csr_array, int], Hierarchy],
    take: Callable[[int], NDArray[np.int64]],
    algorithm: str,
    taus: NDArray[np.float64],
    completion: Completion,
) -> tuple[ClusteringDelta, _components.Touched]:
    """Graft a mini-batch (the module's docstring); its delta and what it changed: the
    new points and every point of the old clusters they joined, with their clusters at
    ``at`` (``Touched.labels``).

    Parameters
    ----------
    forest : Forest
        Updated in place; it has a root (two tops or more).
    index : CutIndex
        As of the forest before the batch; updated in place.
    idx, sim : ndarray, shape (n, k)
        Every point's k-NN list after the batch (new points last).
    taus : ndarray of float64, shape (n_levels,)
        The levels' thresholds, decreasing.
    """
    n0, n = forest.n_points, idx.shape[0]
    new = np.arange(n0, n, dtype=np.int64)
    floor, at = float(taus[-1]), index.at
    G = _components.local_graph(new, idx[new], sim[new])
    label = _components.floor_components(G, floor)
    G = completion.graph(new, G, label)
    h = _components.refined(completion, new, G, label, agglomerate(G, new.size), agglomerate)
    top_of_point, top_of_node = _tops_in(h, at)
    tops, group = np.unique(top_of_point, return_inverse=True)
    group = group.astype(np.int64)
    target, score, members = _targets(
        group, tops.size, idx[new], sim[new], index, n0, new, completion
    )
    # an old point last at level 0 has no level for a parent under its own
    at_zero = forest.hi[np.maximum(target, 0)] < 1
    target[(target >= 0) & at_zero & (forest.lo[np.maximum(target, 0)] == 0)] = -1
    # a grafted point joins its target's floor component: each component's tree holds
    # its own points alone, as the exact step takes them (er.cluster._components)
    joins = _target_components(forest, members, target)[group]
    before_ids = _chain(forest, np.unique(target[target >= 0]))
    before = forest.snapshot(np.r_[before_ids, forest.root])
    made = _place(forest, index, h, top_of_node, tops, target, score, point_ids, take, taus)
    _join_components(forest, index, label, joins, idx[new], sim[new], floor, n)
    index.ent[new] = _cluster_at(forest, point_ids[new], at)
    _components.place_root(forest, n)
    after = forest.snapshot(np.unique(np.r_[before_ids, made, forest.root]))
    joined = np.unique(index.ent[new])
    points = np.flatnonzero(np.isin(index.ent[:n], joined))
    labels = index.ent[points].copy()
    touched = _components.Touched(points, None, np.zeros(0, np.int64), labels, at)
    return after.delta_from(before, algorithm), touched


def _targets(
    group: NDArray[np.int64],
    n_groups: int,
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    index: CutIndex,
    n0: int,
    new: NDArray[np.int64],
    completion: Completion,
) -> tuple[NDArray[np.int64], NDArray[np.float64], _Members]:
    """(g,) the old cluster each new group is grafted under (stable id, -1 for none),
    the link's score, and the points of every old cluster linked to."""
    rows = np.repeat(np.arange(new.size), idx.shape[1])
    nb, s = idx.ravel(), sim.ravel()
    ok = (nb >= 0) & (nb < n0) & (s >= index.at)
    e = index.ent[nb[ok]]
    m = int(e.max(initial=0)) + 1
    key, hits = np.unique(group[rows[ok]] * m + e, return_counts=True)
    cand_g, cand_e = key // m, key % m
    # each group's GRAFT_CANDIDATES most reached, by hits, then id
    by = np.lexsort((cand_e, -hits, cand_g))
    rank = np.arange(by.size) - np.searchsorted(cand_g[by], cand_g[by])
    keep = np.sort(by[rank < GRAFT_CANDIDATES])
    cand_g, cand_e = cand_g[keep], cand_e[keep]
    target, best = np.full(n_groups, -1, np.int64), np.full(n_groups, -np.inf)
    members = _Members.of(index.ent, n0, cand_e)
    if cand_g.size == 0:
        return target, best, members
    link = _links(group, cand_g, cand_e, members, new, completion.pair_scores)
    order = np.lexsort((-link, cand_g))  # each group's best first
    first = np.r_[True, cand_g[order][1:] != cand_g[order][:-1]]
    g, e, v = cand_g[order][first], cand_e[order][first], link[order][first]
    keep = v >= index.at
    target[g[keep]], best[g[keep]] = e[keep], v[keep]
    return target, best, members


def _chain(forest: _components.Forest, ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """``ids`` and every ancestor of theirs below the root, distinct."""
    out, cur = [ids], ids
    while cur.size:
        cur = forest.parent[cur]
        cur = np.unique(cur[(cur >= 0) & (cur != forest.root)])
        out.append(cur)
    return np.unique(np.concatenate(out))


def _place(
    forest: _components.Forest,
    index: CutIndex,
    h: Hierarchy,
    top_of_node: NDArray[np.int64],
    tops: NDArray[np.int64],
    target: NDArray[np.int64],
    score: NDArray[np.float64],
    point_ids: NDArray[np.int64],
    take: Callable[[int], NDArray[np.int64]],
    taus: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Store the new groups' nodes, each under its target or the root; the stable ids
    made (the kept nodes of ``h`` and the new parents of old points), shape (m,)."""
    b, n0 = h.n_points, forest.n_points
    target = _parents_for_points(forest, index, target, score, take, taus, n0)
    bound = np.where(target >= 0, forest.lo[np.maximum(target, 0)], forest.n_levels + 1)
    group = np.full(h.n_nodes, -1, np.int64)
    under = top_of_node >= 0
    group[under] = np.searchsorted(tops, top_of_node[under])
    limit = np.where(under, bound[np.maximum(group, 0)], 0)
    keep = np.flatnonzero(h.level_lo < limit)  # points always: every bound is >= 1
    parent_local = h.parents()
    ids = np.full(h.n_nodes, -1, np.int64)
    ids[:b] = point_ids[n0 : n0 + b]
    ids[keep[keep >= b]] = take(int(np.count_nonzero(keep >= b)))
    up = parent_local[keep]
    inside = up >= 0
    inside[inside] = ids[up[inside]] >= 0
    hang = target[group[keep]]  # a dropped parent: the group's target, or the root
    parent = np.where(inside, ids[np.maximum(up, 0)], np.where(hang >= 0, hang, forest.root))
    hi = np.minimum(h.level_hi[keep], limit[keep] - 1)
    hi = np.where(~inside & (hang < 0), forest.n_levels, hi)  # a new top spans every level
    sizes = np.diff(h.leaf_membership().indptr)[keep]
    nodes = ids[keep]
    forest.reserve(int(nodes.max(initial=-1)) + 1)
    forest.parent[nodes], forest.size[nodes], forest.score[nodes] = parent, sizes, h.score[keep]
    forest.lo[nodes], forest.hi[nodes], forest.alive[nodes] = h.level_lo[keep], hi, True
    forest.n_tops += int(np.count_nonzero(~inside & (hang < 0)))
    grafted = target[group[:b]]
    _grow_chain(forest, grafted[grafted >= 0])
    made = np.r_[nodes, np.unique(target[target >= 0])]
    return np.unique(made[made >= 0])


def _parents_for_points(
    forest: _components.Forest,
    index: CutIndex,
    target: NDArray[np.int64],
    score: NDArray[np.float64],
    take: Callable[[int], NDArray[np.int64]],
    taus: NDArray[np.float64],
    n0: int,
) -> NDArray[np.int64]:
    """``target`` (g,) with each old point in it replaced by a new parent over it,
    formed at the best link's score (a point has no level to graft under)."""
    point = target >= 0
    point[point] = forest.lo[target[point]] == 0
    if not point.any():
        return target
    olds, inverse = np.unique(target[point], return_inverse=True)
    best = np.full(olds.size, -np.inf)
    np.maximum.at(best, inverse, score[point])
    made = take(olds.size)
    # the first level whose threshold the link reaches, at most the point's last
    level = 1 + np.searchsorted(-taus, -best, side="left")
    level = np.clip(level, 1, np.maximum(forest.hi[olds], 1)).astype(np.int32)
    forest.reserve(int(made.max()) + 1)
    forest.parent[made], forest.size[made], forest.score[made] = forest.parent[olds], 1, best
    forest.lo[made], forest.hi[made], forest.alive[made] = level, forest.hi[olds], True
    forest.parent[olds], forest.hi[olds] = made, level - 1
    moved = np.flatnonzero(np.isin(index.ent[:n0], olds))
    index.ent[moved] = made[np.searchsorted(olds, index.ent[moved])]
    out = target.copy()
    out[point] = made[inverse]
    return out


def _grow_chain(forest: _components.Forest, grafted: NDArray[np.int64]) -> None:
    """Add one point per entry of ``grafted`` (stable ids, repeats counted) to that
    node and to every ancestor of it below the root."""
    nodes, counts = np.unique(grafted, return_counts=True)
    cur: NDArray[np.int64] = nodes.astype(np.int64)
    count: NDArray[np.int64] = counts.astype(np.int64)
    while cur.size:
        forest.size[cur] += count
        up = forest.parent[cur]
        ok = (up >= 0) & (up != forest.root)
        # two children of one parent: their counts add up
        parents = np.unique(up[ok], return_inverse=True)
        cur = parents[0].astype(np.int64)
        count = np.bincount(parents[1], weights=count[ok], minlength=cur.size).astype(np.int64)


def _target_components(
    forest: _components.Forest, members: _Members, target: NDArray[np.int64]
) -> NDArray[np.int64]:
    """(g,) the floor component of each group's target (that of its first old point: a
    target is the cluster at ``at`` of its points), -1 for none; ``members`` holds
    every target."""
    out = np.full(target.size, -1, np.int64)
    has = target >= 0
    out[has] = forest.comp[members.points[members.at(target[has])]]
    return out


def _join_components(
    forest: _components.Forest,
    index: CutIndex,
    label: NDArray[np.int64],
    joins: NDArray[np.int64],
    idx: NDArray[np.int64],
    sim: NDArray[np.floating],
    floor: float,
    n: int,
) -> None:
    """The new points' floor components: a grafted point its target's (``joins``,
    shape (b,), -1 for none); another, with the rest of its own component (``label``,
    shape (b,)), the largest old one its lists reach at the floor, or its own (old
    components a batch links together are not merged: grafting never re-derives
    them)."""
    n0 = forest.n_points
    b = n - n0
    rows = np.repeat(np.arange(b), idx.shape[1])
    nb, s = idx.ravel(), sim.ravel()
    ok = (nb >= 0) & (nb < n0) & (s >= floor)
    name, mine = forest.comp[nb[ok]], label[rows[ok]]
    own = np.full(int(label.max(initial=-1)) + 1, -1, np.int64)
    order = np.lexsort((name, index.csize[name], mine))  # per own component, largest last
    last = np.r_[mine[order][1:] != mine[order][:-1], True]
    own[mine[order][last]] = name[order][last]
    names = np.where(joins >= 0, joins, own[label])
    free = np.flatnonzero(names < 0)  # a new component, named by its first point
    first = np.full(own.size, n, np.int64)
    np.minimum.at(first, label[free], free + n0)
    names[free] = first[label[free]]
    forest.add_points(np.arange(n0, n, dtype=np.int64), names)
    index.room(n)
    np.add.at(index.csize, names, 1)
