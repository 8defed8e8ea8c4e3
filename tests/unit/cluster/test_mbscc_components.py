"""MBSCC stepping per floor component (issue #30): the whole re-run's result, locally.

Oracles: batch SCC with the same thresholds (average and single linkage), MBSCC's
exact marking, which re-runs every level over every point (mean linkage, which SCC
does not offer), and the deltas replayed into a plain store.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC, SCC
from er.cluster._hierarchy import Hierarchy
from er.exceptions import ConfigError


def _structure(h: Hierarchy) -> dict[frozenset[int], tuple[float | None, int, int]]:
    """Point set -> (score, first level, last level) of every node."""
    M = h.leaf_membership()
    out = {}
    for v in range(h.n_nodes):
        points = frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist())
        score = None if np.isnan(h.score[v]) else round(float(h.score[v]), 9)
        out[points] = (score, int(h.level_lo[v]), int(h.level_hi[v]))
    return out


@st.composite
def streams(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    """Points in the positive orthant (cosines >= 0, as the pipeline's probabilities),
    in groups tight or loose, cut into batches of 1 to 25."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 90))
    centres = rng.normal(size=(draw(st.integers(1, 8)), 5))
    noise = draw(st.sampled_from([0.1, 0.4, 1.0]))
    X = np.abs(centres[rng.integers(0, centres.shape[0], n)] + noise * rng.normal(size=(n, 5)))
    sizes = draw(st.lists(st.integers(1, 25), min_size=1, max_size=12))
    cuts, at = [], 0
    for s in sizes:
        if at >= n:
            break
        cuts.append(min(s, n - at))
        at += cuts[-1]
    if at < n:
        cuts.append(n - at)
    return X.astype(np.float32), cuts


def _feed(m: MBSCC, X: np.ndarray, cuts: list[int]) -> None:
    at = 0
    for c in cuts:
        m.partial_fit(X[at : at + c])
        at += c


@settings(max_examples=120, deadline=None)
@given(
    data=streams(),
    k=st.integers(1, 6),
    linkage=st.sampled_from(["average", "single"]),
    floor=st.sampled_from([0.3, 0.6, 0.85]),
)
def test_components_equal_batch_scc(
    data: tuple[np.ndarray, list[int]], k: int, linkage: str, floor: float
) -> None:
    X, cuts = data
    same: dict[str, Any] = {"k": k, "linkage": linkage, "n_levels": 12, "schedule": "geometric"}
    m = MBSCC(**same, tau_min=floor, marking="components")
    _feed(m, X, cuts)
    ref = SCC(**same, tau_max=1.0, tau_min=floor).fit(X).hierarchy_
    assert _structure(m.hierarchy_) == _structure(ref)


@settings(max_examples=120, deadline=None)
@given(data=streams(), k=st.integers(1, 6), floor=st.sampled_from([0.3, 0.6, 0.85]))
def test_components_equal_a_whole_rerun_with_mean_linkage(
    data: tuple[np.ndarray, list[int]], k: int, floor: float
) -> None:
    X, cuts = data
    same: dict[str, Any] = {"k": k, "linkage": "mean", "n_levels": 12, "tau_min": floor}
    m, whole = MBSCC(**same, marking="components"), MBSCC(**same, marking="exact")
    at = 0
    for c in cuts:  # equal after every batch, not only at the end
        m.partial_fit(X[at : at + c])
        whole.partial_fit(X[at : at + c])
        at += c
        assert _structure(m.hierarchy_) == _structure(whole.hierarchy_)


def _two_groups() -> np.ndarray:
    rng = np.random.default_rng(3)
    a = np.abs(np.array([1.0, 0, 0, 0]) + 0.05 * rng.normal(size=(20, 4)))
    b = np.abs(np.array([0, 0, 1.0, 0]) + 0.05 * rng.normal(size=(20, 4)))
    return np.r_[a, b].astype(np.float32)


def _ids_within(m: MBSCC, points: set[int]) -> set[int]:
    """Stable ids of the nodes whose points all lie in ``points``."""
    M = m.hierarchy_.leaf_membership()
    return {
        int(m.node_ids_[v])
        for v in range(m.hierarchy_.n_nodes)
        if set(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist()) <= points
    }


def test_a_batch_redoes_only_the_components_it_touches() -> None:
    X = _two_groups()
    m = MBSCC(k=5, tau_min=0.5, linkage="mean", marking="components").partial_fit(X)
    group_b = _ids_within(m, set(range(20, 40)))
    assert len(group_b) > 20  # its points and clusters
    m.partial_fit(np.array([[1.0, 0.02, 0.0, 0.01]], np.float32))  # beside group a
    assert set(m.touched_.points.tolist()) <= set(range(20)) | {40}
    d = m.delta_
    named = set(d.node_id.tolist()) | set(d.retired.tolist())
    named |= set(d.edges_added[:, 0].tolist()) | set(d.edges_retired[:, 0].tolist())
    assert not named & group_b
    assert group_b == _ids_within(m, set(range(20, 40)))


def test_a_pickled_mbscc_goes_on_like_one_never_pickled() -> None:
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(6, 5))[rng.integers(0, 6, 120)] + 0.3 * rng.normal(size=(120, 5)))
    X = X.astype(np.float32)
    params: dict[str, Any] = {"k": 4, "tau_min": 0.5, "linkage": "mean", "marking": "components"}
    a = MBSCC(**params)
    a.partial_fit(X[:60])
    b = pickle.loads(pickle.dumps(a))
    for m in (a, b):
        m.partial_fit(X[60:90])
        m.partial_fit(X[90:])
    np.testing.assert_array_equal(a.node_ids_, b.node_ids_)
    np.testing.assert_array_equal(a.hierarchy_.edges, b.hierarchy_.edges)
    np.testing.assert_array_equal(a.delta_.edges_added, b.delta_.edges_added)


