"""The gold-free signal's pairs and shares (er.evaluation._agreement), by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.evaluation._agreement import agreement_figures, inside_pairs

labels_st = st.lists(st.integers(0, 12), min_size=1, max_size=60).map(
    lambda xs: np.array(xs, np.int64)
)


def _all_inside(labels: np.ndarray) -> set[tuple[int, int]]:
    return {
        (i, j) for i, j in itertools.combinations(range(labels.size), 2) if labels[i] == labels[j]
    }


@settings(max_examples=200, deadline=None)
@given(labels=labels_st, seed=st.integers(0, 2**16))
def test_every_inside_pair_when_the_budget_holds_them(labels: np.ndarray, seed: int) -> None:
    want = _all_inside(labels)
    left, right, sampled = inside_pairs(labels, len(want), np.random.default_rng(seed))
    assert not sampled
    got = [(min(a, b), max(a, b)) for a, b in zip(left.tolist(), right.tolist(), strict=True)]
    assert sorted(got) == sorted(want)  # each once


@settings(max_examples=200, deadline=None)
@given(labels=labels_st, budget=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_a_sample_holds_inside_pairs_only(labels: np.ndarray, budget: int, seed: int) -> None:
    every = _all_inside(labels)
    left, right, sampled = inside_pairs(labels, budget, np.random.default_rng(seed))
    assert sampled == (len(every) > budget)
    if sampled:
        assert left.size == budget
        assert all((min(a, b), max(a, b)) in every for a, b in zip(left, right, strict=True))


def test_a_sample_is_uniform_over_the_inside_pairs() -> None:
    """One entity of 30 (435 pairs) and one of 3 (3 pairs): each pair drawn as often."""
    labels = np.r_[np.zeros(30, np.int64), np.ones(3, np.int64)]
    rng = np.random.default_rng(1)
    drawn = [inside_pairs(labels, 100, rng) for _ in range(438)]
    assert all(sampled for _, _, sampled in drawn)
    left = np.concatenate([a for a, _, _ in drawn])
    right = np.concatenate([b for _, b, _ in drawn])
    key = np.minimum(left, right) * 33 + np.maximum(left, right)
    counts = np.unique(key, return_counts=True)[1]
    assert counts.size == 438
    assert counts.mean() == pytest.approx(100)
    # a Poisson-like spread around 100: no pair drawn far more or less often
    assert counts.min() > 55 and counts.max() < 150


def test_shares_count_below_and_at_the_cut() -> None:
    got = agreement_figures(np.array([0.1, 0.5, 0.9, 0.49]), np.array([0.5, 0.2]), 0.5)
    assert got == {
        "inside_pairs": 4,
        "inside_improbable": 0.5,
        "across_pairs": 2,
        "across_probable": 0.5,
        "cut": 0.5,
    }
    empty = agreement_figures(np.zeros(0), np.zeros(0))
    assert empty["inside_improbable"] is None and empty["across_probable"] is None
