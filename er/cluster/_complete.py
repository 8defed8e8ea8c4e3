"""The scored pairs a floor component is linked over (MBSCC ``complete_max``).

Average linkage over the k-NN lists counts a pair missing from them as a similarity of
0, so an entity of more points than the lists hold never links high. With a pair
scorer at hand (the pipeline's pair model), a floor component is linked over more of
its pairs (:func:`complete_components`): every pair of a small one; in a large one its
lists' pairs and those two steps apart, within a budget. An entity larger still than
what that budget reaches is split all the same, and :class:`Completion` then completes
the pairs around the clusters at one threshold, the entity cut (:meth:`Completion.refine`).
Merges stay inside floor components, so what is scored is a function of the
component's own graph and points (er.cluster._components).

With ``against``, the scorer gives only pairs that contradict a match (NaN for the
others), and these join the lists' edges: a mean linkage then counts them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.cluster._graph import score_in_chunks
from er.cluster._hierarchy import Hierarchy

# A pair scored under this is left out of a completed component's graph: it moves any
# mean linkage by less than this, and most pairs of a large component are far below
# it (of Leipzig's 2.55 million affiliation pairs, 3.4% have a match probability
# above 1e-6), so the rounds run on the pairs that can matter.
COMPLETE_MIN = 1e-3
# A pair held against a match (``against``) stays an edge at this score or more: a
# graph's stored zero is no edge, and a mean over pairs must count it.
AGAINST_MIN = 1e-9


# the similarity of any two points by global index: (left (p,), right (p,)) -> (p,)
PairScores = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.floating]]

# A component past the budget scores the pairs of points that both link at this or
# more to a third (or to each other) in the lists: a match probability of 0.5, more
# likely a match than not. See complete_components.
COMPLETE_THROUGH = 0.5


def complete_components(
    G: sparse.csr_array,
    points: NDArray[np.int64],
    label: NDArray[np.int64],
    pair_scores: PairScores,
    max_points: int,
    ask: Callable[[int, NDArray[np.int64], NDArray[np.int64]], tuple[Any, Any]] | None = None,
    against: bool = False,
) -> sparse.csr_array:
    """G with every pair inside each floor component of at most ``max_points`` points
    scored, not only the pairs of the k-NN lists; in a larger component, the pairs of
    its lists and the pairs two steps apart in them (:func:`_pairs_through`).

    Average linkage over the lists counts a pair missing from them as a similarity of
    0, so an entity of more points than the lists hold can never reach a high
    linkage, and the cut that suits it splits small entities poorly (PATSTAT's firms
    against FEBRL's people, ``er.pipeline.config.FREE_TEXT_K``). With every pair of
    a component scored, the linkage between two clusters is their mean pair score,
    whatever their size: average-linkage HAC's own definition (the linkage SCC's
    rounds use, dissertation ch. 4). Merges stay inside floor components (pairs
    across two are left as the lists give them, below the floor), so the components'
    stepping (:func:`step`) still holds: what is scored is a function of the
    component's own graph.

    Free text chains into one component as it grows (9,860 of 10,000 organisations'
    strings), whose every pair would cost the square of its size per batch. Yet few of
    those pairs matter: of the 50 million pairs of 10,000 organisations' strings in
    977 organisations (bench/orgs.py, 120 cities), 2.1 million score 1e-3 or more, and
    the pairs of an entity are reached in two steps through its members' lists. So a
    larger component scores its lists' pairs and every pair of points that both link
    at COMPLETE_THROUGH or more to a third; where those exceed the budget, each point
    stands between only its ``m`` strongest such links, ``m`` the most the budget
    allows. On those 10,000 strings, pairwise F1 at cut 0.4: 0.869 with 2.9 million
    pairs scored; 0.870 with every pair of the component; 0.646 scoring only inside
    the clusters that mean-linkage rounds over the lists formed (er before;
    bench/HISTORY.md). A pair scored under COMPLETE_MIN is no edge, as a pair missing
    from the lists. An entity larger than those pairs reach is completed after the
    rounds (:meth:`Completion.refine`).

    Parameters
    ----------
    G : csr_array, shape (s, s)
        The lists' graph among ``points``.
    points : ndarray of int64, shape (s,)
        Global point index of each row of G.
    label : ndarray of int64, shape (s,)
        Floor component of each row (:func:`floor_components` of G).
    pair_scores : callable (left (p,), right (p,)) -> (p,) scores
        The similarity of any two points, by global index.
    max_points : int
        The pairs of a component of this many points are what one may cost.
    ask : callable (s, left, right) -> (left, right), optional
        Told the pairs to score, gives those it lets through (:meth:`Completion._ask`).
    against : bool, default False
        The scores are evidence against a match (NaN: none): G's edges stay, and the
        scored pairs it lacks are added (module docstring).

    Returns
    -------
    csr_array, shape (s, s)
    """
    left, right = _pairs_to_score(G, label, max_points * (max_points - 1) // 2)
    if ask is not None:
        left, right = ask(G.shape[0], left, right)
    if left.size == 0:
        return G
    if against:
        return _with_against(G, points, left, right, pair_scores)
    left, right, score = _scored(pair_scores, points, left, right, G.dtype)
    # every edge inside a component is scored: only those across two are kept
    return _with_pairs(G, left, right, score, across=label)


def _with_against(
    G: sparse.csr_array,
    points: NDArray[np.int64],
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    pair_scores: PairScores,
) -> sparse.csr_array:
    """G with the pairs (left < right, shape (p,)) it lacks that the scorer holds against
    a match (not NaN), each at its score, at least AGAINST_MIN."""
    s = G.shape[0]
    coo = sparse.triu(G, k=1).tocoo()
    have = np.sort(coo.row.astype(np.int64) * s + coo.col)
    key = left * s + right
    if have.size:
        at = np.searchsorted(have, key).clip(max=have.size - 1)
        key = key[have[at] != key]
    left, right = key // s, key % s
    score = score_in_chunks(lambda a, b: pair_scores(points[a], points[b]), left, right)
    held = ~np.isnan(score)
    score = np.maximum(score[held], AGAINST_MIN).astype(G.dtype)
    return _with_pairs(G, left[held], right[held], score) if held.any() else G


def _scored(
    pair_scores: PairScores,
    points: NDArray[np.int64],
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    dtype: Any,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[Any]]:
    """The pairs (rows ``left``, ``right``, shape (p,)) that score COMPLETE_MIN or
    more, and their scores, asked in chunks (:func:`score_in_chunks`)."""
    score = score_in_chunks(lambda a, b: pair_scores(points[a], points[b]), left, right)
    some = score >= COMPLETE_MIN
    return left[some], right[some], score[some].astype(dtype)


def _pairs_to_score(
    G: sparse.csr_array, label: NDArray[np.int64], budget: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(left, right) rows of G, left < right, shape (p,): every pair of each floor
    component (``label``, shape (s,)) of at most ``budget`` pairs, and in a larger one
    :func:`_pairs_through`'s."""
    sizes = np.bincount(label)
    order = np.argsort(label, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)]
    lefts, rights = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for c in np.flatnonzero(sizes >= 2):
        members = order[starts[c] : starts[c + 1]]
        if members.size * (members.size - 1) // 2 <= budget:
            i, j = np.triu_indices(members.size, 1)
        else:
            i, j = _pairs_through(G[members][:, members], COMPLETE_THROUGH, budget)
        lefts.append(members[i])
        rights.append(members[j])
    return np.concatenate(lefts), np.concatenate(rights)


