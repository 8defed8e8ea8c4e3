"""Exact levels (MBSCC ``exact_levels``; Agglomerator.merge_exact): each level holds
average-linkage HAC's clusters at its threshold.

Oracle: scipy's hierarchical clustering (``linkage`` + ``fcluster``), which shares
none of er's rounds, on the same similarities (a pair without an edge at similarity
0). Weights are continuous random numbers, so no two linkages tie.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from er.cluster import MBSCC
from er.cluster._rounds import Agglomerator
from er.cluster._scc import thresholds
from er.exceptions import ConfigError
from tests.unit.cluster.test_mbscc_components import _completed_graph, _cosines, streams


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels)}


def _scipy_cut(S: np.ndarray, method: str, tau: float) -> set[frozenset[int]]:
    """HAC's clusters at similarity ``tau`` (merges at ``tau`` or more)."""
    if S.shape[0] == 1:
        return {frozenset({0})}
    D = 1.0 - S
    np.fill_diagonal(D, 0.0)
    Z = linkage(squareform(D, checks=False), method)
    return _partition(fcluster(Z, t=1.0 - tau, criterion="distance"))


@st.composite
def weighted_graphs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric similarity matrix in [0, 1) with some pairs absent (0), and
    thresholds, highest first."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 45))
    S = rng.random((n, n))
    S = (S + S.T) / 2
    absent = rng.random((n, n)) < draw(st.sampled_from([0.0, 0.3, 0.7, 0.95]))
    S[absent | absent.T] = 0.0
    np.fill_diagonal(S, 0.0)
    taus = np.sort(rng.uniform(0.01, 1.0, draw(st.integers(1, 8))))[::-1]
    return S, taus


@settings(max_examples=300, deadline=None)
@given(graph=weighted_graphs(), method=st.sampled_from(["average", "single"]))
def test_each_exact_level_is_hac_at_its_threshold(
    graph: tuple[np.ndarray, np.ndarray], method: str
) -> None:
    S, taus = graph
    agg = Agglomerator(sparse.csr_array(S), method)
    for tau in taus:
        agg.merge_exact(float(tau))
        assert _partition(agg.point_cluster) == _scipy_cut(S, method, float(tau))
    h = agg.finish("mbscc", {}, S.shape[0])
    for level, tau in enumerate(taus, start=1):  # the hierarchy records the same levels
        assert _partition(h.cut(level)) == _scipy_cut(S, method, float(tau))


@st.composite
def tied_graphs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Similarities from a few values (copies of one string tie with everything alike),
    some pairs absent, and thresholds among those values or between them."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 40))
    choices = np.array(draw(st.sampled_from([[0.3, 0.7, 0.9], [0.1, 0.5], [0.7], [0.2, 0.6, 0.8]])))
    S = rng.choice(choices, size=(n, n))
    S = np.triu(S, 1)
    S = S + S.T
    absent = rng.random((n, n)) < draw(st.sampled_from([0.0, 0.3, 0.8]))
    S[absent | absent.T] = 0.0
    np.fill_diagonal(S, 0.0)
    taus = np.sort(rng.choice(np.r_[choices, choices - 0.05], draw(st.integers(1, 5))))[::-1]
    return S, taus


@settings(max_examples=300, deadline=None)
@given(graph=tied_graphs())
def test_with_ties_each_level_ends_with_no_link_at_its_threshold(
    graph: tuple[np.ndarray, np.ndarray],
) -> None:
    """Under ties HAC's clusters depend on the order of merges, so the oracle is the
    definition itself, by brute force on the input: after each level every two
    clusters link (mean similarity over all their pairs) below its threshold, and
    each node the level formed holds merges at the threshold or above, its score."""
    S, taus = graph
    agg = Agglomerator(sparse.csr_array(S), "average")
    for tau in taus:
        agg.merge_exact(float(tau))
        label = agg.point_cluster
        groups = [np.flatnonzero(label == c) for c in np.unique(label)]
        for x, a in enumerate(groups):
            for b in groups[x + 1 :]:
                assert S[np.ix_(a, b)].mean() < tau + 1e-9
    h = agg.finish("mbscc", {}, S.shape[0], join=False)
    formed = np.flatnonzero(h.level_lo > 0)
    tau_of = np.r_[np.nan, taus][h.level_lo[formed]]
    assert (h.score[formed] >= tau_of - 1e-9).all()


