"""Pairs held against a match joined to the lists' pairs (MBSCC ``complete_against``).

Oracles: a brute-force reading of which pairs the rule adds; the same core fed every
point in one batch (the hierarchy may not depend on how the points arrived); two
groups a hand-made scorer holds apart; the Fellegi-Sunter weights worked by hand.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from er.cluster import MBSCC
from er.cluster._complete import AGAINST_MIN, complete_components
from er.evaluation import cut_at_score
from er.match import FieldTable, FieldWeights, PairModel
from er.match._model import CONTRADICTION_BITS
from tests.unit.cluster.test_mbscc_components import _structure, streams

LEVELS: dict[str, Any] = {"n_levels": 12, "schedule": "linear", "tau_min": 0.05}


def _against_below(X: np.ndarray, under: float) -> Any:
    """A scorer holding the pairs of cosine under ``under`` against a match (their
    cosine), every other pair as no evidence (NaN)."""
    V = X / np.linalg.norm(X, axis=1, keepdims=True)

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        c = np.clip(np.einsum("ij,ij->i", V[left], V[right]), 0.0, 1.0)
        return np.where(c < under, c, np.nan)

    return scores


@st.composite
def graphs(draw: st.DrawFn) -> tuple[sparse.csr_array, np.ndarray, np.ndarray]:
    """A symmetric graph over s points (weights in (0, 1]), a labelling of its points
    into parts, and a score per pair of points (NaN for about half)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    s = draw(st.integers(2, 14))
    W = np.triu(rng.random((s, s)) * (rng.random((s, s)) < draw(st.sampled_from([0.1, 0.4]))), 1)
    G = sparse.csr_array(W + W.T)
    label = rng.integers(0, draw(st.integers(1, 4)), s)
    S = rng.random((s, s)) * draw(st.sampled_from([1.0, 1e-12]))  # some under AGAINST_MIN
    S[rng.random((s, s)) < 0.5] = np.nan
    return G, label, np.triu(S, 1) + np.triu(S, 1).T


@settings(max_examples=200, deadline=None)
@given(data=graphs())
def test_the_pairs_added_are_the_held_ones_the_lists_lack(
    data: tuple[sparse.csr_array, np.ndarray, np.ndarray],
) -> None:
    G, label, S = data
    s = G.shape[0]
    points = np.arange(100, 100 + s)  # global indices differ from rows

    def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return S[left - 100, right - 100]

    out = complete_components(G, points, label, scores, max_points=s, against=True).toarray()
    want = G.toarray()
    for i in range(s):
        for j in range(i + 1, s):
            if label[i] == label[j] and want[i, j] == 0 and not math.isnan(S[i, j]):
                want[i, j] = want[j, i] = max(S[i, j], AGAINST_MIN)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=0)
    assert np.count_nonzero(out) == np.count_nonzero(want)  # every held pair is an edge


@settings(max_examples=120, deadline=None)
@given(
    data=streams(),
    k=st.integers(1, 6),
    within=st.sampled_from([0.05, 0.5, 0.8]),
    under=st.sampled_from([0.2, 0.6]),
)
def test_batches_give_the_hierarchy_of_every_point_at_once(
    data: tuple[np.ndarray, list[int]], k: int, within: float, under: float
) -> None:
    """Stepped batch by batch over the floor components each batch touches, with the
    held pairs of each component of the list edges at ``within`` joined in: the same
    hierarchy as the same core given every point in one batch."""
    X, cuts = data
    same: dict[str, Any] = {
        **LEVELS,
        "k": k,
        "linkage": "mean",
        "marking": "components",
        "complete_max": 1000,
        "complete_within": within,
        "complete_against": True,
    }
    scores = _against_below(X, under)
    stepped, at = MBSCC(**same), 0
    for c in cuts:
        stepped.partial_fit(X[at : at + c], pair_scores=scores)
        at += c
    whole = MBSCC(**same).partial_fit(X, pair_scores=scores)
    assert _structure(stepped.hierarchy_) == _structure(whole.hierarchy_)


