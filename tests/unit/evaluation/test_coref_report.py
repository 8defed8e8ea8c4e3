"""The evaluation report's figures against independent computations.

Oracles: scikit-learn's pair confusion matrix for pairwise P/R, a brute-force
B-cubed, a path walk for the score cut, and ``er score``'s own dict for the names
both share.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics.cluster import pair_confusion_matrix

from er.cluster import SCC, Grinch
from er.evaluation import coreference_report, cut_at_score, score_hierarchy


def _data(seed: int, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 8, size=n)
    X = rng.normal(size=(8, 10))[y] * 2 + rng.normal(size=(n, 10))
    return X.astype(np.float32), y


def _sklearn_pairwise(gold: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    (_, fp), (fn, tp) = pair_confusion_matrix(gold, pred) // 2
    return tp / (tp + fp) if tp + fp else 1.0, tp / (tp + fn) if tp + fn else 1.0


def _brute_bcubed(gold: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    p = np.mean([np.mean(gold[pred == pred[i]] == gold[i]) for i in range(len(gold))])
    r = np.mean([np.mean(pred[gold == gold[i]] == pred[i]) for i in range(len(gold))])
    return float(p), float(r)


def _walk(hierarchy, threshold: float) -> np.ndarray:  # type: ignore[no-untyped-def]
    parent = hierarchy.parents()
    out = []
    for leaf in range(hierarchy.n_points):
        v = leaf
        while parent[v] >= 0 and hierarchy.score[parent[v]] >= threshold:
            v = parent[v]
        out.append(v)
    return np.array(out)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), algorithm=st.sampled_from(["scc", "grinch"]))
def test_figures_equal_independent_computations(seed: int, algorithm: str) -> None:
    X, y = _data(seed)
    est = SCC(k=8) if algorithm == "scc" else Grinch()
    h = est.fit(X).hierarchy_
    threshold = float(np.nanmedian(h.score[h.n_points :]))
    report = coreference_report(h, y, threshold=threshold)

    pred = _walk(h, threshold)
    assert np.array_equal(cut_at_score(h, threshold), pred)
    assert report["n_entities"] == np.unique(pred).size
    p, r = _sklearn_pairwise(y, pred)
    assert report["pairwise_prf_at_cut"][:2] == pytest.approx([p, r], abs=1e-12)
    assert report["bcubed_at_cut"][:2] == pytest.approx(_brute_bcubed(y, pred), abs=1e-12)
    for row in report["sweep"]:
        labels = _walk(h, row["threshold"])
        assert [row["precision"], row["recall"]] == pytest.approx(
            _sklearn_pairwise(y, labels), abs=1e-12
        )
    # the names er score uses carry the same values
    for key, value in score_hierarchy(h, y).items():
        assert report[key] == pytest.approx(value)


def test_sizes_and_worst_errors() -> None:
    # gold: {0,1,2}, {3,4}, {5}; predicted (by hand-built tree cut): {0,1,3,4}, {2}, {5}
    from er.cluster import Hierarchy

    edges = [(0, 6), (1, 6), (3, 7), (4, 7), (6, 8), (7, 8), (2, 9), (8, 9), (5, 10), (9, 10)]
    score = np.r_[np.full(6, np.nan), [0.9, 0.9, 0.8, 0.3, 0.1]]
    lv = np.zeros(11, np.int32)
    h = Hierarchy(6, np.array(edges), score, lv, lv)
    gold = np.array(["a", "a", "a", "b", "b", "c"])
    report = coreference_report(h, gold, threshold=0.5)
    assert report["sizes"] == {"predicted": {"1": 2, "4": 1}, "gold": {"1": 1, "2": 1, "3": 1}}
    assert report["false_merges"] == [{"group": 8, "mentions": [0, 1, 3, 4], "parts": 2}]
    assert report["splits"] == [{"group": "a", "mentions": [0, 1, 2], "parts": 2}]


@settings(max_examples=200, deadline=None)
@given(
    group=st.lists(st.integers(0, 9), min_size=1, max_size=50),
    data=st.data(),
    top=st.integers(1, 6),
)
def test_worst_errors_equal_brute_force(group: list[int], data: st.DataObject, top: int) -> None:
    from er.evaluation._coref import _worst

    other = data.draw(st.lists(st.integers(0, 6), min_size=len(group), max_size=len(group)))
    g, o = np.asarray(group, np.int64), np.asarray(other, np.int64)
    brute = []
    for label in sorted(set(group)):  # every group, the slow way
        members = [i for i, v in enumerate(group) if v == label]
        parts = len({other[i] for i in members})
        if parts > 1:
            brute.append({"group": label, "mentions": members, "parts": parts})
    brute.sort(key=lambda e: (-e["parts"], -len(e["mentions"]), e["mentions"][0]))
    assert _worst(g, o, top) == brute[:top]