@pytest.mark.parametrize("params", [{"tau_min": 0.0}, {"tau_min": 0.5, "linkage": "centroid"}])
def test_components_need_a_floor_and_an_edge_linkage(params: dict[str, Any]) -> None:
    m = MBSCC(marking="components", **params)
    with pytest.raises(ConfigError, match="components"):
        m.partial_fit(np.eye(3, dtype=np.float32))


def test_floor_components_keep_rows_without_edges() -> None:
    """A touched point whose every edge leaves the touched set has an empty row, the
    last one here; scipy's connected components are the oracle."""
    from scipy import sparse
    from scipy.sparse import csgraph

    from er.cluster._components import floor_components

    W = np.array([[0, 0.9, 0, 0], [0.9, 0, 0.1, 0], [0, 0.1, 0, 0], [0, 0, 0, 0]])
    got = floor_components(sparse.csr_array(W), 0.5)
    expected = csgraph.connected_components(sparse.csr_array(W * (W >= 0.5)), directed=False)[1]
    np.testing.assert_array_equal(got, expected)
    assert got[0] == got[1] and len({got[1], got[2], got[3]}) == 3


# -- every pair of a floor component (complete_max) ----------------------------------------
def _cosines(X: np.ndarray) -> Any:
    V = X / np.linalg.norm(X, axis=1, keepdims=True)

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.clip(np.einsum("ij,ij->i", V[left], V[right]), 0.0, 1.0)

    return scores


def _completed_graph(X: np.ndarray, k: int, floor: float, most: int) -> Any:
    """The oracle's graph: each point's exact k nearest (brute force, ties to the lower
    index), both directions; inside each component of its edges >= floor (scipy) of
    at most ``most`` points, every pair's cosine (those of at least COMPLETE_MIN)
    instead; in a larger one, the cosine of its edges' pairs and of every pair two
    steps apart over edges >= COMPLETE_THROUGH (:func:`_through`)."""
    from scipy import sparse
    from scipy.sparse import csgraph

    from er.cluster._complete import COMPLETE_MIN

    n = X.shape[0]
    V = X / np.linalg.norm(X, axis=1, keepdims=True)
    C = np.clip(V @ V.T, 0.0, 1.0).astype(np.float32)
    W, listed = np.zeros((n, n)), np.zeros((n, n), bool)
    for i in range(n):
        order = sorted((j for j in range(n) if j != i), key=lambda j: (-C[i, j], j))
        for j in order[:k]:
            W[i, j] = W[j, i] = C[i, j]
            listed[i, j] = listed[j, i] = True  # a neighbour at similarity 0 too
    graph = sparse.csr_array(W * (floor <= W))
    _, label = csgraph.connected_components(graph, directed=False)
    budget = most * (most - 1) // 2
    scored = np.zeros((n, n), bool)
    for c in range(label.max() + 1):
        rows = np.flatnonzero(label == c)
        if rows.size * (rows.size - 1) // 2 <= budget:
            scored[np.ix_(rows, rows)] = True
        else:
            for a, b in _through(W[np.ix_(rows, rows)], listed[np.ix_(rows, rows)], budget):
                scored[rows[a], rows[b]] = scored[rows[b], rows[a]] = True
    np.fill_diagonal(scored, False)
    inside = label[:, None] == label[None, :]
    block = np.where(C >= COMPLETE_MIN, C, 0.0).astype(np.float64)
    return sparse.csr_array(np.where(scored, block, np.where(inside, 0.0, W)))


