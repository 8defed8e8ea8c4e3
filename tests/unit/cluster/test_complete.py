"""Completing the pairs around the cut's clusters (MBSCC ``complete_at``;
er.cluster._complete.Completion.refine).

Oracles: scipy's average-linkage HAC over every pair (``linkage`` + ``fcluster``),
which never sees er's lists, budget or probes; and a brute-force reading of which pairs
the rule must add.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from er.cluster import MBSCC
from er.cluster._complete import PROBE_MARGIN, pairs_around
from er.cluster._scc import thresholds
from tests.unit.cluster.test_exact_levels import _partition, _scipy_cut
from tests.unit.cluster.test_mbscc_components import _cosines

# linear levels 1.0, 0.95, ..., 0.05: the cut 0.5 is the 11th
LEVELS: dict[str, Any] = {"n_levels": 20, "schedule": "linear", "tau_min": 0.05}
CUT, CUT_LEVEL = 0.5, 11


def _entity_and_neighbours(seed: int) -> np.ndarray:
    """120 strings of one entity (cosine 0.9 on average among them) and 16 entities of
    3 to 5 near it (about 0.3 to it), in an order drawn at random; shape (n, 8), every
    coordinate >= 0."""
    rng = np.random.default_rng(seed)
    base = np.zeros(8)
    base[0] = 1.0
    big = [base + 0.6 * rng.random(8) for _ in range(120)]
    small = []
    for j in range(16):
        centre = 0.3 * base + np.eye(8)[1 + j % 7] + 0.3 * np.eye(8)[1 + (j + 3) % 7]
        small += [centre + 0.08 * rng.random(8) for _ in range(int(rng.integers(3, 6)))]
    X = np.array(big + small)
    return X[rng.permutation(X.shape[0])].astype(np.float32)


def _fed(X: np.ndarray, asked: list[np.ndarray] | None = None, **params: Any) -> MBSCC:
    """MBSCC over X in batches of 25, every pair scored by its cosine; each pair asked
    of the scorer is appended to ``asked`` as a (2, p) array."""
    m = MBSCC(**LEVELS, linkage="average", k=8, marking="components", exact_levels=True, **params)
    cosines = _cosines(X)

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        if asked is not None:
            asked.append(np.stack([left, right]))
        return cosines(left, right)

    for at in range(0, X.shape[0], 25):
        m.partial_fit(X[at : at + 25], pair_scores=scores)
    return m


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_an_entity_past_the_budget_is_hacs_cluster_at_the_cut(seed: int, monkeypatch: Any) -> None:
    """Components of 133 to 155 points past a budget of 130 points' pairs (8,385): two
    steps through 8-neighbour lists reach a fraction of the entity's pairs, and average
    linkage (unscored pairs at 0) splits it (parts of 22 to 38); completed around the
    cut until nothing is added, the clusters at the cut are scipy's HAC over every
    pair. (The default two passes stop short on two of the four seeds: 127 of 135,
    126 of 133; on 20,000 strings two passes and eight gave one F1.)"""
    from er.cluster import _components

    monkeypatch.setattr(_components, "REFINE_PASSES", 10)
    X = _entity_and_neighbours(seed)
    V = X / np.linalg.norm(X, axis=1, keepdims=True)
    every_pair = np.clip(V @ V.T, 0.0, 1.0)
    np.fill_diagonal(every_pair, 0.0)
    assert thresholds(1.0, 0.05, 20, "linear")[CUT_LEVEL - 1] == pytest.approx(CUT)
    hac = _scipy_cut(every_pair, "average", CUT)
    assert max(len(c) for c in hac) >= 120  # the oracle keeps the entity whole
    completed = _fed(X, complete_max=130, complete_at=CUT)
    assert _partition(completed.hierarchy_.cut(CUT_LEVEL)) == hac
    budget_only = _fed(X, complete_max=130).hierarchy_
    assert max(len(c) for c in _partition(budget_only.cut(CUT_LEVEL))) < 60


def _entities_apart(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One entity of 120 points and 20 of 3 to 5, each about its own direction of 64
    with a share of one common direction: cosine about 0.8 inside an entity, about
    0.1 across (under the cut, over the floor: one floor component); shuffled. The
    points (n, 64) and each one's entity (n,)."""
    rng = np.random.default_rng(seed)
    common = np.zeros(64)
    common[0] = 1.0
    rows, entity = [], []
    for e in range(21):
        own = np.zeros(64)
        own[1 + e] = 1.0
        for _ in range(120 if e == 0 else int(rng.integers(3, 6))):
            rows.append(0.4 * common + own + 0.06 * rng.normal(size=64))
            entity.append(e)
    order = rng.permutation(len(rows))
    return np.array(rows)[order].astype(np.float32), np.array(entity)[order]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cut_components_completed_give_hacs_clusters_at_the_cut(seed: int) -> None:
    """Completed inside the components of the list edges at the cut
    (``complete_within``) instead of the floor component (every point, past the
    budget): each entity's component fits the budget, every pair of it is scored, and
    the clusters at the cut are scipy's HAC over every pair, with no pass around the
    cut. No pair across two entities is scored (the floor component's completion asks
    for them)."""
    X, entity = _entities_apart(seed)
    V = X / np.linalg.norm(X, axis=1, keepdims=True)
    every_pair = np.clip(V @ V.T, 0.0, 1.0)
    np.fill_diagonal(every_pair, 0.0)
    across = every_pair[(every_pair < 0.5) & (every_pair > 0)]
    assert 0.05 < np.median(across) < 0.3
    hac = _scipy_cut(every_pair, "average", CUT)
    assert max(len(c) for c in hac) == 120  # the oracle keeps the entity whole
    asked: list[np.ndarray] = []
    within = _fed(X, complete_max=130, complete_within=CUT, asked=asked).hierarchy_
    assert _partition(within.cut(CUT_LEVEL)) == hac
    pairs = np.concatenate(asked, axis=1)
    assert pairs.shape[1] > 7_000 and (entity[pairs[0]] == entity[pairs[1]]).all()
    asked.clear()
    _fed(X, complete_max=130, asked=asked)
    pairs = np.concatenate(asked, axis=1)
    assert (entity[pairs[0]] != entity[pairs[1]]).any()


