"""The round engine keeps best neighbours between rounds; recomputing them is the oracle.

``Agglomerator.nearest`` carries each cluster's answer over a contraction and redoes
only the rows a merge touched. The oracle recomputes every linkage of every round from
the contracted graph, so the two must build the same hierarchy, ties included.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC, SCC, Affinity, RecipNN, _rounds


class _Recomputing(_rounds.Agglomerator):
    """Every round from scratch: no answer survives a contraction."""

    def nearest(self) -> tuple[Any, Any]:
        self._nearest = None
        self._merged = None
        return super().nearest()


# monkeypatch is used only through monkeypatch.context(), undone within each example.
_ONCE = [HealthCheck.function_scoped_fixture]


def _same(a: Any, b: Any) -> None:
    assert np.array_equal(a.edges, b.edges)
    assert np.array_equal(a.level_lo, b.level_lo) and np.array_equal(a.level_hi, b.level_hi)
    np.testing.assert_array_equal(a.score, b.score)


def _points(seed: int, n: int, blobs: int, noise: float, dups: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if noise > 1.8:  # small integer vectors: many exactly equal linkages
        return rng.integers(0, 3, size=(n, 3)).astype(np.float32) + np.float32(0.5)
    X = rng.normal(size=(blobs, 6))[rng.integers(0, blobs, n)] + noise * rng.normal(size=(n, 6))
    if dups:  # exact duplicates make equal linkages, where the tie rule decides
        X[rng.integers(0, n, dups)] = X[rng.integers(0, n, dups)]
    return X.astype(np.float32)


@settings(max_examples=60, deadline=None, suppress_health_check=_ONCE)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 120),
    blobs=st.integers(1, 8),
    noise=st.floats(0.01, 2.0),
    dups=st.integers(0, 10),
    linkage=st.sampled_from(_rounds.LINKAGES),
    levels=st.integers(1, 60),
    k=st.integers(1, 8),
    algo=st.sampled_from(["scc", "affinity", "recipnn"]),
)
def test_kept_best_neighbours_build_the_recomputed_hierarchy(
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    n: int,
    blobs: int,
    noise: float,
    dups: int,
    linkage: str,
    levels: int,
    k: int,
    algo: str,
) -> None:
    X = _points(seed, n, blobs, noise, dups)
    make = {
        "scc": lambda: SCC(n_levels=levels, linkage=linkage, k=k),
        "affinity": lambda: Affinity(linkage=linkage, k=k),
        "recipnn": lambda: RecipNN(linkage=linkage, k=k),
    }[algo]
    kept = make().fit(X).hierarchy_
    with monkeypatch.context() as m:
        m.setattr("er.cluster._scc.Agglomerator", _Recomputing)
        oracle = make().fit(X).hierarchy_
    _same(kept, oracle)


def _batched_points(min_batches: int) -> st.SearchStrategy[dict[str, Any]]:
    """Points arriving in mini-batches: :func:`_points`'s arguments and batch sizes."""
    return st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**32 - 1),
            "batches": st.lists(st.integers(1, 40), min_size=min_batches, max_size=6),
            "blobs": st.integers(1, 6),
            "noise": st.floats(0.05, 2.0),
            "dups": st.integers(0, 6),
        }
    )


def _mbscc_batches(case: dict[str, Any], **params: Any) -> list[Any]:
    """(hierarchy, stable ids) after each mini-batch of MBSCC over a
    :func:`_batched_points` case."""
    batches = case["batches"]
    X = _points(case["seed"], sum(batches), case["blobs"], case["noise"], case["dups"])
    est = MBSCC(k=4, n_levels=25, schedule="linear", **params)
    out = []
    for a, b in itertools.pairwise(np.cumsum([0, *batches])):
        est.partial_fit(X[a:b])
        out.append((est.hierarchy_, est.node_ids_.copy()))
    return out


def _same_batches(got: list[Any], want: list[Any]) -> None:
    for (h1, ids1), (h2, ids2) in zip(got, want, strict=True):
        _same(h1, h2)
        assert np.array_equal(ids1, ids2)


@settings(max_examples=30, deadline=None, suppress_health_check=_ONCE)
@given(
    case=_batched_points(1),
    linkage=st.sampled_from(_rounds.LINKAGES),
    marking=st.sampled_from(["paper", "exact"]),
)
def test_mbscc_rounds_with_kept_answers_equal_recomputed_ones(
    monkeypatch: pytest.MonkeyPatch, case: dict[str, Any], linkage: str, marking: str
) -> None:
    kept = _mbscc_batches(case, linkage=linkage, marking=marking)
    with monkeypatch.context() as m:
        m.setattr("er.cluster._mbscc.Agglomerator", _Recomputing)
        oracle = _mbscc_batches(case, linkage=linkage, marking=marking)
    _same_batches(kept, oracle)


@settings(max_examples=40, deadline=None, suppress_health_check=_ONCE)
@given(case=_batched_points(2), linkage=st.sampled_from(["average", "single"]))
def test_mbscc_rows_computed_alone_equal_every_row_computed(
    monkeypatch: pytest.MonkeyPatch, case: dict[str, Any], linkage: str
) -> None:
    """Paper marking computes only the clusters whose decision is not reused
    (``ROWS_ALONE_BELOW``); the oracle computes every row and then overwrites the
    reused ones. Same hierarchy and ids after every batch, ties included."""
    runs = []
    for share in (2.0, 0.0):  # always alone; never
        with monkeypatch.context() as m:
            m.setattr(_rounds, "ROWS_ALONE_BELOW", share)
            runs.append(_mbscc_batches(case, linkage=linkage))
    _same_batches(*runs)


def test_rows_alone_branch_runs_when_later_batches_reuse_decisions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The equality above tests something only if the rows-alone branch runs: later
    batches leave most clusters unmarked, and those reuse their decisions."""
    computed: list[int] = []
    real = _rounds.Agglomerator._best_of_rows

    def spy(self: _rounds.Agglomerator, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        computed.append(rows.size)
        return real(self, rows)

    monkeypatch.setattr(_rounds.Agglomerator, "_best_of_rows", spy)
    monkeypatch.setattr(_rounds, "ROWS_ALONE_BELOW", 2.0)
    case = {"seed": 3, "batches": [80, 5, 5], "blobs": 6, "noise": 0.1, "dups": 0}
    _mbscc_batches(case, linkage="average")
    assert computed  # average linkage keeps no answers: only _decisions calls it