def _two_close_groups() -> np.ndarray:
    """Two groups of 12 whose vectors lie close (cosine 0.91 to 0.95 across, at least
    0.997 within): with 13 neighbours each list reaches 2 points of the other group,
    and mean linkage over the lists joins them well above 0.5."""
    rng = np.random.default_rng(7)
    a = np.abs(np.array([1.0, 0.3, 0, 0]) + 0.03 * rng.normal(size=(12, 4)))
    b = np.abs(np.array([1.0, 0.0, 0.3, 0]) + 0.03 * rng.normal(size=(12, 4)))
    return np.r_[a, b].astype(np.float32)


def test_two_groups_the_model_holds_apart_stay_apart_at_the_cut() -> None:
    """Every pair across the groups the lists did not propose held against a match
    (score 0.01; at most 24 of the 144 are proposed): the mean over the proposed
    pairs and those falls under the cut; without them, or with a scorer
    that holds nothing against (NaN), the groups are one entity at the cut."""
    X = _two_close_groups()
    group = np.r_[np.zeros(12, int), np.ones(12, int)]

    def held(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.where(group[left] != group[right], 0.01, np.nan)

    def nothing(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return np.full(left.size, np.nan)

    params: dict[str, Any] = {**LEVELS, "k": 13, "linkage": "mean", "marking": "components"}
    against: dict[str, Any] = {"complete_max": 100, "complete_within": 0.5}
    apart = MBSCC(**params, **against, complete_against=True).partial_fit(X, pair_scores=held)
    blind = MBSCC(**params, **against, complete_against=True).partial_fit(X, pair_scores=nothing)
    lists = MBSCC(**params).fit(X)
    cut = cut_at_score(apart.hierarchy_, 0.5)
    assert set(cut[:12].tolist()).isdisjoint(cut[12:].tolist())
    for m in (blind, lists):
        assert len(set(cut_at_score(m.hierarchy_, 0.5).tolist())) == 1


def test_a_pair_is_held_against_when_its_naming_fields_weigh_six_bits_against_it() -> None:
    """Weights by hand: a given name that differs outright weighs log2(0.01 / 0.95) =
    -6.57 bits (held against alone); a date that differs, log2(0.02 / 0.4) = -4.32, and
    an id, log2(0.05 / 0.9) = -4.17, neither alone but both together (-8.49: twins'
    ids and a junior's date); a name that agrees (+6.49) offsets neither."""
    t = FieldTable(["given", "dob", "nid"])
    t.add(
        [
            ["anna", "19800101", "111"],
            ["zoe", "19800101", "111"],
            ["anna", "19650707", "222"],
            ["anna", "19650707", "111"],
            ["anna", None, "999"],
        ]
    )
    model = PairModel(
        fields=(
            FieldWeights(
                "given", "person_name", m=(1, 0.01, 0.04, 0.05, 0.9), u=(1, 0.95, 0.02, 0.02, 0.01)
            ),
            FieldWeights("dob", "date", m=(1, 0.02, 0.1, 0.1, 0.78), u=(1, 0.4, 0.5, 0.09, 0.01)),
            FieldWeights("nid", "identifier", m=(1, 0.05, 0.05, 0.9), u=(1, 0.9, 0.05, 0.05)),
        ),
        prior=0.01,
    )
    name_far, date_far = math.log2(0.01 / 0.95), math.log2(0.02 / 0.4)
    id_far = math.log2(0.05 / 0.9)
    assert name_far <= -CONTRADICTION_BITS < min(date_far, id_far)
    assert date_far + id_far <= -CONTRADICTION_BITS
    left, right = np.array([0, 0, 0, 0]), np.array([1, 2, 3, 4])
    by_hand = np.array([True, True, False, False])
    got = model.against(t, left, right)
    assert np.isnan(got).tolist() == (~by_hand).tolist()
    np.testing.assert_allclose(got[by_hand], model.probability(t, left, right)[by_hand])
