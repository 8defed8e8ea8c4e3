"""Anchor pairs (er.match._anchors): each field's m counted on pairs that agree on other
personal fields, so that households EM takes for matches do not teach it that matches
disagree on birth dates and given names (issue #53).

Oracles: a brute-force reading of the rule, and the m that generated the levels.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import FieldTable
from er.match._anchors import (
    ANCHOR_FIELDS,
    MAX_FAR_M,
    PERSONAL_KINDS,
    STRICT_KINDS,
    Anchors,
    anchor_pairs,
    anchors_of,
    bounded,
    personal_agreement,
)
from er.match._train import _fit_em

KINDS = ["person_name", "person_name", "date", "identifier", "address", "place", "postcode"]


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(["person_name", "date", "identifier", "address", "email", "text"]),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**16),
)
def test_anchors_are_the_rules_pairs(kinds: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_levels = rng.integers(3, 6, len(kinds))
    levels = np.stack([rng.integers(0, k, 50) for k in n_levels], axis=1).astype(np.int8)
    got = anchor_pairs(levels, kinds, n_levels.tolist())
    for f in range(len(kinds)):
        others = [g for g, k in enumerate(kinds) if k in PERSONAL_KINDS and g != f]
        if not others:
            assert got[f] is None
            continue
        need = len(others) if kinds[f] in STRICT_KINDS else min(ANCHOR_FIELDS, len(others))
        want = [sum(levels[p, g] == n_levels[g] - 1 for g in others) >= need for p in range(50)]
        assert got[f].tolist() == want
    personal = [g for g, k in enumerate(kinds) if k in PERSONAL_KINDS]
    shared = personal_agreement(levels, kinds, n_levels.tolist())
    if not personal:
        assert shared is None
    else:  # two personal fields agreeing (one when there is one): not one of two
        need = min(ANCHOR_FIELDS, len(personal))
        want = [sum(levels[p, g] == n_levels[g] - 1 for g in personal) >= need for p in range(50)]
        assert shared.tolist() == want


def _households(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Candidate levels (missing 0, far 1, exact 2) of 4,000 matching pairs (a birth
    date, an id or a given name far 2% of the time, a place 10%: moves) and 3,000
    household pairs (one surname and place, every personal field but the surname far),
    and the u of each field."""
    m_far = np.array([0.02, 0.02, 0.02, 0.02, 0.1, 0.1, 0.1])
    matches = 1 + (rng.random((4_000, 7)) >= m_far)
    homes = np.tile(np.array([1, 2, 1, 1, 2, 2, 2]), (3_000, 1))
    levels = np.r_[matches, homes].astype(np.int8)
    is_match = np.r_[np.ones(4_000, bool), np.zeros(3_000, bool)]
    u = [np.array([1.0, 0.999, 0.001])] * 7
    return levels, is_match, u


def test_anchored_m_of_a_birth_date_is_the_matches_own() -> None:
    """Without anchors EM takes the households for matches: a third of its "matches"
    disagree on the birth date. Counted on pairs that agree on two other personal
    fields (given name and id, which households do not share), m(far) is the matches'
    2%."""
    levels, _, u = _households(np.random.default_rng(0))
    start = [np.array([1.0, 0.1, 0.9])] * 7
    total = 50_000_000
    plain, _, _ = _fit_em(levels, start, u, total)
    anchors = anchors_of(levels, KINDS, [3] * 7)
    anchored, _, _ = _fit_em(levels, start, u, total, anchors=anchors)
    dob = KINDS.index("date")
    assert plain[dob][1] > 0.3
    assert anchored[dob][1] == pytest.approx(0.02, abs=0.01)
    assert anchored[0][1] == pytest.approx(0.02, abs=0.01)  # the given name alike
    # the surname and the place, which households share, are counted on anchors too
    assert anchored[1][1] == pytest.approx(0.02, abs=0.01)
    assert anchored[4][1] == pytest.approx(0.1, abs=0.02)