@st.composite
def grouped_graphs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A dense similarity matrix (every pair's score), a graph keeping some of its
    pairs, and a grouping of the rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 40))
    S = rng.random((n, n)) ** draw(st.sampled_from([0.5, 1.0, 3.0]))
    S = np.triu(S, 1) + np.triu(S, 1).T
    kept = rng.random((n, n)) < draw(st.sampled_from([0.1, 0.4, 0.9]))
    W = np.where(np.triu(kept, 1) | np.triu(kept, 1).T, S, 0.0)
    group = rng.integers(0, draw(st.integers(1, n)), n)
    return S, W, np.unique(group, return_inverse=True)[1]


@settings(max_examples=200, deadline=None)
@given(data=grouped_graphs(), at=st.sampled_from([0.2, 0.5, 0.8]))
def test_pairs_around_are_the_rules_pairs(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], at: float
) -> None:
    """Brute force over every two groups: the pairs inside a group, and those of two
    groups whose graph edges average ``at`` or more, whose every pair (unscored at 0)
    does not, and whose probe, here exact (every probe draw scored by the dense
    matrix and the probe's mean compared), reaches ``at - PROBE_MARGIN``."""
    S, W, group = data
    drawn: list[tuple[np.ndarray, np.ndarray]] = []

    def probe(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        drawn.append((left, right))
        return S[left, right]

    left, right = pairs_around(sparse.csr_array(W), group, at, probe)
    got = set(zip(left.tolist(), right.tolist(), strict=True))
    assert len(got) == left.size and all(a < b for a, b in got)
    probed = {}
    for pl, pr in drawn:  # each probed group pair's draws, in order
        for k in range(0, pl.size, 32):
            key = (int(group[pl[k]]), int(group[pr[k]]))
            probed[key] = float(S[pl[k : k + 32], pr[k : k + 32]].mean())
    want = set()
    n, g = group.size, group.max() + 1
    for a in range(g):
        A = np.flatnonzero(group == a)
        want |= {(int(x), int(y)) for i, x in enumerate(A) for y in A[i + 1 :]}
        for b in range(a + 1, g):
            B = np.flatnonzero(group == b)
            block = W[np.ix_(A, B)]
            if not block.any():
                continue
            mean_scored = block.sum() / np.count_nonzero(block)
            if mean_scored < at or block.sum() >= at * A.size * B.size:
                continue
            if A.size * B.size > 64 and probed[(a, b)] < at - PROBE_MARGIN:
                continue
            want |= {(int(min(x, y)), int(max(x, y))) for x in A for y in B}
    assert got == want
    assert n >= 2


@settings(max_examples=200, deadline=None)
@given(data=grouped_graphs(), at=st.sampled_from([0.2, 0.5]), budget=st.integers(0, 400))
def test_a_budget_takes_whole_blocks_smallest_first(
    data: tuple[np.ndarray, np.ndarray, np.ndarray], at: float, budget: int
) -> None:
    """Under a budget: at most that many pairs, each group's inside and each two groups'
    cross taken whole or not at all, and a block left out only when it is larger than
    the budget's rest after every smaller one (the blocks, from the unbounded pairs)."""
    S, W, group = data

    def probe(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return S[left, right]

    def blocks(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        for p, q in pairs:
            key = (min(group[p], group[q]), max(group[p], group[q]))
            out[key] = out.get(key, 0) + 1
        return out

    full = pairs_around(sparse.csr_array(W), group, at, probe)
    part = pairs_around(sparse.csr_array(W), group, at, probe, budget=budget)
    got = set(zip(part[0].tolist(), part[1].tolist(), strict=True))
    every = blocks(set(zip(full[0].tolist(), full[1].tolist(), strict=True)))
    taken = blocks(got)
    assert len(got) <= budget and got <= set(zip(full[0].tolist(), full[1].tolist(), strict=True))
    assert all(every[key] == count for key, count in taken.items())  # whole blocks
    left_out = [c for key, c in every.items() if key not in taken]
    assert all(c > budget - len(got) for c in left_out)


def _probe_of(S: np.ndarray, drawn: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    def probe(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        drawn.append((left.copy(), right.copy()))
        return S[left, right]

    return probe


@settings(max_examples=100, deadline=None)
@given(
    one=grouped_graphs(),
    other=grouped_graphs(),
    budget=st.sampled_from([None, 0, 50, 400]),
    at=st.sampled_from([0.005, 0.3, 0.5]),
)
def test_a_components_pairs_and_probes_are_its_own(
    one: tuple[np.ndarray, np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray, np.ndarray],
    budget: int | None,
    at: float,
) -> None:
    """Two floor components side by side (an edge between them below the floor): the
    first gets the pairs, and draws the probes, it gets alone, whatever the second
    holds; no pair joins the two; and a call again draws the same probes."""
    (S1, W1, g1), (S2, W2, g2) = one, other
    n1, n2 = g1.size, g2.size
    W = np.zeros((n1 + n2, n1 + n2))
    W[:n1, :n1], W[n1:, n1:] = W1, W2
    W[0, n1] = W[n1, 0] = 0.01  # a list edge across, under the floor (above 0.005)
    S = np.zeros_like(W)
    S[:n1, :n1], S[n1:, n1:] = S1, S2
    group = np.r_[g1, g2 + g1.max() + 1]
    part = np.r_[np.zeros(g1.max() + 1, np.int64), np.ones(g2.max() + 1, np.int64)]
    alone_drawn: list[tuple[np.ndarray, np.ndarray]] = []
    both_drawn: list[tuple[np.ndarray, np.ndarray]] = []
    again_drawn: list[tuple[np.ndarray, np.ndarray]] = []
    alone = pairs_around(sparse.csr_array(W1), g1, at, _probe_of(S1, alone_drawn), None, budget)
    both = pairs_around(sparse.csr_array(W), group, at, _probe_of(S, both_drawn), part, budget)
    pairs_around(sparse.csr_array(W), group, at, _probe_of(S, again_drawn), part, budget)
    first = both[1] < n1
    assert not np.any((both[0] < n1) & (both[1] >= n1))  # nothing across
    assert set(zip(both[0][first].tolist(), both[1][first].tolist(), strict=True)) == set(
        zip(alone[0].tolist(), alone[1].tolist(), strict=True)
    )
    drawn = [np.concatenate([d[k] for d in both_drawn] or [np.zeros(0, int)]) for k in (0, 1)]
    mine = drawn[0] < n1
    want = [np.concatenate([d[k] for d in alone_drawn] or [np.zeros(0, int)]) for k in (0, 1)]
    assert np.array_equal(drawn[0][mine], want[0]) and np.array_equal(drawn[1][mine], want[1])
    again = [np.concatenate([d[k] for d in again_drawn] or [np.zeros(0, int)]) for k in (0, 1)]
    assert all(np.array_equal(a, b) for a, b in zip(again, drawn, strict=True))


def test_complete_at_needs_complete_max_and_exact_levels() -> None:
    from er.exceptions import ConfigError

    X = np.abs(np.random.default_rng(0).normal(size=(6, 4))).astype(np.float32)
    base: dict[str, Any] = {"linkage": "average", "tau_min": 0.1, "marking": "components"}
    for params in ({"complete_max": 10}, {"exact_levels": True}):
        with pytest.raises(ConfigError, match="complete_at needs"):
            MBSCC(**base, **params, complete_at=0.5).partial_fit(X, pair_scores=_cosines(X))
