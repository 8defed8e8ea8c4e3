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

from er.cluster import _components, _graft
from er.cluster._complete import Completion, PairScores
from er.cluster._graph import check_neighbors, normalize_rows
from er.cluster._hierarchy import Hierarchy
from er.cluster._mbscc_ids import _Members, match_ids  # _Members: named by old pickles
from er.cluster._mbscc_options import check_options
from er.cluster._params import Interval, Options, get_params, validate_params
from er.cluster._rounds import LINKAGES, Agglomerator
from er.cluster._scc import thresholds
from er.exceptions import ConfigError

__all__ = ["MBSCC"]


from er.cluster._knn_lists import _KnnLists
from er.cluster._snapshot import _Snapshot


class MBSCC:
    """Mini-batch SCC (``partial_fit``), equal to SCC on the same points in exact mode.

    Parameters
    ----------
    n_levels : int, default 100
    schedule : {"geometric", "linear"}, default "linear"
    tau_max, tau_min : float, default 1.0 and 0.0
        Fixed thresholds: levels must mean the same thing from batch to batch, so
        MBSCC cannot read them off the data round by round as SCC's ``share``
        schedule does.
    linkage : {"average", "single", "centroid", "mean"}, default "centroid"
        The defaults are SCC's first phase (centroid linkage, 100 linear levels):
        on the hard 20k mixture DP 0.956 against SCC's defaults' 0.960; the former
        defaults (sparse average, 30 geometric levels) reached 0.815 (issue #30).
        The pipeline keeps its own (``er.pipeline.config.PIPELINE_PARAMS``).
    k : int, default 10
    marking : {"paper", "exact", "components"}, default "paper"
        ``exact`` re-derives every level: the result equals SCC on the same points.
        ``paper`` recomputes the nearest neighbour only of marked clusters (Eq.
        4.7-4.12) and reuses the last batch's choice for the others.
        ``components`` (needs ``tau_min > 0`` and a linkage other than centroid)
        re-derives the new points and the floor components holding an end of a
        pair the batch changed at or above the floor, or inside one component
        (:mod:`er.cluster._components`): the result equals SCC on the same points,
        at a cost that follows the batch, not n. ``hierarchy_`` and ``node_ids_``
        are then assembled when read; ``touched_`` tells what the batch redid.
    complete_max : int, default 0
        With ``components`` marking: floor components of up to this many points are
        linked over every pair of their points, scored by the ``pair_scores`` each
        ``partial_fit`` then needs, not over the k-NN lists alone; a larger one over
        its lists' pairs and the pairs two steps apart in them, as many as such a
        component has pairs at most (its lists' pairs alone when those are more)
        (:func:`er.cluster._complete.complete_components`); 0: never.
    complete_at : float, default 0.0
        With ``complete_max``: in a component past it, the pairs around the clusters
        formed at this score or more are completed after the rounds, and the rounds
        run again (:meth:`er.cluster._complete.Completion.refine`): every pair inside
        such a cluster, and those of two clusters whose linkage over all their pairs
        may reach it, within the budget per pass (at most REFINE_PASSES). Needs
        ``complete_max`` and ``exact_levels``; under ``tau_min`` it is ``tau_min``.
        The pipeline's free text sets it to its entity cut; 0: never.
    complete_within : float, default 0.0
        With ``complete_max``: every pair is scored inside each component of the list
        edges at or above this score (the entity cut: "cut components", much smaller
        than floor components where sparse records bridge people), not inside each
        floor component. Average linkage at or above it is then over every pair of
        the two clusters (a pair across two such components is under it, and so is
        any mean of them); below it, over the lists. 0: floor components.
    complete_against : bool, default False
        With ``complete_max``: the scorer gives evidence against a match alone (NaN
        for a pair that holds none), and the scored pairs join the lists' edges
        instead of replacing them (er.cluster._complete). Mean linkage over two
        clusters is then over the pairs the index proposed and every scored pair
        between them that contradicts a match. Not with ``complete_at``.
    exact_levels : bool, default False
        With ``components`` marking and average (or single) linkage: each level
        holds that linkage's HAC clusters at its threshold
        (:meth:`er.cluster._rounds.Agglomerator.merge_exact`: reciprocal best pairs
        merge until none is left at the threshold), where SCC's round joins whole
        components of best-neighbour edges and so chains past it. The pipeline's
        free text uses it (``er.pipeline.config``).
    graft_past : int, default 0
        With ``complete_at``: a batch whose new points reach old floor components of
        more than this many points is grafted (:mod:`er.cluster._graft`): each of its
        clusters at ``complete_at`` joins the old one it links to best, over a sample
        of their pairs, when that reaches ``complete_at``. Its work follows the batch;
        old clusters neither split nor merge, unlike batch SCC's. 0: never.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        Current structure in the `er cluster` contract (points 0..n-1 by arrival).
    delta_ : ClusteringDelta
        What the last call changed, in stable node ids (see ``node_ids_``).
    node_ids_ : ndarray of int64, shape (hierarchy_.n_nodes,)
        Stable id of each node of ``hierarchy_``.
    point_ids_ : ndarray of int64, shape (n_points,)
        Stable id of each point (``node_ids_[:n_points]``, without assembling it).
    touched_ : er.cluster._components.Touched
        ``components`` marking: the points the last batch redid and their forest.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_levels": [Interval(int, 1, None)],
        "schedule": [Options(("geometric", "linear"))],
        "tau_max": [Interval(float, None, None)],
        "tau_min": [Interval(float, None, None)],
        "linkage": [Options(LINKAGES)],
        "k": [Interval(int, 1, None)],
        "marking": [Options(("paper", "exact", "components"))],
        "complete_max": [Interval(int, 0, None)],
        "complete_at": [Interval(float, 0.0, None)],
        "complete_within": [Interval(float, 0.0, None)],
        "complete_against": [Options((True, False))],
        "exact_levels": [Options((True, False))],
        "graft_past": [Interval(int, 0, None)],
    }
    algorithm = "mbscc"
    # only on an instance unpickled from before the member lists (see _upgrade_keys)
    _ids: dict[bytes, int]
    # the last structure (assembled when read, with components marking)
    _hierarchy: Hierarchy | None
    _node_ids: NDArray[np.int64] | None
    _forest: _components.Forest | None

    def __init__(
        self,
        *,
        n_levels: int = 100,
        schedule: str = "linear",
        tau_max: float = 1.0,
        tau_min: float = 0.0,
        linkage: str = "centroid",
        k: int = 10,
        marking: str = "paper",
        complete_max: int = 0,
        complete_at: float = 0.0,
        complete_within: float = 0.0,
        complete_against: bool = False,
        exact_levels: bool = False,
        graft_past: int = 0,
    ) -> None:
        self.n_levels = n_levels
        self.schedule = schedule
        self.tau_max = tau_max
        self.tau_min = tau_min
        self.linkage = linkage
        self.k = k
        self.marking = marking
        self.complete_max = complete_max
        self.complete_at = complete_at
        self.complete_within = complete_within
        self.complete_against = complete_against
        self.exact_levels = exact_levels
        self.graft_past = graft_past

    def fit(self, X: NDArray[np.floating]) -> MBSCC:
        """Start over with the rows of X as the first mini-batch."""
        return self._fit(X, partial=False)

    def partial_fit(
        self,
        X: NDArray[np.floating],
        neighbors: tuple[NDArray[Any], NDArray[Any]] | None = None,
        pair_scores: PairScores | None = None,
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
        pair_scores : callable (left (p,), right (p,)) -> (p,) similarities, optional
            The similarity of any two points by global index, for ``complete_max``
            (required then). A component is linked by the scores of the batch that
            last touched it.
        """
        return self._fit(X, partial=True, neighbors=neighbors, pair_scores=pair_scores)

    def rescore(self, pair_scores: PairScores) -> None:
        """Score every pair the k-NN lists hold again, by a new pair model: the next
        :meth:`partial_fit` redoes every point's clusters, as a run over every mention
        with that model's scores would have them (what an old model joined, the new
        one may part)."""
        if hasattr(self, "_knn"):
            self._knn.rescore(pair_scores)
            self._redo_all = True

    def _fit(
        self,
        X: NDArray[np.floating],
        partial: bool,
        neighbors: tuple[NDArray[Any], NDArray[Any]] | None = None,
        pair_scores: PairScores | None = None,
    ) -> MBSCC:
        validate_params(self)
        check_options(self, pair_scores is not None)
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
            self._forest = _components.Forest(self.n_levels) if self._local() else None
            self._cuts: _graft.CutIndex | None = None
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
        redo_all, self._redo_all = getattr(self, "_redo_all", False), False
        if redo_all:
            marked = np.ones_like(marked)
        taus = thresholds(self.tau_max, self.tau_min, self.n_levels, self.schedule)
        if self._forest is not None:
            return self._fit_components(taus, pair_scores, redo_all)
        vectors = self._knn.points if self.linkage == "centroid" else None
        agg = Agglomerator(self._knn.graph(), self.linkage, vectors)
        if self.marking == "exact" or not partial:
            marked = np.ones_like(marked)
        self._rounds = _run_marked(agg, taus, marked, getattr(self, "_rounds", None))
        h = agg.finish(self.algorithm, get_params(self), self._knn._n)
        M = h.leaf_membership()
        self._hierarchy, self._node_ids = h, self._stable_ids(h, M)
        state = _Snapshot.of(h, self._node_ids, sizes=np.diff(M.indptr))
        self.delta_ = state.delta_from(self._state, self.algorithm)
        self._state = state
        return self

    def _local(self) -> bool:
        """Whether this MBSCC steps per floor component; one line if it cannot."""
        if self.marking != "components":
            return False
        if self.tau_min <= 0 or self.linkage == "centroid":
            raise ConfigError(
                'MBSCC marking="components" needs tau_min > 0 and a linkage other than '
                f"centroid. Got tau_min={self.tau_min}, linkage={self.linkage!r}."
            )
        return True

    def _fit_components(
        self,
        taus: NDArray[np.float64],
        pair_scores: PairScores | None = None,
        redo_all: bool = False,
    ) -> MBSCC:
        """One batch over the floor components whose pairs it changed in a way that
        matters (:func:`_components.changed_points`, :func:`_components.step`)."""
        params = get_params(self)
        floor = float(taus[-1])

        def agglomerate(G: Any, s: int) -> Hierarchy:
            agg = Agglomerator(G, self.linkage)
            for tau in taus:
                if self.exact_levels:
                    agg.merge_exact(float(tau))
                else:
                    agg.merge(_at_least(float(tau)))
            return agg.finish(self.algorithm, params, s, join=False)

        completion = None
        if self.complete_max and pair_scores is not None:
            # clusters at a score under the floor are those at the floor
            at = max(self.complete_at, self.tau_min) if self.complete_at else 0.0
            within = max(self.complete_within, self.tau_min) if self.complete_within else 0.0
            completion = Completion(
                pair_scores, self.complete_max, at, within, self.complete_against
            )

        forest = self._forest
        assert forest is not None  # _fit's caller checks
        idx, sim = self._knn.idx, self._knn.sim
        index = self._cut_index() if completion is not None else None
        changed = _graft.marks(index, forest, idx, sim, self._knn.replaced_, floor, redo_all)
        if changed is None:  # grafted
            assert index is not None and completion is not None
            self.delta_, self.touched_ = _graft.step(
                forest, index, idx, sim, self._point_ids, agglomerate, self._take_ids,
                self.algorithm, taus, completion,
            )  # fmt: skip
            self._hierarchy = self._node_ids = None
            return self
        self.delta_, self.touched_ = _components.step(
            forest,
            idx,
            sim,
            changed,
            self._point_ids,
            agglomerate,
            self._take_ids,
            self.algorithm,
            floor,
            completion,
        )
        if index is not None:
            index.refresh(forest, self.touched_.points, self._point_ids)
        self._hierarchy = self._node_ids = None  # assembled when read
        return self

    def _cut_index(self) -> _graft.CutIndex | None:
        """Each point's cluster at ``complete_at`` (``graft_past`` only), built once
        from the forest when missing (a checkpoint from before it)."""
        if not self.graft_past or self._forest is None:
            return None
        index: _graft.CutIndex | None = getattr(self, "_cuts", None)
        if index is None:
            at, past = max(self.complete_at, self.tau_min), self.graft_past
            index = self._cuts = _graft.CutIndex.of(self._forest, self._point_ids, at, past)
        return index

    @property
    def hierarchy_(self) -> Hierarchy:
        if self._hierarchy is None:
            self._assemble()
        assert self._hierarchy is not None
        return self._hierarchy

    @property
    def node_ids_(self) -> NDArray[np.int64]:
        if self._node_ids is None:
            self._assemble()
        assert self._node_ids is not None
        return self._node_ids

    @property
    def point_ids_(self) -> NDArray[np.int64]:
        return self._point_ids

    def _assemble(self) -> None:
        """The whole hierarchy from the components' forest (O(ids issued))."""
        if self._forest is None:
            raise AttributeError("hierarchy_: this MBSCC is not fitted")
        self._hierarchy, self._node_ids = self._forest.hierarchy(
            self._point_ids, self.algorithm, get_params(self)
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickles from before the assembled hierarchy kept it as plain attributes
        for public, private in (("hierarchy_", "_hierarchy"), ("node_ids_", "_node_ids")):
            if public in state:
                state[private] = state.pop(public)
        state.setdefault("_forest", None)
        state.setdefault("complete_max", 0)  # pickles from before it
        state.setdefault("complete_at", 0.0)
        state.setdefault("complete_within", 0.0)
        state.setdefault("complete_against", False)
        state.setdefault("exact_levels", False)
        state.setdefault("graft_past", 0)
        self.__dict__.update(state)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if state.get("_forest") is not None:  # assembled again when read
            state["_hierarchy"] = state["_node_ids"] = None
        return state

    def _take_ids(self, count: int) -> NDArray[np.int64]:
        ids = np.arange(self._next_id, self._next_id + count, dtype=np.int64)
        self._next_id += count
        return ids

    def _stable_ids(self, h: Hierarchy, M: Any) -> NDArray[np.int64]:
        """Stable id per node (:func:`match_ids` against the last batch's clusters).

        ``M`` is ``h.leaf_membership()``, shape (n_nodes, n_points).
        """
        self._upgrade_keys()
        ids, self._prev = match_ids(
            h, M, self._point_ids, self._prev, self._state.edges, self._take_ids
        )
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


def _at_least(tau: float) -> Any:
    """SCC's rule for one round: keep a best-neighbour edge of linkage >= tau."""

    def keep(nn: NDArray[np.int64], best: NDArray[np.float64]) -> NDArray[np.bool_]:
        return best >= tau

    return keep


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
