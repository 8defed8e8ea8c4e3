"""``best_cut``: the cut development labels choose, against a brute-force oracle.

Oracle: scipy's own average-linkage tree cut at every merge distance (``fcluster``),
each partition scored on the labelled points by scikit-learn's pair confusion matrix;
the best of all of them is what ``best_cut`` must find.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.metrics.cluster import pair_confusion_matrix

from er.cluster import Hierarchy
from er.evaluation import best_cut, cut_at_score


def _f1(gold: np.ndarray, pred: np.ndarray) -> float:
    (_, fp), (fn, tp) = pair_confusion_matrix(gold, pred) // 2
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return 2 * p * r / (p + r) if p + r else 0.0


def _case(seed: int, n: int, share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, max(2, n // 4), size=n)
    X = rng.normal(size=(gold.max() + 1, 3))[gold] + rng.normal(scale=0.7, size=(n, 3))
    labelled = rng.random(n) < share
    labelled[np.flatnonzero(gold == gold[0])[:2]] = True  # at least one labelled pair
    return linkage(X, "average"), gold, labelled


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(4, 60),
    share=st.floats(0.1, 1.0),
)
def test_the_best_cut_is_the_best_partition_scipy_gives(seed: int, n: int, share: float) -> None:
    Z, gold, labelled = _case(seed, n, share)
    if np.unique(gold[labelled]).size == labelled.sum():
        return  # no labelled pair (the forced pair was one point)
    h = Hierarchy.from_linkage(Z)
    out = best_cut(h, gold, labelled, n_grid=10_000)

    oracle = max(
        _f1(gold[labelled], fcluster(Z, d, criterion="distance")[labelled])
        for d in np.r_[0.0, Z[:, 2]]
    )
    assert out["f1"] == pytest.approx(oracle, abs=1e-12)
    at = cut_at_score(h, out["threshold"])  # the cut it returns gives that figure
    assert _f1(gold[labelled], at[labelled]) == pytest.approx(out["f1"], abs=1e-12)
    assert out["n_labelled"] == int(labelled.sum())


def test_a_plateau_of_equal_cuts_is_cut_in_its_middle() -> None:
    # a (0, 0.1) and b (10) are labelled, two unlabelled points sit at 5.0 and 5.3.
    # The merges score 0.9 (a), 0.7 (the unlabelled pair), -4.1 (a with them) and
    # -6.4 (b with the rest): every cut in (-6.4, 0.9] scores the labels at F1 1.0, and
    # the middle of that interval keeps both pairs and a and b apart.
    Z = linkage(np.array([[0.0], [0.1], [5.0], [5.3], [10.0]]), "average")
    h = Hierarchy.from_linkage(Z)
    gold = np.array(["a", "a", "", "", "b"])
    out = best_cut(h, gold, np.array([1, 1, 0, 0, 1], bool))
    merges = h.score[h.n_points :]
    assert out["f1"] == 1.0
    assert out["threshold"] == pytest.approx((merges.min() + merges.max()) / 2)
    at = cut_at_score(h, out["threshold"])
    assert at[0] == at[1] and at[2] == at[3] and len({at[0], at[2], at[4]}) == 3


def test_labels_without_a_pair_choose_nothing() -> None:
    h = Hierarchy.from_linkage(linkage(np.array([[0.0], [1.0], [3.0]]), "average"))
    with pytest.raises(ValueError, match="no two mentions"):
        best_cut(h, np.array(["a", "b", "c"]), np.ones(3, bool))
