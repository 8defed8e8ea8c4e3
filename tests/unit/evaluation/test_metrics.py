"""Metrics against hand-computed cases, brute force and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from sklearn import metrics as skm

from er.evaluation import (
    bcubed,
    ceaf_e,
    conll_f1,
    contingency_matrix,
    dendrogram_purity,
    dp_means_cost,
    jaccard_metrics,
    muc,
    pairwise_prf,
)

from .._trees import brute_dendrogram_purity, leaves_under, random_tree

FLAT = {"pairwise": pairwise_prf, "bcubed": bcubed, "muc": muc, "ceaf_e": ceaf_e}
labelings = st.lists(st.integers(0, 5), min_size=2, max_size=30)


def test_hand_computed_case() -> None:
    # gold {a,b,c} {d,e}; pred {a,b} {c,d,e}
    gold, pred = [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]
    assert pairwise_prf(gold, pred) == pytest.approx((2 / 4, 2 / 4, 0.5))
    # B3: P = (1+1+1/3+2/3+2/3)/5, R = (2/3+2/3+1/3+1+1)/5
    assert bcubed(gold, pred)[:2] == pytest.approx((11 / 15, 11 / 15))
    # MUC: R = ((3-2)+(2-1))/((3-1)+(2-1)) = 2/3 ({a,b,c} splits in 2, {d,e} stays whole);
    #      P = ((2-1)+(3-2))/((2-1)+(3-1)) = 2/3
    assert muc(gold, pred)[:2] == pytest.approx((2 / 3, 2 / 3))
    # CEAF-e: best alignment {abc}-{ab}: 2*2/5, {de}-{cde}: 2*2/5 -> 1.6 / 2 each side
    assert ceaf_e(gold, pred)[:2] == pytest.approx((0.8, 0.8))
    assert conll_f1(gold, pred) == pytest.approx(np.mean([2 / 3, 11 / 15, 0.8]))


def test_dendrogram_purity_hand_case() -> None:
    from er.cluster import Hierarchy

    # ((0,1),(2,3)) with classes a a a b: pairs (0,1) LCA {0,1} purity 1; (0,2),(1,2) LCA root 3/4
    h = Hierarchy(
        4,
        np.array([[0, 4], [1, 4], [2, 5], [3, 5], [4, 6], [5, 6]]),
        np.zeros(7),
        np.zeros(7),
        np.zeros(7),
    )
    assert dendrogram_purity(h, [0, 0, 0, 1]) == pytest.approx((1 + 0.75 + 0.75) / 3)


@pytest.mark.parametrize("name", sorted(FLAT))
@settings(max_examples=60, deadline=None)
@given(gold=labelings, data=st.data())
def test_flat_metric_invariances(name: str, gold: list[int], data: st.DataObject) -> None:
    metric = FLAT[name]
    pred = data.draw(st.lists(st.integers(0, 5), min_size=len(gold), max_size=len(gold)))
    p, r, f = metric(gold, pred)
    assert 0 <= p <= 1 and 0 <= r <= 1 and 0 <= f <= 1
    perm = np.random.default_rng(0).permutation(10)
    assert metric(perm[np.array(gold)], perm[np.array(pred)]) == pytest.approx((p, r, f))
    assert metric(pred, gold)[:2] == pytest.approx((r, p))  # swapping sides swaps P and R
    assert metric(gold, gold)[2] == pytest.approx(1.0) or name == "muc"


@settings(max_examples=60, deadline=None)
@given(gold=labelings, data=st.data())
def test_agreement_with_scikit_learn(gold: list[int], data: st.DataObject) -> None:
    pred = data.draw(st.lists(st.integers(0, 5), min_size=len(gold), max_size=len(gold)))
    C = contingency_matrix(gold, pred).toarray()
    np.testing.assert_array_equal(C, skm.cluster.contingency_matrix(gold, pred))
    # pairwise P/R are the Fowlkes-Mallows ingredients: FM = sqrt(P R)
    p, r, _ = pairwise_prf(gold, pred)
    tp = (C * (C - 1)).sum() / 2
    if tp:
        assert np.sqrt(p * r) == pytest.approx(skm.fowlkes_mallows_score(gold, pred))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 14), k=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_efficient_dendrogram_purity_equals_brute_force(n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = random_tree(n, rng)
    y = rng.integers(0, k, n)
    assert dendrogram_purity(h, y) == pytest.approx(brute_dendrogram_purity(h, y))
    assert 0 <= dendrogram_purity(h, y) <= 1


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 14), k=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_jaccard_metrics_equal_brute_force(n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = random_tree(n, rng)
    y = rng.integers(0, k, n)
    sets = leaves_under(h)
    golds = [set(np.flatnonzero(y == c).tolist()) for c in np.unique(y)]
    jac = np.array([[len(s & g) / len(s | g) for g in golds] for s in sets])
    got = jaccard_metrics(h, y)
    assert got["jacc_node"] == pytest.approx(jac.max(axis=1).mean())
    assert got["jacc_lbl"] == pytest.approx(jac.max(axis=0).mean())
    sizes = np.array([len(g) for g in golds])
    assert got["jacc_pt"] == pytest.approx((jac.max(axis=0) * sizes).sum() / sizes.sum())


def test_dp_is_one_iff_tree_contains_the_gold_partition() -> None:
    from er.cluster import Hierarchy

    h = Hierarchy(
        4,
        np.array([[0, 4], [1, 4], [2, 5], [3, 5], [4, 6], [5, 6]]),
        np.zeros(7),
        np.zeros(7),
        np.zeros(7),
    )
    assert dendrogram_purity(h, [0, 0, 1, 1]) == 1.0
    assert dendrogram_purity(h, [0, 1, 0, 1]) < 1.0
    assert jaccard_metrics(h, [0, 0, 1, 1])["jacc_lbl"] == 1.0


def test_dp_means_cost_by_hand() -> None:
    X = np.array([[0.0], [2.0], [10.0]])
    assert dp_means_cost(X, [0, 0, 1], lam=5.0) == pytest.approx(1 + 1 + 0 + 2 * 5.0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 60),
    seed=st.integers(0, 10_000),
    algo=st.sampled_from(["scc", "grinch", "hac"]),
)
def test_best_level_f1_one_pass_equals_cutting_every_level(n: int, seed: int, algo: str) -> None:
    """The union-find pass against the definition: cut every level, score each cut."""
    from er.cluster import SCC, Grinch, Hierarchy
    from er.evaluation import best_level_f1
    from er.evaluation._structure import _best_level_f1_by_cuts

    rng = np.random.default_rng(seed)
    y = rng.integers(0, max(n // 4, 1), n)
    X = (rng.normal(size=(max(n // 4, 1), 5))[y] + rng.normal(size=(n, 5))).astype(np.float32)
    if algo == "scc":
        h = SCC(k=4, n_levels=12).fit(X).hierarchy_
    elif algo == "grinch":
        h = Grinch().fit(X).hierarchy_
    else:  # scipy's average linkage, levels = merge rank
        from scipy.cluster.hierarchy import linkage

        h = Hierarchy.from_linkage(linkage(X, method="average", metric="cosine"))
    fast = best_level_f1(h, y)
    slow = _best_level_f1_by_cuts(h, y)
    assert fast[0] == pytest.approx(slow[0], abs=1e-12) and fast[1] == slow[1]


def _dense_ceaf_sim(gold: list[int], pred: list[int]) -> float:
    """Oracle: CEAF-e's phi_4 table filled densely by brute force, aligned by scipy's
    dense Hungarian solver (not the code under test's sparse matching)."""
    from scipy.optimize import linear_sum_assignment

    gs, ps = sorted(set(gold)), sorted(set(pred))
    phi = np.zeros((len(gs), len(ps)))
    for i, g in enumerate(gs):
        K = {k for k, v in enumerate(gold) if v == g}
        for j, p in enumerate(ps):
            R = {k for k, v in enumerate(pred) if v == p}
            phi[i, j] = 2 * len(K & R) / (len(K) + len(R))
    rows, cols = linear_sum_assignment(phi, maximize=True)
    return float(phi[rows, cols].sum())


@settings(max_examples=300, deadline=None)
@given(
    gold=st.lists(st.integers(0, 12), min_size=1, max_size=60),
    data=st.data(),
)
def test_ceaf_e_sparse_alignment_equals_dense_hungarian(
    gold: list[int], data: st.DataObject
) -> None:
    # Wide label ranges on both sides reach the hard cases: chains of clusters that
    # overlap two of the other side, one-sided giants, many singletons.
    pred = data.draw(st.lists(st.integers(0, 15), min_size=len(gold), max_size=len(gold)))
    sim = _dense_ceaf_sim(gold, pred)
    p, r, _ = ceaf_e(gold, pred)
    assert p == pytest.approx(sim / len(set(pred)), abs=1e-12)
    assert r == pytest.approx(sim / len(set(gold)), abs=1e-12)


def _chained_split(n_gold: int, seed: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Gold entities of 2-3 points; 10% of points move to a part shared by two
    neighbouring entities, so the alignment has real choices."""
    rng = np.random.default_rng(seed)
    gold = np.r_[np.repeat(np.arange(n_gold), 2), rng.integers(0, n_gold, n_gold // 2)]
    pred = gold.copy()
    moved = rng.random(gold.size) < 0.1
    pred[moved] = n_gold + gold[moved] // 2
    return gold, pred


def test_ceaf_e_chained_splits_equal_dense_hungarian() -> None:
    from scipy.optimize import linear_sum_assignment

    gold, pred = _chained_split(1_500, seed=1)
    C = contingency_matrix(gold, pred).toarray().astype(np.float64)
    phi = 2 * C / (C.sum(axis=1)[:, None] + C.sum(axis=0)[None, :])
    rows, cols = linear_sum_assignment(phi, maximize=True)
    sim = phi[rows, cols].sum()
    assert ceaf_e(gold, pred)[:2] == pytest.approx((sim / C.shape[1], sim / C.shape[0]), abs=1e-12)


def test_ceaf_e_where_a_dense_table_cannot_fit() -> None:
    import tracemalloc

    # 2,000,000 points, 800,000 gold and 1,200,000 predicted clusters: a dense float64
    # table would take 800,000 x 1,200,000 x 8 B = 7.7 TB; the sparse one is ~2.4M cells.
    gold, pred = _chained_split(800_000, seed=2)
    tracemalloc.start()
    p, r, f = ceaf_e(gold, pred)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 30
    # Bounds that do not use the matching: the identity alignment (each entity with
    # the part that kept its points) is feasible; no entity scores above 1.
    n_pred = np.unique(pred).size
    C = contingency_matrix(gold, pred).tocoo()
    gs, ps = np.asarray(C.sum(axis=1)).ravel(), np.asarray(C.sum(axis=0)).ravel()
    own = C.col == C.row
    identity = (2.0 * C.data[own] / (gs[C.row[own]] + ps[C.col[own]])).sum()
    assert identity / n_pred - 1e-12 <= p <= 800_000 / n_pred
    assert r == pytest.approx(p * n_pred / 800_000)
    assert f == pytest.approx(2 * p * r / (p + r))
