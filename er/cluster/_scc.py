"""SCC (Sub-Cluster Component) and its baselines Affinity and RecipNN.

References
----------
Monath et al., "Scalable Hierarchical Agglomerative Clustering", KDD 2021;
dissertation ch. 4, Alg. 9 (SCC), §2.6.2-2.6.3 (RecipNN, Affinity).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.cluster._graph import as_graph, knn_graph, normalize_rows
from er.cluster._hierarchy import Hierarchy
from er.cluster._params import NONE, Interval, Options, get_params, validate_params
from er.cluster._rounds import LINKAGES, Agglomerator
from er.exceptions import ConfigError, NotFittedError

__all__ = ["SCC", "Affinity", "RecipNN", "thresholds"]

SCHEDULES = ("geometric", "linear", "share")
# SCC's default linkage: centroid while clusters are small, sparse average after.
CENTROID_AVERAGE = "centroid-average"


def thresholds(hi: float, lo: float, n: int, schedule: str) -> NDArray[np.float64]:
    """``n`` decreasing thresholds from ``hi`` to ``lo``.

    ``geometric`` divides the threshold by a constant factor each level, from ``hi``
    down to ``hi / 1000`` (or ``lo`` if that is positive and larger), then ends at
    ``lo``: sparse average linkage shrinks like 1/|A||B| as clusters grow, so late
    levels need fine steps near zero. (On scikit-learn's digits this schedule gives
    DP 0.90 at 30 levels against 0.79 for a linear one.)
    """
    if n == 1:
        return np.array([lo])
    if schedule == "linear" or hi <= 0:
        return np.linspace(hi, lo, n)
    floor = lo if lo > hi * 1e-3 else hi * 1e-3
    taus: NDArray[np.float64] = np.r_[np.geomspace(hi, floor, n - 1), lo]
    return taus


class _GraphClusterer:
    """Shared fit plumbing: vectors or a precomputed graph in, a Hierarchy out."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    algorithm = ""
    # set by every subclass's __init__
    linkage: str
    k: int

    def fit(self, X: NDArray[np.floating] | None = None, *, graph: Any = None) -> _GraphClusterer:
        """Build the hierarchy.

        Parameters
        ----------
        X : ndarray of shape (n, d), optional
            Points (cosine similarity); a k-NN graph is built from them.
        graph : sparse matrix of shape (n, n) or tuple (row, col, sim), optional
            A precomputed similarity graph instead of (or as well as) ``X``.

        Returns
        -------
        self
        """
        validate_params(self)
        W, V = self._inputs(X, graph)
        # centroid-average (SCC's) starts as centroid linkage and switches in _build
        start = "centroid" if self.linkage == CENTROID_AVERAGE else self.linkage
        self.hierarchy_ = self._build(Agglomerator(W, start, V), W.shape[0])
        self.delta_ = self.hierarchy_.to_delta()
        return self

    def _inputs(self, X: Any, graph: Any) -> tuple[sparse.csr_array, NDArray[np.float32] | None]:
        if X is None and graph is None:
            raise ConfigError(f"{type(self).__name__}.fit needs X or graph=.")
        V = None if X is None else normalize_rows(np.asarray(X))
        if self.linkage in ("centroid", CENTROID_AVERAGE) and V is None:
            raise ConfigError(
                f"{type(self).__name__}: centroid linkage (SCC's default) needs the vectors X; "
                "pass linkage='average' to cluster a graph alone."
            )
        if graph is not None:
            W = as_graph(graph, None if V is None else V.shape[0])
        else:
            assert V is not None  # X or graph, checked above
            W = knn_graph(V, self.k, normalized=True)
        if V is not None and W.shape[0] != V.shape[0]:
            raise ConfigError(f"graph has {W.shape[0]} nodes but X has {V.shape[0]} rows.")
        return W, V

    def _build(self, agg: Agglomerator, n: int) -> Hierarchy:
        raise NotImplementedError

    def _check_fitted(self) -> Hierarchy:
        if not hasattr(self, "hierarchy_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit."
            )
        return self.hierarchy_

    def level_labels(self, level: int) -> NDArray[np.int64]:
        """(n,) flat clustering at one level of the fitted hierarchy."""
        return self._check_fitted().cut(level)


