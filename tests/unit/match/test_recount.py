"""A free-text model's u counted again on its grown collection: what EM fitted is
kept, and u is each level's share over random pairs of every record."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import FieldTable, compare_field, random_pairs, recounted_u, train_pair_model
from er.match._train import RANDOM_PAIRS
from tests._affiliations import affiliations


def _table(texts: list[str]) -> FieldTable:
    table = FieldTable(["aff"])
    table.add([[t] for t in texts])
    return table


@settings(max_examples=20, deadline=None)
@given(first=st.integers(12, 40), seed=st.integers(0, 10_000))
def test_u_is_each_levels_share_over_random_pairs_of_every_record(first: int, seed: int) -> None:
    texts, _ = affiliations(8, seed)
    texts = [texts[i] for i in np.random.default_rng(seed).permutation(len(texts))]
    i, j = (a.astype(np.int64) for a in np.triu_indices(first, 1))
    held = train_pair_model(_table(texts[:first]), ["text"], (i, j))
    grown = _table(texts)
    new = recounted_u(held, grown, seed=0, version=held.version + 1)

    assert new.version == held.version + 1
    kept = ("prior", "n_train", "method", "dependence")
    assert [getattr(new, k) for k in kept] == [getattr(held, k) for k in kept]
    rl, rr = random_pairs(len(texts), RANDOM_PAIRS, 0)
    vocab = sorted(set(texts))
    codes = np.array([vocab.index(t) for t in texts])
    for old, f in zip(held.fields, new.fields, strict=True):
        assert (f.m, f.df, f.df_floor, f.kind) == (old.m, old.df, old.df_floor, old.kind)
        level = compare_field(f.kind, vocab, codes[rl], codes[rr], f.df, f.df_floor, f.undated)
        counts = np.bincount(level, minlength=len(f.m))[1:] + 0.5  # smoothed
        assert f.u[1:] == pytest.approx(tuple(counts / counts.sum()))


def test_a_first_batch_of_duplicates_weighs_its_upper_levels_less_once_recounted() -> None:
    """A first batch of two institutes' records: about half its random pairs are
    matches and its top level's u is high; over the whole collection (ten institutes)
    one in eleven is, u falls and the top level weighs more."""
    texts, gold = affiliations(12, 5)
    first = [t for t, g in zip(texts, gold, strict=True) if g in (3, 7)]
    rest = [t for t, g in zip(texts, gold, strict=True) if g not in (3, 7)]
    i, j = (a.astype(np.int64) for a in np.triu_indices(len(first), 1))
    held = train_pair_model(_table(first), ["text"], (i, j))
    new = recounted_u(held, _table(first + rest), seed=0, version=2)
    grams_old, grams_new = held.fields[0], new.fields[0]
    assert grams_new.u[-1] < grams_old.u[-1]
    assert grams_new.level_weights()[-1] > grams_old.level_weights()[-1]
