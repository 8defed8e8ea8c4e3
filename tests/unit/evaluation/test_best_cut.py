"""``best_cut``: the cut development labels choose, against a brute-force oracle.

Oracle: scipy's own average-linkage tree cut at every merge distance (``fcluster``),
each partition scored pair by pair in Python by the definition (a pair of two labelled
points counts as usual; a labelled point with an unlabelled one in one part is a false
merge; two unlabelled points count in no figure); the best of all of them is what
``best_cut`` must find, and its figures must be the ones at the cut it returns.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, linkage

from er.cluster import Hierarchy
from er.evaluation import best_cut, cut_at_score


def _figures(gold: np.ndarray, labelled: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(precision, F1) by the definition, over every pair."""
    tp = fp = fn = 0
    for i, j in combinations(range(len(gold)), 2):
        if not (labelled[i] or labelled[j]):
            continue
        same = pred[i] == pred[j]
        match = labelled[i] and labelled[j] and gold[i] == gold[j]
        tp += same and match
        fp += same and not match
        fn += match and not same
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, (2 * p * r / (p + r) if p + r else 0.0)


def _case(seed: int, n: int, share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, max(2, n // 4), size=n)
    X = rng.normal(size=(gold.max() + 1, 3))[gold] + rng.normal(scale=0.7, size=(n, 3))
    # whole entities labelled: a sample of the entities, every mention of each
    labelled = np.isin(gold, np.flatnonzero(rng.random(gold.max() + 1) < share))
    return linkage(X, "average"), gold, labelled


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 45), share=st.floats(0.05, 1.0))
def test_the_best_cut_is_the_best_partition_scipy_gives(seed: int, n: int, share: float) -> None:
    Z, gold, labelled = _case(seed, n, share)
    h = Hierarchy.from_linkage(Z)
    oracle = [
        _figures(gold, labelled, fcluster(Z, d, criterion="distance"))[1]
        for d in np.r_[0.0, Z[:, 2]]
    ]
    _agrees_with(h, gold, labelled, oracle)


def _agrees_with(h: Hierarchy, gold: np.ndarray, labelled: np.ndarray, oracle: list[float]) -> None:
    """``best_cut`` finds the best of the ``oracle``'s F1s (or refuses when no cut
    joins two labelled mentions of one entity), with its figures those at its cut."""
    if np.unique(gold[labelled]).size == labelled.sum() or max(oracle) == 0:
        with pytest.raises(ValueError):
            best_cut(h, gold, labelled)
        return
    out = best_cut(h, gold, labelled)
    assert out["f1"] == pytest.approx(max(oracle), abs=1e-12)
    at = cut_at_score(h, out["threshold"])  # its figures are the ones at its cut
    p, f1 = _figures(gold, labelled, at)
    assert (out["precision"], out["f1"]) == pytest.approx((p, f1), abs=1e-12)
    assert out["n_labelled"] == int(labelled.sum())


def test_a_labelled_entity_swallowing_unlabelled_mentions_is_a_false_merge() -> None:
    # a labelled pair (0, 0.1), three unlabelled points near it (1.0, 1.1, 1.2) and a
    # far labelled singleton: merging the unlabelled points in keeps the labelled
    # pair together and looks free if only labelled pairs count; it is not
    X = np.array([[0.0], [0.1], [1.0], [1.1], [1.2], [9.0]])
    h = Hierarchy.from_linkage(linkage(X, "average"))
    gold = np.array(["a", "a", "", "", "", "b"])
    out = best_cut(h, gold, np.array([1, 1, 0, 0, 0, 1], bool))
    part = cut_at_score(h, out["threshold"])
    assert out["f1"] == 1.0 and part[0] == part[1] and part[2] != part[0]


def test_a_plateau_of_equal_cuts_is_cut_in_its_middle() -> None:
    # a (0, 0.1) and b (10, 10.1) labelled: every cut from the 0.9 merge (b's pair at
    # 0.9 too) down to just above where a and b join scores F1 1.0; the middle of that
    # interval is returned
    Z = linkage(np.array([[0.0], [0.1], [10.0], [10.1]]), "average")
    h = Hierarchy.from_linkage(Z)
    out = best_cut(h, np.array(["a", "a", "b", "b"]), np.ones(4, bool))
    merges = np.sort(h.score[h.n_points :])  # the a-b join, then the two pairs' 0.9
    assert out["f1"] == 1.0
    assert out["threshold"] == pytest.approx((merges[0] + merges[-1]) / 2)


def test_a_probability_cut_stays_above_zero() -> None:
    # what stays apart hangs under one root of score 0 (MBSCC's): two labelled
    # mentions of one entity joined only there are best "cut" at 0, no probability
    Z = np.array([[0, 2, 0.05, 2], [1, 3, 0.05, 2], [4, 5, 1.0, 4]])
    h = Hierarchy.from_linkage(Z)
    gold, labelled = np.array(["x", "x", "", ""]), np.array([1, 1, 0, 0], bool)
    assert best_cut(h, gold, labelled)["threshold"] <= 0  # the root joins them
    with pytest.raises(ValueError, match="no cut joins"):
        best_cut(h, gold, labelled, above=0.0)


def test_labels_without_a_pair_choose_nothing() -> None:
    h = Hierarchy.from_linkage(linkage(np.array([[0.0], [1.0], [3.0]]), "average"))
    with pytest.raises(ValueError, match="no two mentions"):
        best_cut(h, np.array(["a", "b", "c"]), np.ones(3, bool))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(4, 40), share=st.floats(0.1, 1.0))
def test_on_a_dag_the_best_cut_is_the_best_of_every_cut(seed: int, n: int, share: float) -> None:
    """LLAMA's DAG (a node under several parents): every partition a cut gives (one per
    distinct node score, each node following its strongest parent), scored by the
    definition; ``best_cut`` finds the best of them."""
    from er.cluster import Llama

    _, gold, labelled = _case(seed, n, share)
    rng = np.random.default_rng(seed)
    X = np.abs(rng.normal(size=(gold.max() + 1, 4))[gold] + 0.5 * rng.normal(size=(n, 4)))
    h = Llama(p=3, k=min(5, n - 1)).fit(X.astype(np.float32)).hierarchy_
    scores = np.unique(h.score[np.isfinite(h.score)])
    cuts = np.r_[scores, scores.max(initial=0.0) + 1.0]
    _agrees_with(h, gold, labelled, [_figures(gold, labelled, cut_at_score(h, t))[1] for t in cuts])