class SCC(_GraphClusterer):
    """Sub-Cluster Component clustering: one level per threshold.

    Round i merges the connected components of the graph "each cluster -> its
    nearest neighbour, kept only if the linkage >= tau_i".

    Parameters
    ----------
    n_levels : int, default 100
        Number of thresholds of the ``linear`` and ``geometric`` schedules.
    schedule : {"share", "geometric", "linear"}, default "share"
        ``share``: each round's threshold is read off the data, the linkage that the
        best ``share`` of the clusters' nearest-neighbour links reach; rounds go on
        until no cluster has a neighbour left. ``linear`` / ``geometric``:
        ``n_levels`` thresholds fixed before the first round, from ``tau_max`` to
        ``tau_min``.
    share : float, default 0.1
        Under ``schedule="share"``, the part of the clusters whose nearest-neighbour
        link sets each round's threshold (a round merges at least those).
    tau_max, tau_min : float or None
        First and last threshold; None takes the largest / smallest linkage of the
        input graph (min capped at 0). Under ``share`` they bound every threshold.
    linkage : {"centroid-average", "average", "single", "centroid", "mean"}
        Default ``centroid-average``: centroid linkage (cosine of the clusters'
        summed unit vectors) until the clusters are down to n / (2k), so that they
        hold 2k points on average, then sparse average linkage. Both centroid kinds
        need ``X``; pass ``linkage="average"`` to cluster a graph alone.
    k : int, default 10
        Neighbours per point when the graph is built from X.

    Notes
    -----
    Why these defaults (issue #30; bench/RESULTS.md, "SCC and MBSCC defaults"): centroid
    linkage beats average-linkage HAC on the hard 64-d mixture of many small
    overlapping clusters (``er.cluster._synthetic.hard_mixture``), where sparse
    average linkage, which counts each pair the k-NN graph left out as a
    non-match (§4.1.1), never reached HAC at any schedule. On scikit-learn's digits
    it is the other way round: the graph's neighbourhoods separate the digits'
    classes better than any centroid (sparse average 0.86-0.89, centroid at most
    0.82, HAC 0.80). The merges of small clusters are the hard mixture's; the
    merges of clusters larger than a point's neighbour list are the digits'. Fixed
    thresholds suit one linkage's scale at a time (the geometric schedule, the
    dissertation's Table 4.4, suits sparse average linkage, which shrinks like
    1/(|A||B|)); thresholds read off the current links each round serve both.
    Measured choice (three seeds of the hard mixture, iris, wine, digits): share
    0.1, switch at 2k points per cluster; digits stays at or above 0.85 for a switch
    between 1.5k and 3k points (0.83-0.90), wine at or above HAC for share 0.1 to 0.12.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        Tree with levels; every level is a flat clustering.
    delta_ : ClusteringDelta
    thresholds_ : ndarray of shape (n_rounds,)
        The threshold of every round (``n_levels`` of them for a fixed schedule).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 0], [0.99, 0.1], [0, 1], [0.1, 0.99]], dtype=np.float32)
    >>> SCC(n_levels=5, k=2, schedule="linear").fit(X).hierarchy_.cut(1).tolist()
    [4, 4, 5, 5]
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_levels": [Interval(int, 1, None)],
        "schedule": [Options(SCHEDULES)],
        "share": [Interval(float, 1e-6, 1.0)],
        "tau_max": [Interval(float, None, None), NONE],
        "tau_min": [Interval(float, None, None), NONE],
        "linkage": [Options((CENTROID_AVERAGE, *LINKAGES))],
        "k": [Interval(int, 1, None)],
    }
    algorithm = "scc"

    def __init__(
        self,
        *,
        n_levels: int = 100,
        schedule: str = "share",
        share: float = 0.1,
        tau_max: float | None = None,
        tau_min: float | None = None,
        linkage: str = CENTROID_AVERAGE,
        k: int = 10,
    ) -> None:
        self.n_levels = n_levels
        self.schedule = schedule
        self.share = share
        self.tau_max = tau_max
        self.tau_min = tau_min
        self.linkage = linkage
        self.k = k

    def _build(self, agg: Agglomerator, n: int) -> Hierarchy:
        switch_below = n / (2 * self.k) if self.linkage == CENTROID_AVERAGE else -1.0
        if self.schedule == "share":
            taus = self._share_rounds(agg, switch_below)
        else:
            taus = self._fixed_rounds(agg, switch_below)
        self.thresholds_ = taus
        return agg.finish(self.algorithm, get_params(self), n)

    def _fixed_rounds(self, agg: Agglomerator, switch_below: float) -> NDArray[np.float64]:
        """Rounds at ``n_levels`` thresholds fixed before the first (linear / geometric)."""
        _, best = agg.nearest()
        finite = best[np.isfinite(best)]
        # The first threshold is the graph's largest linkage (the best 1-NN merge), so
        # the first level already merges; 1.0 only for a graph without edges.
        largest = float(finite.max()) if finite.size else 1.0
        hi = self.tau_max if self.tau_max is not None else largest
        lo = self.tau_min if self.tau_min is not None else min(float(finite.min(initial=0.0)), 0.0)
        taus = thresholds(hi, lo, self.n_levels, self.schedule)
        for tau in taus:
            _switch_if_small(agg, switch_below)
            agg.merge(_at_least(tau))
        return taus

    def _share_rounds(self, agg: Agglomerator, switch_below: float) -> NDArray[np.float64]:
        """Rounds until no link is left, each at the linkage the best ``share`` of the
        clusters' nearest-neighbour links reach (clipped to [tau_min, tau_max])."""
        taus: list[float] = []
        while True:
            _switch_if_small(agg, switch_below)
            nn, best = agg.nearest()
            links = best[(nn >= 0) & np.isfinite(best)]
            if self.tau_min is not None:
                links = links[links >= self.tau_min]
            if links.size == 0:
                break
            # the (1 - share) quantile by rank, no interpolation: a linkage some
            # cluster has, so that cluster's link is kept (`>=`)
            tau = float(np.sort(links)[int(np.floor((1.0 - self.share) * (links.size - 1)))])
            if self.tau_max is not None:
                tau = min(tau, self.tau_max)
            taus.append(tau)
            if agg.merge(_at_least(tau)) == 0:
                break
        return np.asarray(taus, np.float64)