def _pairs_through(
    H: sparse.csr_array, through: float, budget: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(left, right), left < right, shape (p,): the pairs of H's edges and every pair
    of points that both have an edge ``>= through`` to one point; each point stands
    between its ``m`` strongest such edges (ties to the lower column), ``m`` the most
    for which the pairs number at most ``budget`` (no limit when they do anyway;
    with m = 0, H's edges alone, whatever their number).

    The pairs grow with m (a point's m strongest edges are among its m + 1
    strongest), so m is found by bisection; a count that ignores the pairs two points
    share (H's edges plus each point's ``min(m, degree) + 1`` choose 2) is an upper
    bound, which settles the lower end without a product.

    Parameters
    ----------
    H : csr_array, shape (s, s)
        A floor component's lists' graph (symmetric; an edge stored at similarity 0
        is an edge too: its pair is scored like any other).
    """
    s = H.shape[0]
    row = np.repeat(np.arange(s), np.diff(H.indptr))
    edges = sparse.csr_array((np.ones(H.nnz), (row, H.indices)), shape=(s, s))
    listed = sparse.triu(edges, 1).tocoo()
    strong = H.data >= through
    r, c, v = row[strong], H.indices[strong].astype(np.int64), H.data[strong]
    order = np.lexsort((c, -v, r))  # each row's edges, strongest first
    r, c = r[order], c[order]
    rank = np.arange(r.size) - np.searchsorted(r, r)
    degree = np.bincount(r, minlength=s)

    def pairs(m: int) -> sparse.coo_array:
        if m == 0:
            return listed
        kept = rank < m
        hub, member = np.r_[r[kept], np.arange(s)], np.r_[c[kept], np.arange(s)]
        B = sparse.csr_array((np.ones(hub.size), (hub, member)), shape=(s, s))
        return sparse.triu(B.T @ B + edges, 1).tocoo()

    def at_most(m: int) -> int:
        d = np.minimum(degree, m)
        return int(listed.nnz) + int((d * (d + 1) // 2).sum())

    lo, hi = 0, int(degree.max(initial=0))
    if listed.nnz > budget:
        hi = 0
    while lo < hi and at_most(lo + 1) <= budget:  # within the budget for certain
        lo += 1
    Q = pairs(hi)  # every link: one product when they fit (10,000 organisations' strings)
    if Q.nnz > budget:
        fitting = None  # the pairs at lo, once a product has given them
        hi -= 1
        while lo < hi:  # the largest m whose pairs number at most the budget
            mid = (lo + hi + 1) // 2
            at_mid = pairs(mid)
            if at_mid.nnz <= budget:
                lo, fitting = mid, at_mid
            else:
                hi = mid - 1
        Q = pairs(lo) if fitting is None else fitting
    return Q.row.astype(np.int64), Q.col.astype(np.int64)


# -- completing the pairs around the cut's clusters ----------------------------------------
# An entity larger than a component's budget reaches keeps many of its pairs unscored;
# average linkage counts them as 0 and splits it, its parts linking above the cut over
# all their pairs but under it over the scored ones (bench/HISTORY.md, 2026-11-27).
# Two clusters whose scored pairs average the cut or more are looked at closer:
# PROBE_PAIRS of their pairs drawn at random estimate their average linkage over all
# pairs without bias, and within PROBE_MARGIN of the cut all their pairs are scored.
# Drawn with a fixed seed: a replayed batch completes the same pairs.
PROBE_PAIRS = 32
PROBE_MARGIN = 0.1
PROBE_SEED = 0
# Rounds of (complete around the cut's clusters, agglomerate again) per batch: each pass
# finds fewer pairs to add, and two give the F1 of more (bench/HISTORY.md, 2026-11-27).
REFINE_PASSES = 2


def clusters_at(h: Hierarchy, at: float) -> NDArray[np.int64]:
    """(h.n_points,) dense label of each point's largest ancestor formed at a score
    ``>= at``; a point under none is a cluster of its own. Pointer jumping over the
    parent links: O(n_nodes log depth)."""
    n = h.n_points
    parent = h.parents()
    high = h.score >= at
    high[:n] = False
    node = np.arange(h.n_nodes, dtype=np.int64)
    # each node steps to its parent while that parent formed at `at` or more
    up = np.where((parent >= 0) & high[np.maximum(parent, 0)], parent, node)
    while True:
        nxt = up[up]
        if np.array_equal(nxt, up):
            break
        up = nxt
    return np.unique(up[:n], return_inverse=True)[1].astype(np.int64)


def _group_links(
    G: sparse.csr_array, group: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """For every two groups with an edge of G between them (a < b): the sum and the
    number of those edges, shape (q,) each."""
    s, g = group.size, int(group.max(initial=-1)) + 1
    A = sparse.csr_array((np.ones(s), (np.arange(s), group)), shape=(s, g))
    total = sparse.triu(A.T @ G @ A, 1).tocoo()
    pattern = G.copy()
    pattern.data = np.ones_like(pattern.data)
    count = (A.T @ pattern @ A).tocsr()
    a, b = total.row.astype(np.int64), total.col.astype(np.int64)
    return a, b, total.data, np.asarray(count[a, b]).ravel()


def _members(group: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Rows ordered by group and each group's start in them (indptr, shape (g + 1,))."""
    order = np.argsort(group, kind="stable")
    return order, np.r_[0, np.cumsum(np.bincount(group))]


def _block_pairs(
    order: NDArray[np.int64], starts: NDArray[np.int64], u: int, v: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every pair inside group ``u`` (u == v), or of a row of ``u`` and one of ``v``."""
    A = order[starts[u] : starts[u + 1]]
    if u == v:
        i, j = np.triu_indices(A.size, 1)
        return A[i], A[j]
    B = order[starts[v] : starts[v + 1]]
    return np.repeat(A, B.size), np.tile(B, A.size)


def candidate_blocks(
    G: sparse.csr_array,
    group: NDArray[np.int64],
    at: float,
    part: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The blocks worth completing, as group pairs (x, y), shape (q,): each group of two
    or more (x == y), and two groups of one part whose scored pairs (G's edges, those
    kept at COMPLETE_MIN or more) average ``at`` or more where all their pairs, the
    unscored at 0, do not.

    Parameters
    ----------
    G : csr_array, shape (s, s)
        The scored pairs (symmetric).
    group : ndarray of int64, shape (s,)
        Dense label of each row (:func:`clusters_at`).
    part : ndarray of int64, shape (g,)
        The floor component of each group, -1 for one left as it is (scored whole).
    """
    size = np.bincount(group)
    inside = np.flatnonzero((size >= 2) & (part >= 0))
    a, b, total, count = _group_links(G, group)
    pairs = size[a] * size[b]
    close = (total >= at * count) & (total < at * pairs) & (part[a] >= 0) & (part[a] == part[b])
    return np.r_[inside, a[close]], np.r_[inside, b[close]]


def probed(
    x: NDArray[np.int64],
    y: NDArray[np.int64],
    order: NDArray[np.int64],
    starts: NDArray[np.int64],
    part: NDArray[np.int64],
    at: float,
    probe: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.floating]],
) -> NDArray[np.bool_]:
    """(q,) whether each block stays: an inside block, a cross block of at most
    2 * PROBE_PAIRS pairs (cheaper scored whole), or one whose probe, PROBE_PAIRS of
    its pairs drawn at random, scored by ``probe`` and averaged, is ``at -
    PROBE_MARGIN`` or more. Each floor component draws from its own generator seeded
    PROBE_SEED, in its blocks' order: what it draws depends on its own groups alone.
    ``order`` and ``starts``: the rows by group (:func:`_members`)."""
    size = np.diff(starts)
    keep: NDArray[np.bool_] = (x == y) | (size[x] * size[y] <= 2 * PROBE_PAIRS)
    ask = np.flatnonzero(~keep)
    picks_a, picks_b = [], []
    for c in np.unique(part[x[ask]]):
        rng = np.random.default_rng(PROBE_SEED)
        mine = ask[part[x[ask]] == c]
        u, v = x[mine], y[mine]
        picks_a.append(_draw(rng, starts, size, u))
        picks_b.append(_draw(rng, starts, size, v))
    if not picks_a:
        return keep
    # components in ascending order above, ask's own order below: put them back
    by_part = np.argsort(part[x[ask]], kind="stable")
    left = order[np.concatenate(picks_a)].ravel()
    right = order[np.concatenate(picks_b)].ravel()
    scores = score_in_chunks(probe, left, right)
    estimate = np.empty(ask.size)
    estimate[by_part] = scores.reshape(ask.size, PROBE_PAIRS).mean(axis=1)
    keep[ask] = estimate >= at - PROBE_MARGIN
    return keep


def _draw(
    rng: np.random.Generator,
    starts: NDArray[np.int64],
    size: NDArray[np.int64],
    u: NDArray[np.int64],
) -> NDArray[np.int64]:
    """(len(u), PROBE_PAIRS) positions (in the group order) of rows drawn from each
    group of ``u``, with replacement."""
    return starts[u][:, None] + rng.integers(size[u][:, None], size=(u.size, PROBE_PAIRS))


def chosen_blocks(
    new: NDArray[np.int64], whole: NDArray[np.int64], part: NDArray[np.int64], budget: int | None
) -> NDArray[np.int64]:
    """Indices of the blocks to score: those with a pair not scored yet (``new``, shape
    (q,)), and under a budget per floor component (``part`` of each block), smallest
    first while their new pairs fit; a block of more pairs than the budget
    (``whole``) is left as it is, as a component of more is (a group of 50,000 would
    be 1.25 billion pairs)."""
    idx = np.flatnonzero(new > 0)
    if budget is None:
        return idx
    idx = idx[whole[idx] <= budget]
    idx = idx[np.lexsort((new[idx], part[idx]))]  # by component, smallest first
    p, cost = part[idx], new[idx]
    spent = np.cumsum(cost)
    first = np.r_[True, p[1:] != p[:-1]]
    spent -= np.maximum.accumulate(np.where(first, spent - cost, 0))  # per component
    return np.sort(idx[spent <= budget])


def pairs_around(
    G: sparse.csr_array,
    group: NDArray[np.int64],
    at: float,
    probe: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.floating]],
    part: NDArray[np.int64] | None = None,
    budget: int | None = None,
    asked: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.int64]] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(left, right) rows, left < right, distinct: the pairs of the blocks
    :func:`candidate_blocks` names and :func:`probed` keeps, as :func:`chosen_blocks`
    chooses them.

    Parameters
    ----------
    part : ndarray of int64, shape (g,), optional
        The floor component of each group, -1 for one left as it is; default: one.
    budget : int, optional
        New pairs per floor component at most.
    asked : callable (x (q,), y (q,)) -> (q,), optional
        How many pairs of each block are scored already; default: none.
    """
    part = np.zeros(int(group.max(initial=-1)) + 1, np.int64) if part is None else part
    order, starts = _members(group)
    x, y = candidate_blocks(G, group, at, part)
    keep = probed(x, y, order, starts, part, at, probe)
    x, y = x[keep], y[keep]
    size = np.diff(starts)
    whole = np.where(x == y, size[x] * (size[x] - 1) // 2, size[x] * size[y])
    new = whole - (asked(x, y) if asked is not None else np.zeros(x.size, np.int64))
    lefts, rights = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i in chosen_blocks(new, whole, part[x], budget).tolist():
        left, right = _block_pairs(order, starts, int(x[i]), int(y[i]))
        lefts.append(left)
        rights.append(right)
    left, right = np.concatenate(lefts), np.concatenate(rights)
    return np.minimum(left, right), np.maximum(left, right)


class Completion:
    """The scored graph of one batch's touched points: :meth:`graph` before the first
    agglomeration, :meth:`refine` after each (MBSCC ``complete_max``, ``complete_at``).

    Parameters
    ----------
    pair_scores : callable (left (p,), right (p,)) -> (p,) scores
        The similarity of any two points, by global index.
    max_points : int
        The pairs of a component of this many points are what one may cost; and what
        a pass of :meth:`refine` may add to one.
    at : float
        The threshold whose clusters :meth:`refine` completes around; 0: never.
    within : float
        :meth:`graph` completes the components of the list edges at or above this
        score inside the floor components (MBSCC ``complete_within``); 0: the floor
        components themselves.
    against : bool
        The scorer gives evidence against a match only (:func:`complete_components`);
        :meth:`refine` then adds nothing (``at`` must be 0).
    """

    def __init__(
        self,
        pair_scores: PairScores,
        max_points: int,
        at: float = 0.0,
        within: float = 0.0,
        against: bool = False,
    ) -> None:
        self.pair_scores = pair_scores
        self.against = against
        self.max_points = max_points
        self.budget = max_points * (max_points - 1) // 2
        self.at = at
        self.within = within
        self._asked = np.zeros(0, np.int64)  # sorted keys (left * s + right), large parts
        self._large = np.zeros(0, bool)  # per row: in a component past the budget

    def graph(
        self, points: NDArray[np.int64], G: sparse.csr_array, label: NDArray[np.int64]
    ) -> sparse.csr_array:
        """:func:`complete_components` of the lists' graph G (s, s) among ``points``,
        over the floor components ``label`` (s,), or over their parts joined by edges
        of ``within`` or more."""
        if self.within:
            label = _finer(G, label, self.within)
        sizes = np.bincount(label)
        self._large = (sizes * (sizes - 1) // 2 > self.budget)[label]
        ask = self._ask if self.at and self._large.any() else None
        return complete_components(
            G, points, label, self.pair_scores, self.max_points, ask, self.against
        )

    def refine(
        self,
        points: NDArray[np.int64],
        G: sparse.csr_array,
        label: NDArray[np.int64],
        h: Hierarchy,
    ) -> sparse.csr_array | None:
        """G with :func:`pairs_around` the clusters of ``h`` at ``at`` scored, inside the
        components past the budget (a smaller one has every pair scored), each within
        the budget; None when no pair is added."""
        if not self.at or not self._large.any():
            return None
        group = clusters_at(h, self.at)
        # a cluster lies inside one floor component: merges never cross them
        part = np.full(int(group.max()) + 1, -1, np.int64)
        part[group[self._large]] = label[self._large]
        s = G.shape[0]

        def probe(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.floating]:
            return self.pair_scores(points[left], points[right])

        def asked(x: NDArray[np.int64], y: NDArray[np.int64]) -> NDArray[np.int64]:
            if not self._asked.size:
                return np.zeros(x.size, np.int64)
            ga, gb = group[self._asked // s], group[self._asked % s]
            g = part.size
            held, count = np.unique(np.minimum(ga, gb) * g + np.maximum(ga, gb), return_counts=True)
            key = np.minimum(x, y) * g + np.maximum(x, y)
            pos = np.searchsorted(held, key).clip(max=held.size - 1)
            return np.where(held[pos] == key, count[pos], 0)

        left, right = pairs_around(G, group, self.at, probe, part, self.budget, asked)
        left, right = self._ask(s, left, right)
        if left.size == 0:
            return None
        left, right, score = _scored(self.pair_scores, points, left, right, G.dtype)
        return _with_pairs(G, left, right, score) if left.size else None

    def _ask(
        self, s: int, left: NDArray[np.int64], right: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Of distinct pairs (left < right, shape (p,)), those not asked before; those
        inside a component past the budget are kept as asked."""
        key = left * s + right
        if self._asked.size:
            at = np.searchsorted(self._asked, key).clip(max=self._asked.size - 1)
            key = key[self._asked[at] != key]
        mine = np.sort(key[self._large[key // s]])
        # two sorted runs, disjoint: a stable sort (timsort) merges them in one pass
        self._asked = np.sort(np.r_[self._asked, mine], kind="stable")
        return key // s, key % s


def _finer(G: sparse.csr_array, label: NDArray[np.int64], score: float) -> NDArray[np.int64]:
    """(s,) components of G's edges of ``score`` or more, each inside one of ``label``'s
    (the floor is lower: a component of edges at a higher score lies inside one)."""
    from scipy.sparse import csgraph

    H = G.copy()
    H.data = np.where(H.data >= score, H.data, 0.0)
    H.eliminate_zeros()
    _, finer = csgraph.connected_components(H, directed=False)
    return np.asarray(finer, np.int64)


def _with_pairs(
    G: sparse.csr_array,
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    score: NDArray[Any],
    across: NDArray[np.int64] | None = None,
) -> sparse.csr_array:
    """G (s, s) with the pairs (left, right), absent from it, at ``score`` both ways;
    with ``across`` (a label per row), only G's edges between two labels kept."""
    coo = G.tocoo()
    keep = slice(None) if across is None else across[coo.row] != across[coo.col]
    out = sparse.csr_array(
        (
            np.r_[coo.data[keep], score, score],
            (np.r_[coo.row[keep], left, right], np.r_[coo.col[keep], right, left]),
        ),
        shape=G.shape,
    )
    out.sort_indices()
    return out
