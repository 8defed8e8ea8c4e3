"""Comparison levels against a pair-by-pair oracle built on jellyfish, not rapidfuzz."""

from __future__ import annotations

import jellyfish
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import LADDERS, compare_field

names = st.text(alphabet="abcdeilmnorst ", min_size=1, max_size=9).map(str.strip).filter(bool)
digits = st.text(alphabet="0123456789", min_size=6, max_size=9)


def _oracle(kind: str, x: str | None, y: str | None) -> int:
    top = LADDERS[kind].n_levels - 1
    if x is None or y is None:
        return 0
    if x == y:
        return top
    if kind == "phone" or kind == "identifier":
        return 2 if jellyfish.damerau_levenshtein_distance(x, y) <= 1 else 1
    if kind == "place":
        return 2 if jellyfish.jaro_winkler_similarity(x, y) >= 0.88 else 1
    raise AssertionError(kind)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["phone", "identifier", "place"]),
    vocab=st.lists(st.one_of(names, digits), min_size=1, max_size=12, unique=True),
    data=st.data(),
)
def test_levels_equal_pair_by_pair_oracle(kind: str, vocab: list[str], data: st.DataObject) -> None:
    codes = st.integers(-1, len(vocab) - 1)
    a = np.array(data.draw(st.lists(codes, min_size=1, max_size=40)), np.int64)
    b = np.array(data.draw(st.lists(codes, min_size=a.size, max_size=a.size)), np.int64)
    got = compare_field(kind, vocab, a, b)
    want = [
        _oracle(kind, vocab[x] if x >= 0 else None, vocab[y] if y >= 0 else None)
        for x, y in zip(a, b, strict=True)
    ]
    assert got.tolist() == want


def test_person_names_nicknames_sounds_and_typos() -> None:
    vocab = ["william", "bill", "katherine", "catherine", "jon", "john", "anne", "zelda"]
    a = np.array([0, 2, 4, 6, 0, -1])
    b = np.array([1, 3, 5, 7, 0, 0])
    levels = compare_field("person_name", vocab, a, b).tolist()
    names = LADDERS["person_name"].names
    assert [names[v] for v in levels] == [
        "close (JW >= 0.92 or nickname)",  # bill is a nickname of william
        "close (JW >= 0.92 or nickname)",  # katherine / catherine: JW 0.93
        "close (JW >= 0.92 or nickname)",  # jon / john
        "far",
        "exact",
        "missing",
    ]


def test_dates_swapped_day_month_and_ambiguous_readings() -> None:
    vocab = ["20001023", "20002310", "20001024", "20001113", "20010403|20010304", "20010304"]
    a = np.array([0, 0, 0, 4, 1])
    b = np.array([1, 2, 3, 5, 5])
    names = LADDERS["date"].names
    got = [names[v] for v in compare_field("date", vocab, a, b)]
    assert got[0] == "one digit off or day/month swapped"
    assert got[1] == "one digit off or day/month swapped"
    assert got[2] == "two digits off"
    assert got[3] == "exact"  # one reading of the ambiguous date is the other date
    assert got[4] == "far"
