"""Dates read out of free text: every layout a person's record is written in, checked
against the calendar (``datetime.date`` and ``strftime``, not the reader under test),
and the ``text_dates`` view's levels against the date field's ladder."""

from __future__ import annotations

import datetime as dt

import jellyfish
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.featurize import normalise
from er.match import compare_field
from er.match._dates import date_edits, dates_in

# layouts of one day as people and programs write it (strftime, independent of the reader)
_LAYOUTS = (
    "%d.%m.%y",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%Y-%m-%d",
    "%Y%m%d",
    "%d %b %Y",
    "%b %d, %Y",
    "%B %d %Y",
    "%d.%m.%Y",
)
_days = st.dates(min_value=dt.date(1927, 1, 1), max_value=dt.date(2025, 12, 31))
_words = st.lists(
    st.sampled_from(["lillian", "sanby", "dickinson", "cres", "kenwick", "nsw", "act", "unit"]),
    max_size=4,
)
_places = st.lists(st.integers(1, 99_999).map(str), max_size=2)  # house numbers, postcodes


def _folded(*parts: str) -> str:
    text = normalise("text", " ".join(p for p in parts if p))
    assert text is not None
    return text


@settings(max_examples=300, deadline=None)
@given(_days, st.sampled_from(_LAYOUTS), _words, _words, _places)
def test_a_date_in_any_layout_is_read_among_other_words(  # type: ignore[no-untyped-def]
    day, layout, before, after, numbers
) -> None:
    """The day written in any layout, among names and a house number or postcode, is one
    of the readings (an ambiguous layout gives both orders of day and month)."""
    text = _folded(" ".join(before), day.strftime(layout), " ".join(after), " ".join(numbers))
    found = dates_in(text)
    assert found is not None and day.strftime("%Y%m%d") in found.split("|")


@settings(max_examples=200, deadline=None)
@given(_words.filter(bool), _places)
def test_names_and_numbers_alone_hold_no_date(words, numbers) -> None:  # type: ignore[no-untyped-def]
    """A house number and a postcode (under 8 digits, never three in a row) are no date."""
    assert dates_in(_folded(" ".join(words), " ".join(numbers))) is None


def test_an_organisation_and_its_address_hold_no_date() -> None:
    for text in (
        "Eagle Pharmaceuticals Ltd., 5333 High Drive, Omaha NE 68102",
        "Dept. of Computer Science, Univ. of Leipzig, 04109 Leipzig, Germany",
        "flat 3 12 smith st",
        "call 0412 345 678",
    ):
        assert dates_in(_folded(text)) is None, text


def _view_levels(left: list[str], right: list[str]) -> list[int]:
    vocab = sorted(set(left) | set(right))
    a = np.array([vocab.index(v) for v in left], np.int64)
    b = np.array([vocab.index(v) for v in right], np.int64)
    return compare_field("text_dates", vocab, a, b).tolist()


@settings(max_examples=200, deadline=None)
@given(_days, _days, st.sampled_from(_LAYOUTS), st.sampled_from(_LAYOUTS), _words)
def test_the_view_compares_dates_as_the_date_field_does(  # type: ignore[no-untyped-def]
    x, y, layout_x, layout_y, words
) -> None:
    """Two records of one day in different layouts share a date (the top level); two
    days compare as the ``date`` field compares their ISO forms, except that an
    ambiguous layout's other reading may bring them closer, never further apart."""
    name = " ".join(words)
    left = [_folded(name, x.strftime(layout_x), "kenwick")]
    right = [_folded(name, y.strftime(layout_y), "kenwick")]
    level = _view_levels(left, right)[0]
    vocab = [x.strftime("%Y%m%d"), y.strftime("%Y%m%d")]
    one = np.array([0], np.int64), np.array([1], np.int64)
    assert level >= compare_field("date", vocab, *one)[0] >= 1
    assert (level == 4) == (x == y) or (level == 4 and _swapped_or_ambiguous(x, y))


def _swapped_or_ambiguous(x: dt.date, y: dt.date) -> bool:
    """Day and month of one read as month and day of the other (an ambiguous layout's
    second reading)."""
    return (x.year, x.month, x.day) == (y.year, y.day, y.month)


def test_a_side_without_a_date_is_missing() -> None:
    assert _view_levels(["lillian sanby kenwick"], ["lillian sanby 04 02 1976"]) == [0]
    assert _view_levels(["lillian sanby 04 02 1976"], ["sanby 19760204 kenwick"]) == [4]
    assert _view_levels(["lillian sanby 04 02 1976"], ["sanby 19760402 kenwick"]) == [4]
    assert _view_levels(["lillian sanby 1976 02 04"], ["sanby 1975 02 04"]) == [3]
    assert _view_levels(["lillian sanby 1976 02 04"], ["sanby 1983 11 21"]) == [1]


_readings = st.lists(_days.map(lambda d: d.strftime("%Y%m%d")), min_size=1, max_size=2).map(
    "|".join
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_readings, _readings), min_size=1, max_size=20))
def test_date_edits_are_the_closest_readings_by_jellyfish(pairs) -> None:  # type: ignore[no-untyped-def]
    """The vectorised distance is, pair by pair, the least Damerau-Levenshtein distance
    (jellyfish's) over both sides' readings, a day and month swapped counting one."""

    def one(p: str, q: str) -> int:
        d = jellyfish.damerau_levenshtein_distance(p, q)
        return min(d, 1) if (p[:4], p[4:6], p[6:]) == (q[:4], q[6:], q[4:6]) else d

    want = [min(one(p, q) for p in x.split("|") for q in y.split("|")) for x, y in pairs]
    assert date_edits([x for x, _ in pairs], [y for _, y in pairs]).tolist() == want
