"""A household's shared fields counted once (er.match._dependence.shared_once).

Oracle: a generator's own rates. Two people of one household agree on its address,
phone and e-mail together; so the likelihood ratio of that agreement is
P(all agree | match) / P(all agree | non-match), the latter about the household rate,
not the product of the fields' u. Both that rate and the random-pair prior fall as
1/n when a collection grows with the same duplicates and households per record, so a
household pair's true posterior does not depend on n (issue #53, "evidence that does
not fade with size").
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import train_pair_model
from er.match._dependence import (
    households_seen,
    pattern_keys,
    shared_block,
    shared_once,
)
from tests.unit.match.test_dependence import _households_table

KINDS = ["person_name", "person_name", "date", "address", "phone", "email"]
SHARED = shared_block(KINDS)  # address, phone, e-mail


def _rates(n: int, m: float, household: float, chance: tuple[float, ...]) -> dict[str, float]:
    """The generator's rates in a collection of n records: each shared field's u (its
    household agreement, plus agreement by chance, ``chance`` times as often), the
    household and match rates of a random pair (``household`` other members and one
    duplicate per record)."""
    h = household / n
    rates = {f"u{f}": h * (1 + c) for f, c in enumerate(chance)}
    return rates | {"h": h, "prior": 1.0 / n, "m": m}


def _household_weights(r: dict[str, float], k: int) -> np.ndarray:
    """(1, 6) the per-field weights of a pair of two people of one household: given name
    and birth date differ (-4 bits each), surname agrees (+3), the k shared fields
    agree (log2(m / u)) and the others differ (log2((1 - m) / (1 - u)))."""
    shared = [
        np.log2(r["m"] / r[f"u{f}"]) if f < k else np.log2((1 - r["m"]) / (1 - r[f"u{f}"]))
        for f in range(3)
    ]
    return np.array([[-4.0, 3.0, -4.0, *shared]])


def _posterior(bits: float) -> float:
    return float(1.0 / (1.0 + 2.0 ** (-bits)))


@settings(max_examples=300, deadline=None)
@given(
    m=st.floats(0.8, 0.99),
    household=st.floats(0.5, 4.0),
    chance=st.tuples(*[st.floats(0.0, 0.25)] * 3),
    n=st.integers(2_000, 200_000),
    grow=st.sampled_from([10, 100]),
)
def test_a_households_agreement_weighs_its_generated_rate_at_every_size(
    m: float, household: float, chance: tuple[float, ...], n: int, grow: int
) -> None:
    """Every shared field agreeing: within a bit of the generator's likelihood ratio
    where households explain most of each field's agreement (chance a quarter of it at
    most), and the same posterior at n and at ``grow`` times n; the plain sum gains
    2 log2(grow) bits over the prior and moves the posterior."""
    posteriors, sums = [], []
    for size in (n, grow * n):
        r = _rates(size, m, household, chance)
        w = _household_weights(r, 3)
        non_match = r["h"] + (1 - r["h"]) * r["u0"] * r["u1"] * r["u2"]
        truth = np.log2(m**3 / non_match)
        once = shared_once(w, SHARED, np.zeros(1))[0] - w[0, :3].sum()
        assert once == pytest.approx(truth, abs=1.0)
        prior = np.log2(r["prior"] / (1 - r["prior"]))
        posteriors.append(_posterior(prior + w[0, :3].sum() + once))
        sums.append(prior + w.sum())
    assert posteriors[1] == pytest.approx(posteriors[0], rel=0.05, abs=1e-4)
    assert sums[1] - sums[0] == pytest.approx(2 * np.log2(grow), abs=0.2)


def test_a_disagreeing_shared_field_counts_and_the_learned_correction_can_lower() -> None:
    """The block weighs its strongest agreeing field plus its disagreeing ones; a
    learned correction that takes the sum lower still is kept; without a shared block
    the sum is the plain one."""
    w = np.array(
        [
            [1.0, 1.0, 1.0, 14.0, 12.0, 13.0],  # all three agree: the strongest, 14
            [1.0, 1.0, 1.0, 14.0, -4.0, 13.0],  # the phone differs: 14 - 4
            [1.0, 1.0, 1.0, -2.0, -4.0, -3.0],  # none agrees (a move): every one counts
            [1.0, 1.0, 1.0, 14.0, 12.0, 13.0],  # a learned correction of -35
        ]
    )
    correction = np.array([0.0, 0.0, 0.0, -35.0])
    got = shared_once(w, SHARED, correction)
    assert got.tolist() == pytest.approx([17.0, 13.0, -6.0, 7.0])
    assert shared_once(w, [], correction).tolist() == pytest.approx(
        (w.sum(axis=1) + correction).tolist()
    )


def _seen(corrections: dict[int, float], kinds: list[str]) -> bool:
    return households_seen(corrections, kinds)


def _key(pattern: list[int]) -> int:
    return int(pattern_keys(np.array([pattern], np.int8))[0])


def test_households_are_seen_on_two_shared_fields_agreeing_one_a_home() -> None:
    """A corrected pattern of two shared fields agreeing, one of them an address, phone
    or e-mail: households. A suburb and a state agreeing (FEBRL4's one correction) are
    neighbours; one shared field agreeing, or none corrected, is no household."""
    both = _key([1, 2, 1, 2, 2, 1])  # address and phone agree
    one = _key([2, 2, 2, 2, 1, 1])  # the address alone
    assert _seen({both: -20.0}, KINDS)
    assert not _seen({}, KINDS)
    assert not _seen({one: -20.0}, KINDS)
    assert not _seen({both: 0.0}, KINDS)
    febrl = ["person_name", "person_name", "address", "place", "postcode", "category"]
    assert not _seen({_key([2, 2, 1, 2, 1, 2]): -2.84}, febrl)  # suburb and state
    assert _seen({_key([1, 2, 2, 2, 1, 2]): -2.84}, febrl)  # the address with them


def test_a_pattern_agreeing_on_a_date_or_an_id_is_no_household() -> None:
    """Two people of one household share the home, not a birth date or an id: a lowered
    pattern that agrees on those too is one person's records (FEBRL3 thinned, both
    names mistyped), and shows no households."""
    with_id = ["person_name", "date", "address", "postcode", "identifier"]
    assert _seen({_key([1, 1, 2, 2, 1]): -10.0}, with_id)  # address and postcode agree
    assert not _seen({_key([1, 2, 2, 2, 1]): -10.0}, with_id)  # the date agrees too
    assert not _seen({_key([1, 1, 2, 2, 2]): -10.0}, with_id)  # the id agrees too


@pytest.mark.parametrize(("members", "once"), [(2, True), (1, False)])
def test_a_trained_model_counts_the_block_once_only_where_households_share_it(
    members: int, once: bool
) -> None:
    """Households of two: the model learns their pattern and counts the shared fields
    once. Everyone their own household (FEBRL's records): no such pattern, and two
    agreeing fields stay twice the evidence (the plain sum; FEBRL1-4 fell 0.9999 ->
    0.992-0.997 with the block counted once everywhere, bench/HISTORY.md)."""
    table, gold, kinds = _households_table(5, members)
    left, right = np.triu_indices(len(gold), 1)
    house = np.array([g.split("-")[0] for g in gold])
    near = house[left] == house[right]
    near |= np.random.default_rng(0).random(left.size) < 0.002  # and some strangers
    model = train_pair_model(table, kinds, (left[near], right[near]))
    assert bool(model.counted_once()) is once
