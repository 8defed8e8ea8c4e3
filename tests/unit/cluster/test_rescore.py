"""A new pair model mid-stream (MBSCC.rescore): every list scored again, the whole
hierarchy redone (issue #53: joins made on a first-batch model's scores outlived it).

Oracle: the same core given every point at once with the new scores; with lists as
long as the stream they hold every pair, so the two must agree exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC
from tests.unit.cluster.test_mbscc_components import _structure, streams

SAME: dict[str, Any] = {
    "n_levels": 12,
    "schedule": "linear",
    "tau_min": 0.05,
    "linkage": "mean",
    "marking": "components",
}


def _scorer(X: np.ndarray, power: float) -> Any:
    """Pair scores in [0, 1]: the cosine of the rows, raised to ``power`` (another
    model of the same records ranks some pairs alike and scores them apart)."""
    V = X / np.linalg.norm(X, axis=1, keepdims=True)

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.clip(np.einsum("ij,ij->i", V[left], V[right]), 0.0, 1.0) ** power

    return scores


def _every_pair(scores: Any, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """(b, stop - 1) each row's list of every other point so far, with its score."""
    b = stop - first
    idx = np.full((b, max(stop - 1, 1)), -1, np.int64)
    for r in range(b):
        others = np.r_[np.arange(0, first + r), np.arange(first + r + 1, stop)]
        idx[r, : others.size] = others
    sim = np.zeros(idx.shape, np.float32)
    ok = idx >= 0
    rows = np.repeat(np.arange(first, stop), idx.shape[1]).reshape(idx.shape)
    sim[ok] = scores(rows[ok], idx[ok])
    return idx, sim


@settings(max_examples=150, deadline=None)
@given(
    data=streams(),
    power=st.sampled_from([0.25, 4.0, 12.0]),
    switch=st.integers(1, 11),
    k_short=st.integers(0, 4),
)
def test_a_rescored_stream_is_the_whole_run_on_the_new_scores(
    data: tuple[np.ndarray, list[int]], power: float, switch: int, k_short: int
) -> None:
    """Batches scored by one model, then by another from batch ``switch`` on (the lists
    rescored there): the hierarchy the new model gives over every point at once."""
    X, cuts = data
    n = X.shape[0]
    old, new = _scorer(X, 1.0), _scorer(X, power)
    k = n + k_short  # lists hold every pair
    stepped, at = MBSCC(**SAME, k=k), 0
    for b, c in enumerate(cuts):
        if b == switch:
            stepped.rescore(new)
        scores = new if b >= switch else old
        stepped.partial_fit(X[at : at + c], neighbors=_every_pair(scores, at, at + c))
        at += c
    if switch >= len(cuts):  # the switch came after the last batch: the next step redoes
        stepped.rescore(new)
        stepped.partial_fit(X[:0], neighbors=_every_pair(new, n, n))
    whole = MBSCC(**SAME, k=k).partial_fit(X, neighbors=_every_pair(new, 0, n))
    assert _structure(stepped.hierarchy_) == _structure(whole.hierarchy_)


def test_lists_are_rescored_in_chunks_that_give_one_calls_hierarchy(monkeypatch: Any) -> None:
    """Every list pair of a large collection at once would not fit in memory: the
    scorer is asked SCORE_CHUNK pairs at a time, and the hierarchy is the whole run's
    on the new scores (the oracle of the property test above)."""
    from er.cluster import _graph

    rng = np.random.default_rng(3)
    X = np.abs(rng.normal(size=(5, 4))[rng.integers(0, 5, 40)] + 0.3 * rng.normal(size=(40, 4)))
    old, new, sizes = _scorer(X, 1.0), _scorer(X, 4.0), []

    def counted(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        sizes.append(left.size)
        return np.asarray(new(left, right))

    monkeypatch.setattr(_graph, "SCORE_CHUNK", 11)
    stepped = MBSCC(**SAME, k=40)
    stepped.partial_fit(X[:25], neighbors=_every_pair(old, 0, 25))
    stepped.rescore(counted)
    assert max(sizes) <= 11 and sum(sizes) == 25 * 24
    stepped.partial_fit(X[25:], neighbors=_every_pair(new, 25, 40))
    whole = MBSCC(**SAME, k=40).partial_fit(X, neighbors=_every_pair(new, 0, 40))
    assert _structure(stepped.hierarchy_) == _structure(whole.hierarchy_)


def test_rescore_before_any_point_is_nothing() -> None:
    core = MBSCC(**SAME)
    core.rescore(_scorer(np.ones((1, 2)), 1.0))
    assert not hasattr(core, "_knn")