def test_twins_do_not_teach_that_an_id_differs() -> None:
    """Twins share a surname, a birth date and a home, and differ in given name and
    id: two other personal fields agree, so on the plain rule they would anchor the
    id's m. An id's anchors agree on every other personal field (STRICT_KINDS), and
    its m(far) is the matches' 2% with 3,000 twin pairs beside 4,000 matches."""
    rng = np.random.default_rng(1)
    m_far = np.array([0.02, 0.02, 0.02, 0.02, 0.1, 0.1, 0.1])
    matches = 1 + (rng.random((4_000, 7)) >= m_far)
    twins = np.tile(np.array([1, 2, 2, 1, 2, 2, 2]), (3_000, 1))
    levels = np.r_[matches, twins].astype(np.int8)
    u = [np.array([1.0, 0.999, 0.001])] * 7
    start = [np.array([1.0, 0.1, 0.9])] * 7
    plain, _, _ = _fit_em(levels, start, u, 50_000_000)
    anchors = anchors_of(levels, KINDS, [3] * 7)
    fitted, _, _ = _fit_em(levels, start, u, 50_000_000, anchors=anchors)
    ident = KINDS.index("identifier")
    assert plain[ident][1] > 0.3
    assert fitted[ident][1] == pytest.approx(0.02, abs=0.01)
    two_others = (levels[:, [0, 1, 2]] == 2).sum(axis=1) >= ANCHOR_FIELDS
    assert two_others[4_000:].all() and not anchors.fields[ident][4_000:].any()


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(sorted(PERSONAL_KINDS | {"address", "text"})), min_size=1, max_size=6
    ),
    seed=st.integers(0, 2**16),
)
def test_a_strict_field_s_far_m_is_bounded_and_its_agreeing_levels_keep_their_ratios(
    kinds: list[str], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    m = []
    for _ in kinds:
        share = rng.dirichlet(np.full(int(rng.integers(2, 6)), 0.5))
        m.append(np.r_[1.0, share])
    before = [mf.copy() for mf in m]
    levels = np.ones((1, len(kinds)), np.int8)
    out = bounded(m, anchors_of(levels, kinds, [mf.size for mf in m]))
    for f, (mf, was) in enumerate(zip(out, before, strict=True)):
        assert mf[0] == 1.0 and mf[1:].sum() == pytest.approx(1.0)
        if kinds[f] not in STRICT_KINDS or was[1] <= MAX_FAR_M:
            assert np.array_equal(mf, was)
            continue
        assert mf[1] == pytest.approx(MAX_FAR_M)
        if was[2:].sum() > 1e-12:  # the agreeing levels in their old proportions
            assert mf[2:] / mf[2:].sum() == pytest.approx(was[2:] / was[2:].sum())
    assert bounded(before, None) is before


def test_households_alone_do_not_teach_that_an_id_or_a_date_differs() -> None:
    """A sample without one match: 3,000 household pairs (a surname and a place shared,
    every other personal field far). Their anchors hold no matches, so each field is
    counted over every candidate and EM's "matches" are the households: an id and a
    birth date far in all of them. Bounded, a differing id or date still weighs
    log2(MAX_FAR_M / u) against a match."""
    homes = np.tile(np.array([1, 2, 1, 1, 2, 2, 2]), (3_000, 1)).astype(np.int8)
    u = [np.array([1.0, 0.999, 0.001])] * 7
    start = [np.array([1.0, 0.1, 0.9])] * 7
    anchors = anchors_of(homes, KINDS, [3] * 7)
    free = Anchors(anchors.fields, anchors.shared)  # no field bounded
    plain, _, _ = _fit_em(homes, start, u, 50_000_000, anchors=free)
    fitted, _, _ = _fit_em(homes, start, u, 50_000_000, anchors=anchors)
    for kind in ("date", "identifier"):
        f = KINDS.index(kind)
        assert plain[f][1] > 0.9
        assert fitted[f][1] == pytest.approx(MAX_FAR_M)
    given = KINDS.index("person_name")
    assert fitted[given][1] == pytest.approx(plain[given][1])  # names are not bounded


def _forms(seed: int, own: int = 1) -> tuple[FieldTable, tuple[np.ndarray, np.ndarray]]:
    """300 people, three forms each: names, birth date and SSN the person's, ``own``
    numbers of the form's own; candidates: each person's pairs and each form's next
    neighbour."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnoprstuvwyz"))
    rows, who = [], []
    for p in range(300):
        given_, surname = ("".join(rng.choice(letters, 8)) for _ in range(2))
        dob = f"19{rng.integers(40, 99)}{rng.integers(1, 13):02d}{rng.integers(1, 29):02d}"
        ssn = f"{rng.integers(10**8, 10**9)}"
        for _ in range(3):
            rows.append(
                [given_, surname, dob, ssn, *(f"F{rng.integers(10**9)}" for _ in range(own))]
            )
            who.append(p)
    table = FieldTable(["given", "surname", "dob", "ssn", *(f"form_{k}" for k in range(own))])
    table.add(rows)
    n = len(rows)
    pairs = {(i, j) for i in range(n) for j in range(i + 1, min(i + 3, n)) if who[i] == who[j]}
    pairs |= {(i, i + 3) for i in range(n - 3)}
    left, right = np.array(sorted(pairs)).T
    return table, (left, right)


def test_an_id_each_record_has_its_own_is_context_not_the_entity_s(monkeypatch) -> None:
    """A form's number differs between every two forms of one person: among the pairs
    agreeing on both names and the birth date it never agrees, where the SSN does, so
    it is weighed one-sided (0 when it differs) and one person's two forms match.
    Weighed as the person's id, it differs on every match and a match's evidence loses
    it (the far level, bounded at 0.1: at least 3.3 bits against)."""
    from er.match import train_pair_model
    from er.match._anchors import record_ids

    table, cand = _forms(3)
    kinds = ["person_name", "person_name", "date", "identifier", "identifier"]
    model = train_pair_model(table, kinds, cand)
    levels = model.levels(table, *cand)
    assert record_ids(levels, kinds, [len(f.m) for f in model.fields])[0] == [4]
    assert [f.one_sided for f in model.fields] == [False, False, False, False, True]
    pair = (np.array([0]), np.array([1]))  # one person's two forms
    w, _ = model.weights(table, *pair)
    assert w[0, 4] == 0.0 and w[0, 3] > 0.0
    monkeypatch.setattr("er.match._train.record_ids", lambda _, kinds, __: ([], kinds))
    as_id = train_pair_model(table, kinds, cand)
    assert as_id.weights(table, *pair)[0][0, 4] < np.log2(0.1) + 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numbers_of_the_record_s_own_free_the_anchors_of_the_real_id(seed: int) -> None:
    """Two numbers of each form's own: each blocks the other's anchors and the SSN's
    (no match agrees on it), yet both are found, and every field's anchors are the
    ones the table without them gives (the oracle: the columns dropped)."""
    from er.match import train_pair_model
    from er.match._anchors import record_ids

    table, cand = _forms(seed, own=2)
    kinds = ["person_name", "person_name", "date", "identifier", "identifier", "identifier"]
    model = train_pair_model(table, kinds, cand)
    n_levels = [len(f.m) for f in model.fields]
    levels = model.levels(table, *cand)
    ids, anchor_kinds = record_ids(levels, kinds, n_levels)
    assert ids == [4, 5]
    assert [f.one_sided for f in model.fields] == [False] * 4 + [True] * 2
    with_ids = anchors_of(levels, anchor_kinds, n_levels)
    without = anchors_of(levels[:, :4], kinds[:4], n_levels[:4])
    for f in range(4):
        assert np.array_equal(with_ids.fields[f], without.fields[f])
    assert with_ids.fields[3].sum() > 0  # the SSN's anchors: none while the forms blocked
    assert anchors_of(levels, kinds, n_levels).fields[3].sum() == 0
    assert with_ids.strict == (2, 3)  # the date's and the SSN's far level bounded, not theirs


def test_an_id_no_candidate_agrees_on_still_weighs_against_a_match() -> None:
    """A file without duplicates: the SSN agrees on no candidate. It anchors nothing,
    has too few anchors to be called a record's own, and stays bounded (2026-12-03)."""
    from er.match._anchors import SILENT_ID, record_ids

    homes = np.tile(np.array([1, 2, 1, 1, 2, 2, 2]), (3_000, 1)).astype(np.int8)
    # twins: both names and the rest agree, the birth date and the SSN do not; the
    # SSN's anchors ask for every other personal field, the date among them: none
    twins = np.tile(np.array([2, 2, 1, 1, 2, 2, 2]), (3_000, 1)).astype(np.int8)
    f = KINDS.index("identifier")
    for pairs in (homes, twins):
        ids, anchor_kinds = record_ids(pairs, KINDS, [3] * 7)
        assert ids == [] and anchor_kinds[f] == SILENT_ID
        assert f in anchors_of(pairs, anchor_kinds, [3] * 7).strict
