"""The dependence correction against populations generated with known households,
matches that move, and independent non-matches: the oracle is the generator's own
rates, not the code's estimates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import FieldTable, train_pair_model
from er.match._dependence import (
    count_patterns,
    dependence_bits,
    field_blocks,
    fit_dependence,
    pattern_keys,
)

KINDS = ["person_name", "person_name", "date", "address", "postcode"]
# levels: 1 far, 2 agree (index 0, missing, unused in m and u)
M = [np.array([1, 0.1, 0.9]), np.array([1, 0.1, 0.9]), np.array([1, 0.05, 0.95])]
U = [np.array([1, 0.99, 0.01]), np.array([1, 0.995, 0.005]), np.array([1, 0.999, 0.001])]
PLACE_M, PLACE_U = np.array([1, 0.2, 0.8]), np.array([1, 0.998, 0.002])
HOUSEHOLD = [1, 2, 1, 2, 2]  # given name and birth date differ, the rest agree


def _population(
    n: int, prior: float, households: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Levels of n random pairs and whether each is a match. Matches: fields
    independent, but a move changes address and postcode together (20%). Non-matches:
    independent, except a share ``households`` with the household pattern."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(3, n, p=[prior, households, 1 - prior - households])
    levels = np.empty((n, 5), np.int8)
    for f in range(3):
        levels[:, f] = np.where(
            kind == 0, 1 + (rng.random(n) < M[f][2]), 1 + (rng.random(n) < U[f][2])
        )
    moved = rng.random(n) < PLACE_M[1]
    other = 1 + (rng.random((n, 2)) < PLACE_U[2])
    levels[:, 3:] = np.where((kind == 0)[:, None], np.where(moved, 1, 2)[:, None], other)
    levels[kind == 1] = HOUSEHOLD
    return levels, kind == 0


def _key(pattern: list[int]) -> int:
    return int(pattern_keys(np.array([pattern], np.int8))[0])


def test_households_are_corrected_to_their_generated_rate() -> None:
    n, prior, households = 500_000, 1e-3, 2e-3
    random_levels, _ = _population(n, prior, households, seed=1)
    cand, is_match = _population(200_000, 0.05, 0.02, seed=2)  # an index's candidates
    keep = is_match | (cand == HOUSEHOLD).all(axis=1)
    cand, post = cand[keep], is_match[keep].astype(float)
    m = [*M, PLACE_M, PLACE_M]
    u = [*U, PLACE_U, PLACE_U]
    bits = fit_dependence(
        count_patterns(random_levels), cand, post, m, u, prior, field_blocks(KINDS)
    )

    u_ind = np.prod([u[f][s] for f, s in enumerate(HOUSEHOLD)])
    want = np.log2(u_ind / households)  # the generator's own household rate
    assert bits[_key(HOUSEHOLD)] == pytest.approx(want, abs=0.2)
    assert want < -15  # independence underrates households 30,000-fold
    # a match agreeing everywhere, and a match that moved, are matches' patterns
    assert _key([2, 2, 2, 2, 2]) not in bits
    assert _key([2, 2, 2, 1, 1]) not in bits
    assert all(b < 0 for b in bits.values())


def test_bits_are_added_by_pattern_and_zero_elsewhere() -> None:
    corrections = {_key(HOUSEHOLD): -30.0, _key([1, 1, 1, 1, 1]): -0.5}
    # the last: the household's pattern with the given name missing (not agreeing)
    levels = np.array([HOUSEHOLD, [2, 2, 2, 2, 2], [1, 1, 1, 1, 1], [0, 2, 1, 2, 2]], np.int8)
    assert dependence_bits(corrections, levels).tolist() == [-30.0, 0.0, -0.5, -30.0]
    assert dependence_bits({}, levels).tolist() == [0.0] * 4


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 3000),
    prior=st.floats(0.0, 0.2),
    households=st.floats(0.0, 0.2),
)
def test_corrections_only_lower_weights_and_need_evidence(
    seed: int, n: int, prior: float, households: float
) -> None:
    levels, is_match = _population(n, prior, households, seed)
    m = [*M, PLACE_M, PLACE_M]
    u = [*U, PLACE_U, PLACE_U]
    patterns = count_patterns(levels)
    bits = fit_dependence(
        patterns, levels, is_match.astype(float), m, u, prior, field_blocks(KINDS)
    )
    keys, counts = np.unique(pattern_keys(levels), return_counts=True)
    seen = dict(zip(keys.tolist(), counts.tolist(), strict=True))
    for key, b in bits.items():
        assert b < 0  # a correction never makes a pair likelier
        assert seen[key] > 3  # and rests on pairs the sample holds


def test_field_blocks_group_a_place_and_a_name() -> None:
    assert field_blocks(KINDS) == [[3, 4], [0, 1]]
    assert field_blocks(["person_name", "date", "category"]) == []  # no place: no block
    assert field_blocks(["address", "place", "category", "email"]) == [[0, 1, 2]]


def _households_table(seed: int, members: int = 2) -> tuple[FieldTable, list[str], list[str]]:
    """300 people in households of ``members`` (shared surname, address, suburb and
    phone; own given name, birth date and id), each person in two records with a typo
    in one field; gold entity per record."""
    rng = np.random.default_rng(seed)
    fields = ["given", "surname", "dob", "id", "phone", "address", "suburb"]
    kinds = ["person_name", "person_name", "date", "identifier", "phone", "address", "place"]
    table, gold, rows = FieldTable(fields), [], []
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))

    def word(k: int) -> str:
        return "".join(rng.choice(letters, k))

    def digits(k: int) -> str:
        return "".join(str(d) for d in rng.integers(0, 10, k))

    for h in range(300 // members):
        shared = [word(7), digits(10), f"{rng.integers(1, 300)} {word(6)} st", word(8)]
        for p in range(members):
            y, mo, d = rng.integers(40, 99), rng.integers(1, 13), rng.integers(1, 29)
            own = [word(6), f"19{y}{mo:02d}{d:02d}", digits(9)]
            for r in range(2):
                row = [own[0], shared[0], own[1], own[2], shared[1], shared[2], shared[3]]
                if r:  # a one-character typo in one field
                    f = int(rng.integers(0, len(row)))
                    row[f] = row[f][:-1] + ("z" if row[f][-1].isalpha() else "0")
                rows.append(row)
                gold.append(f"{h}-{p}")
    table.add(rows)
    return table, gold, kinds


def test_trained_model_separates_a_household_from_a_person() -> None:
    table, gold, kinds = _households_table(3)
    n = len(gold)
    # candidates: everyone in the same household (the index would propose them)
    house = np.array([g.split("-")[0] for g in gold])
    left, right = np.triu_indices(n, 1)
    near = house[left] == house[right]
    model = train_pair_model(table, kinds, (left[near], right[near]))
    assert model.method == "em" and model.dependence
    p = model.probability(table, left[near], right[near])
    same = np.array(gold)[left[near]] == np.array(gold)[right[near]]
    assert (p[same] > 0.5).mean() > 0.95  # a person's records stay together
    assert (p[~same] < 0.5).mean() > 0.95  # a household's two people do not


def test_the_explanation_adds_up_and_survives_json() -> None:
    import json

    from er.match import PairModel

    table, gold, kinds = _households_table(5)
    house = np.array([g.split("-")[0] for g in gold])
    left, right = np.triu_indices(len(gold), 1)
    near = house[left] == house[right]
    model = train_pair_model(table, kinds, (left[near], right[near]))
    again = PairModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again == model
    a, b = 0, 2  # two people of the first household
    assert gold[a] != gold[b] and house[a] == house[b]
    reasons = model.explain(table, a, b)
    fields = sum(r["weight"] for r in reasons["fields"])
    prior = np.log2(model.prior / (1 - model.prior))
    dependence = reasons["dependence_weight"]
    assert dependence < -10
    total = model.match_weight(table, np.array([a]), np.array([b]))[0]
    assert total == pytest.approx(prior + fields + dependence)
    assert reasons["match_weight"] == pytest.approx(total)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(30, 260), sample=st.integers(1, 4000))
def test_stratified_counts_are_exact_where_the_candidates_hold_every_pair(
    seed: int, n: int, sample: int
) -> None:
    """Every pair agreeing on two or more fields is a candidate (as a household's pairs
    are); the random pairs that are not candidates stand for the rest. The oracle
    counts all n(n-1)/2 pairs."""
    from er.match._train import _pattern_counts, random_pairs

    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(n, 1)
    levels = (1 + (rng.random((i.size, 5)) < 0.15)).astype(np.int8)
    levels[rng.random(i.size) < 0.02] = HOUSEHOLD
    cand = (levels >= 2).sum(axis=1) >= 2
    cand |= rng.random(i.size) < 0.01  # and some near pairs that agree on less
    at = dict(zip((i * n + j).tolist(), range(i.size), strict=True))
    rl, rr = random_pairs(n, sample, seed)
    rand_levels = levels[[at[k] for k in (rl * n + rr).tolist()]]
    got = _pattern_counts(rand_levels, (rl, rr), levels[cand], (i[cand], j[cand]), n)

    keys, counts = np.unique(pattern_keys(levels), return_counts=True)
    exact = dict(zip(keys.tolist(), counts.tolist(), strict=True))
    est = dict(zip(got.keys.tolist(), got.counts.tolist(), strict=True))
    assert got.n_pairs == i.size
    drawn = np.zeros(i.size, bool)
    drawn[[at[k] for k in (rl * n + rr).tolist()]] = True
    if (drawn & ~cand).any():  # some random pair stands for the non-candidates
        assert sum(est.values()) == pytest.approx(i.size)
    for key, agreeing in zip(got.keys.tolist(), got.symbols.sum(axis=1).tolist(), strict=True):
        assert key in exact  # no pattern is made up
        if agreeing >= 2:  # only candidates have it: counted, not sampled
            assert est[key] == pytest.approx(exact[key])
    if sample >= i.size:  # every pair drawn: the plain count
        assert est == pytest.approx(exact)


def test_a_model_of_more_fields_than_a_key_holds_trains_without_the_correction() -> None:
    """63 fields and more do not fit a pattern's int64 key: the model trains, scores,
    and carries no correction (keys that wrapped around would collide)."""
    from er.match import FieldTable, train_pair_model
    from er.match._dependence import MAX_FIELDS

    rng = np.random.default_rng(0)
    n_fields, n = MAX_FIELDS + 8, 200
    base = rng.integers(0, 40, size=(n // 2, n_fields))
    rows = np.concatenate([base, base])  # every record twice
    table = FieldTable([f"f{k}" for k in range(n_fields)])
    table.add([[f"v{x}" for x in row] for row in rows.tolist()])
    left = np.arange(n // 2, dtype=np.int64)
    cand = (left, left + n // 2)
    from er.match._dependence import agreement, count_patterns

    levels = rng.integers(0, 3, size=(500, n_fields)).astype(np.int8)
    shown = {tuple(r) for r in agreement(levels).tolist()}
    counted = count_patterns(levels)  # every pattern counted is one some pair shows
    assert all(tuple(r) in shown for r in counted.symbols.tolist())
    model = train_pair_model(table, ["category"] * n_fields, cand)
    assert model.dependence == {}
    p = model.probability(table, *cand)
    assert np.isfinite(p).all() and (p > 0.5).all()


def test_a_households_shared_place_is_corrected_as_one_block() -> None:
    """Households whose names and dates agree or not at random (8 whole patterns, some
    of them matches' own): the whole-pattern correction cannot tell most of them, the
    shared block (address and postcode) can. Its bits are the generator's rate of
    non-matches agreeing on the block against independence, on every pattern whose
    block agrees."""
    n, prior, households = 500_000, 1e-3, 1e-3
    rng = np.random.default_rng(3)
    levels, is_match = _population(n, prior, 0.0, seed=4)
    homes = rng.random(n) < households / (1 - prior)
    homes &= ~is_match
    levels[homes, :3] = 1 + (rng.random((int(homes.sum()), 3)) < 0.5)
    levels[homes, 3:] = 2
    m = [*M, PLACE_M, PLACE_M]
    u = [*U, PLACE_U, PLACE_U]
    shared = [3, 4]
    bits = fit_dependence(
        count_patterns(levels),
        levels,
        is_match.astype(float),
        m,
        u,
        prior,
        field_blocks(KINDS),
        shared,
    )
    rate = (
        homes.mean() + (1 - prior - homes.mean()) * PLACE_U[2] ** 2
    )  # non-matches, block agreeing
    want = np.log2(PLACE_U[2] ** 2 / (rate / (1 - prior)))
    assert want < -5
    for names in ([2, 2, 2], [2, 2, 1], [1, 2, 1], [1, 1, 1]):
        got = bits.get(_key([*names, 2, 2]), 0.0)
        assert got <= want + 0.3  # the block's bits, and the whole pattern's on top
    assert bits.get(_key([2, 2, 2, 2, 2]), 0.0) == pytest.approx(want, abs=0.3)
    assert _key([2, 2, 2, 1, 1]) not in bits  # a match that moved