def _tied(G: Any) -> bool:
    """Whether a row of the graph holds one nonzero value twice."""
    D = G.toarray()
    return any(np.unique(r[r > 0]).size < np.count_nonzero(r) for r in D)


def _through(sub: np.ndarray, listed: np.ndarray, budget: int) -> set[tuple[int, int]]:
    """The pairs a component past the budget scores, by brute force: its lists' pairs
    (``listed``) and the pairs among each point and its m strongest links (``sub``)
    >= COMPLETE_THROUGH (ties to the lower index), m lowered one at a time until they
    fit the budget."""
    from er.cluster._complete import COMPLETE_THROUGH

    s = sub.shape[0]
    strong = [[j for j in range(s) if sub[i, j] >= COMPLETE_THROUGH] for i in range(s)]
    links = [sorted(js, key=lambda j, i=i: (-sub[i, j], j)) for i, js in enumerate(strong)]

    def pairs(m: int) -> set[tuple[int, int]]:
        out = {(a, b) for a in range(s) for b in range(a + 1, s) if listed[a, b]}
        for i in range(s):
            hub = sorted([i, *links[i][:m]])
            out |= {(a, b) for x, a in enumerate(hub) for b in hub[x + 1 :]}
        return out

    m = max(len(each) for each in links)
    while m > 0 and len(pairs(m)) > budget:
        m -= 1
    return pairs(m)


def _close(
    a: dict[frozenset[int], tuple[float | None, int, int]],
    b: dict[frozenset[int], tuple[float | None, int, int]],
) -> bool:
    """The same nodes at the same levels, scores within float32 rounding (the oracle's
    cosines are its own matrix product, not er's)."""
    if a.keys() != b.keys():
        return False
    for key, (score, lo, hi) in a.items():
        other, lo2, hi2 = b[key]
        if (lo, hi) != (lo2, hi2) or (score is None) != (other is None):
            return False
        if score is not None and other is not None and abs(score - other) > 1e-5:
            return False
    return True


@settings(max_examples=120, deadline=None)
@given(
    data=streams(),
    k=st.integers(1, 5),
    floor=st.sampled_from([0.3, 0.6, 0.85]),
    most=st.sampled_from([2, 4, 6, 10, 20, 1000]),
)
def test_complete_components_equal_batch_scc_on_every_pair(
    data: tuple[np.ndarray, list[int]], k: int, floor: float, most: int
) -> None:
    """Stepped batch by batch, every pair of each small floor component scored (of a
    large one, its lists' pairs and those two steps apart): batch SCC on the oracle's
    completed graph of the final points, up to ties: a point's two edges of one
    float32 value (near copies: a row's cosines span 1e-4, 6e-8 apart) can leave two
    clusters at one linkage, and either engine may take either (seed 65 found one).
    """
    X, cuts = data
    G = _completed_graph(X, k, floor, most)
    assume(not _tied(G))
    same: dict[str, Any] = {"linkage": "average", "n_levels": 12, "schedule": "geometric"}
    m = MBSCC(**same, k=k, tau_min=floor, marking="components", complete_max=most)
    scores, at = _cosines(X), 0
    for c in cuts:
        m.partial_fit(X[at : at + c], pair_scores=scores)
        at += c
    ref = SCC(**same, tau_max=1.0, tau_min=floor).fit(graph=G).hierarchy_
    assert _close(_structure(m.hierarchy_), _structure(ref))


