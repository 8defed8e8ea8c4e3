"""Dates read out of free text: every layout a person's record is written in, checked
against the calendar (``datetime.date`` and ``strftime``, not the reader under test),
and the ``text_dates`` view's levels against the date field's ladder."""

from __future__ import annotations

import datetime as dt

import jellyfish
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.featurize import normalise
from er.match import (
    LADDERS,
    FieldTable,
    FieldWeights,
    PairModel,
    compare_field,
    train_pair_model,
)
from er.match._dates import date_edits, dates_in
from er.match._views import VIEW_TEMPERATURE, dates_apart

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


_VIEW = {"source": "t", "df_floor": 0.001}


def _views_model(dates_far_m: float, event: bool = False) -> PairModel:
    """A model of one string in five views: each word view's upper levels +3 to +10
    bits, its far level against; the dates' far level's m ``dates_far_m``, one-sided
    when the dates are an ``event``'s."""
    ms = {
        5: (1.0, 0.01, 0.09, 0.2, 0.7),
        4: (1.0, 0.05, 0.15, 0.8),
        3: (1.0, 0.2, 0.8),
    }
    us = {5: (1.0, 0.997, 0.001, 0.001, 0.001), 4: (1.0, 0.998, 0.001, 0.001), 3: (1.0, 0.9, 0.1)}
    fields = []
    for name, kind in zip(
        ("t", "t:share", "t:rarest", "t:numbers", "t:dates"),
        ("text_grams", "text_share", "text_rarest", "text_numbers", "text_dates"),
        strict=True,
    ):
        n = LADDERS[kind].n_levels
        rest = 1.0 - dates_far_m  # two digits off, one, a date shared: 1%, 10%, 89% of it
        m = (
            (1.0, dates_far_m, 0.01 * rest, 0.1 * rest, 0.89 * rest)
            if n == 5 and kind == "text_dates"
            else ms[n]
        )
        side = event and kind == "text_dates"
        view = FieldWeights(kind=kind, m=m, u=us[n], **_VIEW, name=name, one_sided=side)
        fields.append(view)
    return PairModel(fields=tuple(fields), prior=1e-4, temperature=VIEW_TEMPERATURE)


def test_a_household_in_one_string_is_two_people_and_a_layout_one() -> None:
    """A household's members (surname, address shared; given name and birth date not)
    agree in every word view, so the views' sum calls them one; their dates differ
    outright, and where the dates are a person's (two-sided) the string then counts once.
    One person's two records, the date in two layouts, stay one; where the dates are an
    event's (one-sided), nothing changes."""
    t = FieldTable(["t"])
    t.add(
        [
            [_folded("lillian sanby 04.02.76 300 dickinson cres kenwick 3031 nsw")],
            [_folded("archie sanby 19.11.79 300 dickinson cres kenwick 3031 nsw")],
            [_folded("lillian sanby feb 4 1976 300 dickinson cres kenwick 3031 nsw")],
        ]
    )
    left, right = np.array([0, 0]), np.array([1, 2])
    model = _views_model(dates_far_m=0.02)
    household, person = model.probability(t, left, right)
    assert household < 0.01 and person > 0.99
    w, levels = model.weights(t, left, right)
    assert levels[:, -1].tolist() == [1, 4]  # dates far; a date shared
    summed = (np.log2(1e-4 / (1 - 1e-4)) + w[0].sum()) / VIEW_TEMPERATURE
    assert 1 / (1 + 2.0**-summed) > 0.5  # what the views' sum alone says of the household
    event = _views_model(dates_far_m=0.997, event=True)  # matches' dates differ as random pairs'
    assert event.probability(t, left, right)[0] > 0.5


@pytest.mark.parametrize("event", [False, True])
def test_dates_that_differ_in_strings_equal_but_for_them_are_an_events(event: bool) -> None:
    """Trained on pairs of strings equal but for their dates (which a household cannot
    form), the dates' view is one-sided where those dates differ outright (an event's:
    a firm's filings) and two-sided where they agree (a birth date's)."""
    rng = np.random.default_rng(3)
    words = ["acme", "corp", "filing", "omaha", "annual", "report", "ltd", "zenith"]
    texts = []
    for k in range(40):
        name = " ".join(rng.choice(words, 3, replace=False)) + f" {k + 100}"
        first = f"{k % 27 + 1:02d}.05.2019"
        texts += [_folded(f"{name} {first}"), _folded(f"{name} {'11.12.1987' if event else first}")]
    t = FieldTable(["t"])
    t.add([[x] for x in texts])
    i, j = (np.arange(0, len(texts), 2), np.arange(1, len(texts), 2))
    model = train_pair_model(t, ["text"], (i.astype(np.int64), j.astype(np.int64)))
    dates = next(f for f in model.fields if f.kind == "text_dates")
    assert dates.one_sided == event


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(*[st.integers(0, 4)] * 7), min_size=1, max_size=30),
    st.integers(0, 10_000),
    st.floats(0.5, 4),
    st.tuples(st.booleans(), st.booleans()),
)
def test_dates_apart_counts_a_strings_views_once_by_its_definition(  # type: ignore[no-untyped-def]
    rows, seed, temperature, events
) -> None:
    """Against a pair-by-pair recomputation, two strings and a place beside them: for
    each string whose dates' view is two-sided (a person's) and whose dates are not one
    date (levels 1 to 3), its agreeing views past the strongest are taken off the
    total, and the pair's weight is the lesser of its total and the temperature times
    that; every other pair keeps its total."""
    fields = [
        ("text_grams", "a"),
        ("text_share", "a"),
        ("text_dates", "a"),
        ("text_grams", "b"),
        ("text_numbers", "b"),
        ("text_dates", "b"),
        ("place", None),
    ]
    sides = [False, False, events[0], False, False, events[1], False]
    rng = np.random.default_rng(seed)
    weights = rng.normal(0, 8, size=(len(rows), len(fields)))
    levels = np.array(rows, np.int8)
    total = weights.sum(axis=1) + rng.normal(0, 10, size=len(rows))  # a prior, corrections
    got = dates_apart(total, weights, levels, fields, temperature, sides)
    for i in range(len(rows)):
        taken, apart = 0.0, False
        for dates, views in ((2, (0, 1)), (5, (3, 4))):
            if 1 <= levels[i, dates] <= 3 and not sides[dates]:
                agreeing = sorted(weights[i, v] for v in views if weights[i, v] > 0)
                taken += sum(agreeing[:-1])  # every agreeing view but the strongest
                apart = True
        want = min(total[i], temperature * (total[i] - taken)) if apart else total[i]
        assert got[i] == pytest.approx(want)


def test_a_date_overlapping_a_number_or_a_month_word_is_still_read() -> None:
    """Folding takes the separators away: a house number before "04.02.76", or "may"
    before "4 12 1976", makes two layouts overlap, and both are read."""
    assert "19760204" in (dates_in(_folded("lillian sanby 3 04.02.76")) or "")
    assert "19761204" in (dates_in(_folded("sanby may 4.12.1976")) or "")
