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
        self.hierarchy_ = self._build(Agglomerator(W, self.linkage, V), W.shape[0])
        self.delta_ = self.hierarchy_.to_delta()
        return self

    def _inputs(self, X: Any, graph: Any) -> tuple[sparse.csr_array, NDArray[np.float32] | None]:
        if X is None and graph is None:
            raise ConfigError(f"{type(self).__name__}.fit needs X or graph=.")
        V = None if X is None else normalize_rows(np.asarray(X))
        if self.linkage == "centroid" and V is None:
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
        Number of thresholds (levels).
    schedule : {"geometric", "linear"}, default "linear"
    tau_max, tau_min : float or None
        First and last threshold; None takes the largest / smallest linkage of the
        input graph (min capped at 0).
    linkage : {"average", "single", "centroid"}, default "centroid"
        ``centroid`` (cosine of the clusters' summed unit vectors) needs ``X``; pass
        ``linkage="average"`` to cluster a graph alone.
    k : int, default 10
        Neighbours per point when the graph is built from X.

    Notes
    -----
    The defaults (centroid linkage, 100 linear levels) were chosen on the hard 64-d
    mixture (``er.cluster._synthetic.hard_mixture``), where they reach average-linkage
    HAC's dendrogram purity and the former defaults (sparse average linkage, 30
    geometric levels, as in the dissertation's Table 4.4) did not: DP 0.980-0.984
    against HAC's 0.942-0.950 at 5k, 0.955-0.959 against 0.858-0.869 at 20k (three
    seeds each; bench/RESULTS.md, "SCC defaults"). The geometric schedule suits sparse
    average linkage, which shrinks like 1/(|A||B|) as clusters grow (§4.1.1); a
    centroid cosine does not shrink with size, so the levels are spread linearly.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        Tree with levels; every level is a flat clustering.
    delta_ : ClusteringDelta
    thresholds_ : ndarray of shape (n_levels,)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 0], [0.99, 0.1], [0, 1], [0.1, 0.99]], dtype=np.float32)
    >>> SCC(n_levels=5, k=2).fit(X).hierarchy_.cut(1).tolist()
    [4, 4, 5, 5]
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_levels": [Interval(int, 1, None)],
        "schedule": [Options(("geometric", "linear"))],
        "tau_max": [Interval(float, None, None), NONE],
        "tau_min": [Interval(float, None, None), NONE],
        "linkage": [Options(LINKAGES)],
        "k": [Interval(int, 1, None)],
    }
    algorithm = "scc"

    def __init__(
        self,
        *,
        n_levels: int = 100,
        schedule: str = "linear",
        tau_max: float | None = None,
        tau_min: float | None = None,
        linkage: str = "centroid",
        k: int = 10,
    ) -> None:
        self.n_levels = n_levels
        self.schedule = schedule
        self.tau_max = tau_max
        self.tau_min = tau_min
        self.linkage = linkage
        self.k = k

    def _build(self, agg: Agglomerator, n: int) -> Hierarchy:
        _, best = agg.nearest()
        finite = best[np.isfinite(best)]
        # The first threshold is the graph's largest linkage (the best 1-NN merge), so
        # the first level already merges; 1.0 only for a graph without edges.
        largest = float(finite.max()) if finite.size else 1.0
        hi = self.tau_max if self.tau_max is not None else largest
        lo = self.tau_min if self.tau_min is not None else min(float(finite.min(initial=0.0)), 0.0)
        self.thresholds_ = thresholds(hi, lo, self.n_levels, self.schedule)
        for tau in self.thresholds_:
            # `>=` so that a threshold equal to a linkage merges (DESIGN, Determinism)
            def at_least(
                nn: NDArray[np.int64], best: NDArray[np.float64], tau: float = tau
            ) -> NDArray[np.bool_]:
                return best >= tau

            agg.merge(at_least)
        return agg.finish(self.algorithm, get_params(self), n)


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