def test_an_entity_larger_than_the_lists_is_one_cluster_when_every_pair_is_scored() -> None:
    """40 near copies of one point, 3 neighbours each: over the lists alone a cluster
    of the 40 links by at most 3 * 40 of its 780 pairs (average 0.15), so it never
    forms above 0.5; with every pair scored it forms at about 0.99."""
    from er.evaluation import cut_at_score

    rng = np.random.default_rng(5)
    group = np.abs(np.array([1.0, 0.2, 0, 0]) + 0.02 * rng.normal(size=(40, 4)))
    other = np.abs(np.array([0, 0, 1.0, 0.3]) + 0.02 * rng.normal(size=(10, 4)))
    X = np.r_[group, other].astype(np.float32)
    params: dict[str, Any] = {"k": 3, "linkage": "average", "tau_min": 0.1}
    whole = MBSCC(**params, marking="components", complete_max=100)
    lists = MBSCC(**params, marking="components")
    for at in range(0, 50, 10):
        whole.partial_fit(X[at : at + 10], pair_scores=_cosines(X))
        lists.partial_fit(X[at : at + 10])
    by_pairs = cut_at_score(whole.hierarchy_, 0.5)
    assert len(set(by_pairs[:40].tolist())) == 1 and not set(by_pairs[40:]) & set(by_pairs[:40])
    assert len(set(cut_at_score(lists.hierarchy_, 0.5)[:40].tolist())) > 1


def test_complete_max_needs_pair_scores_and_components() -> None:
    X = np.eye(3, dtype=np.float32)
    with pytest.raises(ConfigError, match="pair_scores"):
        MBSCC(tau_min=0.5, linkage="average", marking="components", complete_max=5).partial_fit(X)
    with pytest.raises(ConfigError, match="components"):
        MBSCC(tau_min=0.5, linkage="average", complete_max=5).partial_fit(
            X, pair_scores=_cosines(X)
        )