def test_best_links_in_a_cycle_with_no_reciprocal_pair_still_merge() -> None:
    """Ties whose sums round differently in the two directions left best links
    0 -> 1 -> 2 -> 0 at 0.7 with no reciprocal pair, and the level stopped with a link
    above its threshold (found by review): everything links at 0.5 or more here."""
    a, b, c = 0.3, 0.7, 0.9
    S = np.array(
        [
            [0, c, a, c, c, c, b],
            [c, 0, a, c, c, c, b],
            [a, a, 0, b, c, c, b],
            [c, c, b, 0, b, c, b],
            [c, c, c, b, 0, c, b],
            [c, c, c, c, c, 0, b],
            [b, b, b, b, b, b, 0],
        ]
    )
    agg = Agglomerator(sparse.csr_array(S), "average")
    for tau in (0.8, 0.5):
        agg.merge_exact(tau)
    assert _partition(agg.point_cluster) == _scipy_cut(S, "average", 0.5) == {frozenset(range(7))}


def test_a_chain_sccs_round_joins_is_left_where_hac_leaves_it() -> None:
    """a - b at 0.9, b - c at 0.8, a - c absent: at 0.6 SCC's round joins all three
    (c's best neighbour is b), while {a, b} links c by (0.8 + 0) / 2 = 0.4."""
    S = np.array([[0, 0.9, 0], [0.9, 0, 0.8], [0, 0.8, 0]])
    agg = Agglomerator(sparse.csr_array(S), "average")
    agg.merge_exact(0.6)
    assert _partition(agg.point_cluster) == {frozenset({0, 1}), frozenset({2})}
    scc = Agglomerator(sparse.csr_array(S), "average")
    scc.merge(lambda nn, best: best >= 0.6)
    assert _partition(scc.point_cluster) == {frozenset({0, 1, 2})}


@settings(max_examples=100, deadline=None)
@given(
    data=streams(),
    k=st.integers(1, 5),
    floor=st.sampled_from([0.3, 0.6, 0.85]),
    most=st.sampled_from([4, 10, 1000]),
)
def test_stepped_exact_levels_are_hac_on_the_completed_graph(
    data: tuple[np.ndarray, list[int]], k: int, floor: float, most: int
) -> None:
    """MBSCC with exact levels, fed batch by batch, each floor component's pairs scored
    (complete_max): at every level, scipy's average-linkage clusters of the oracle's
    completed graph of the final points at that level's threshold."""
    X, cuts = data
    same: dict[str, Any] = {"linkage": "average", "n_levels": 12, "schedule": "geometric"}
    m = MBSCC(
        **same, k=k, tau_min=floor, marking="components", complete_max=most, exact_levels=True
    )
    scores, at = _cosines(X), 0
    for c in cuts:
        m.partial_fit(X[at : at + c], pair_scores=scores)
        at += c
    S = _completed_graph(X, k, floor, most).toarray()
    h = m.hierarchy_
    for level, tau in enumerate(thresholds(1.0, floor, 12, "geometric"), start=1):
        assert _partition(h.cut(level)) == _scipy_cut(S, "average", float(tau))


def test_exact_levels_need_components_and_a_reducible_linkage() -> None:
    X = np.eye(3, dtype=np.float32)
    with pytest.raises(ConfigError, match="exact_levels"):
        MBSCC(tau_min=0.5, linkage="average", exact_levels=True).partial_fit(X)
    with pytest.raises(ConfigError, match="exact_levels"):
        MBSCC(tau_min=0.5, linkage="mean", marking="components", exact_levels=True).partial_fit(X)
    with pytest.raises(ValueError, match="reducible"):
        Agglomerator(sparse.csr_array(np.ones((2, 2))), "centroid", X[:2]).merge_exact(0.5)