def _at_least(tau: float) -> Any:
    """The round's rule: keep a best-neighbour link whose linkage is >= tau (`>=` so
    that a threshold equal to a linkage merges; DESIGN, Determinism)."""

    def keep(nn: NDArray[np.int64], best: NDArray[np.float64]) -> NDArray[np.bool_]:
        return best >= tau

    return keep


def _switch_if_small(agg: Agglomerator, switch_below: float) -> None:
    """``centroid-average``: sparse average linkage once the clusters are fewer than
    ``switch_below`` (a negative value never switches)."""
    if agg.linkage == "centroid" and agg.n_clusters <= switch_below:
        agg.use_linkage("average")


class _UntilStable(_GraphClusterer):
    """Baselines that merge round after round until a round merges nothing."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "linkage": [Options(LINKAGES)],
        "k": [Interval(int, 1, None)],
    }

    def __init__(self, *, linkage: str = "average", k: int = 10) -> None:
        self.linkage = linkage
        self.k = k


class Affinity(_UntilStable):
    """Affinity clustering (Borůvka-style): every round merges 1-NN components.

    Rounds continue until no merge happens, so the last level holds the connected
    components of the input graph. Parameters as :class:`SCC` (``linkage``, ``k``).
    """

    algorithm = "affinity"

    def _build(self, agg: Agglomerator, n: int) -> Hierarchy:
        while agg.merge(lambda nn, best: np.ones(nn.shape, bool)):
            pass
        agg.level -= 1  # the last round merged nothing
        return agg.finish(self.algorithm, get_params(self), n)


class RecipNN(_UntilStable):
    """Reciprocal-nearest-neighbour agglomeration: each round merges mutual 1-NN pairs.

    For reducible linkages (average, single) on a complete graph this builds the
    HAC tree (dissertation §2.6.2). Parameters as :class:`Affinity`.
    """

    algorithm = "recipnn"

    def _build(self, agg: Agglomerator, n: int) -> Hierarchy:
        def reciprocal(nn: NDArray[np.int64], best: NDArray[np.float64]) -> NDArray[np.bool_]:
            ok = nn >= 0
            out = np.zeros(nn.shape, bool)
            out[ok] = nn[nn[ok]] == np.flatnonzero(ok)
            return out

        while agg.merge(reciprocal):
            pass
        agg.level -= 1
        return agg.finish(self.algorithm, get_params(self), n)