def test_a_component_past_complete_max_is_scored_two_steps_through_its_lists() -> None:
    """Two groups of 14 near copies joined at the floor by two bridge points: 30
    points, 435 pairs, past complete_max 20 (190). Its 5-neighbour lists' pairs and
    those two steps apart in them, at most 190, are scored: each group forms above
    0.6, which over its lists alone (at most 5 * 14 of its 91 pairs) it cannot."""
    from er.evaluation import cut_at_score

    rng = np.random.default_rng(8)
    a = np.abs(np.array([1.0, 0.2, 0, 0]) + 0.01 * rng.normal(size=(14, 4)))
    b = np.abs(np.array([0.2, 1.0, 0, 0]) + 0.01 * rng.normal(size=(14, 4)))
    bridges = np.array([[0.62, 0.58, 0, 0], [0.58, 0.62, 0, 0]])
    X = np.r_[a, b, bridges].astype(np.float32)
    params: dict[str, Any] = {"k": 5, "linkage": "average", "tau_min": 0.1, "n_levels": 40}
    params |= {"schedule": "geometric", "marking": "components"}
    whole, lists = MBSCC(**params, complete_max=20), MBSCC(**params)
    whole.partial_fit(X, pair_scores=_cosines(X))
    lists.partial_fit(X)
    assert whole.touched_.points.size == 30  # one floor component
    got = cut_at_score(whole.hierarchy_, 0.6)
    assert len(set(got[:14].tolist())) == 1 and len(set(got[14:28].tolist())) == 1
    assert got[0] != got[14]
    alone = cut_at_score(lists.hierarchy_, 0.6)
    assert len(set(alone[:14].tolist())) > 1


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(
        st.sampled_from([None, 0.0, 0.2, 0.49, 0.5, 0.7, 0.7, 0.9]), min_size=1, max_size=66
    ),
    share=st.floats(0.0, 1.0),
)
def test_pairs_two_steps_apart_are_the_brute_force_ones_within_the_budget(
    weights: list[float | None], share: float
) -> None:
    """A component's float32 graph of up to 12 points, its upper triangle drawn edge by
    edge (None: no edge; 0.0: a listed neighbour at similarity 0, stored), ties in
    strength common, links of 0.49 and 0.5 on either side of COMPLETE_THROUGH, a
    budget of any share of its pairs: the pairs scored equal the brute-force ones, and
    they number at most the budget unless the graph's edges alone do not fit."""
    from scipy import sparse

    from er.cluster._complete import COMPLETE_THROUGH, _pairs_through

    s = 2
    while s * (s - 1) // 2 < len(weights):
        s += 1
    drawn = (weights * (s * (s - 1) // 2))[: s * (s - 1) // 2]
    i, j = np.triu_indices(s, 1)
    on = np.array([w is not None for w in drawn], bool)
    w = np.array([0.0 if x is None else x for x in drawn], np.float32)
    rows, cols, vals = np.r_[i[on], j[on]], np.r_[j[on], i[on]], np.r_[w[on], w[on]]
    H = sparse.csr_array((vals, (rows, cols)), shape=(s, s))  # explicit zeros kept
    sub, listed = np.zeros((s, s)), np.zeros((s, s), bool)
    sub[rows, cols], listed[rows, cols] = vals, True
    budget = int(share * s * (s - 1) // 2)  # most budgets cut the links: ties decide
    left, right = _pairs_through(H, COMPLETE_THROUGH, budget)
    got = set(zip(left.tolist(), right.tolist(), strict=True))
    assert got == _through(sub, listed, budget)
    assert len(got) <= max(budget, int(on.sum()))


def test_a_list_edge_the_pair_scores_put_below_the_floor_still_joins_its_component() -> None:
    """Groups {0, 1, 2} and {3, 4, 5} joined in the lists by 2-3 at 0.9, a pair the
    scores put at 0 (the writer's lists and its pair scores use different priors).
    Point 6 comes next, listing 0 alone, and scores 0.95 with the second group:
    stepped, the batch must redo both groups (the lists' component), as one run does,
    so 6 joins {3, 4, 5} there too."""
    first, second = {0, 1, 2}, {3, 4, 5}

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        out = []
        for a, b in zip(left.tolist(), right.tolist(), strict=True):
            a, b = min(a, b), max(a, b)
            if b == 6:
                out.append(0.95 if a in second else 0.5)
            else:
                out.append(0.9 if (a in first) == (b in first) else 0.0)
        return np.array(out)

    idx = np.array([[1, 2, -1], [0, 2, -1], [0, 1, 3], [2, 4, 5], [3, 5, -1], [3, 4, -1]])
    sim = np.where(idx >= 0, 0.9, 0.0)
    X = np.eye(7, dtype=np.float32)
    params: dict[str, Any] = {"k": 3, "linkage": "average", "tau_min": 0.3, "n_levels": 12}
    params |= {"marking": "components", "complete_max": 1000}
    stepped, whole = MBSCC(**params), MBSCC(**params)
    stepped.partial_fit(X[:6], neighbors=(idx, sim), pair_scores=scores)
    stepped.partial_fit(
        X[6:], neighbors=(np.array([[0, -1, -1]]), np.array([[0.9, 0, 0]])), pair_scores=scores
    )
    whole.partial_fit(
        X,
        neighbors=(np.r_[idx, [[0, -1, -1]]], np.r_[sim, [[0.9, 0, 0]]]),
        pair_scores=scores,
    )
    assert stepped.touched_.points.tolist() == list(range(7))
    assert _structure(stepped.hierarchy_) == _structure(whole.hierarchy_)
    formed = {key for key, (score, _, _) in _structure(whole.hierarchy_).items() if score}
    assert frozenset({3, 4, 5, 6}) in formed


def test_pairs_are_scored_in_chunks_that_give_one_calls_result(monkeypatch: Any) -> None:
    """The pair scorer is asked SCORE_CHUNK pairs at a time (memory: a pair model's
    free text holds each pair's grams), and the hierarchy is the one of a single call."""
    from er.cluster import _graph

    rng = np.random.default_rng(7)
    X = np.abs(rng.normal(size=(4, 5))[rng.integers(0, 4, 60)] + 0.2 * rng.normal(size=(60, 5)))
    X = X.astype(np.float32)
    cosines, sizes = _cosines(X), []

    def counted(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        sizes.append(left.size)
        return np.asarray(cosines(left, right))

    params: dict[str, Any] = {"k": 3, "linkage": "average", "tau_min": 0.3, "n_levels": 12}
    params |= {"marking": "components", "complete_max": 1000, "exact_levels": True}
    whole = MBSCC(**params).partial_fit(X, pair_scores=cosines)
    monkeypatch.setattr(_graph, "SCORE_CHUNK", 7)
    chunked = MBSCC(**params).partial_fit(X, pair_scores=counted)
    assert max(sizes) <= 7 and sum(sizes) > 7
    assert _structure(chunked.hierarchy_) == _structure(whole.hierarchy_)
