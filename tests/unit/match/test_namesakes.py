"""Short strings of a name and a birth date (RLdata's records as one column): namesakes
share every word but the date, so the views must read the date once and EM must not take
namesakes for matches. Checked against the generator's own truth and against the views
computed on the strings without their dates, built from their parts (not by the reader
under test)."""

from __future__ import annotations

import datetime as dt

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.featurize import normalise
from er.match import FieldTable, train_pair_model
from er.match._anchors import MAX_FAR_M
from er.match._views import WITHOUT_DATES, view_levels

_GIVEN = ["hans", "peter", "anna", "karin", "uwe", "petra", "frank", "birgit", "jens", "helga"]
_FAMILY = ["mueller", "schmidt", "schneider", "fischer", "weber", "meyer", "wagner", "becker"]
_LAYOUTS = ("%Y %m %d", "%d.%m.%Y", "%Y%m%d", "%b %d %Y")
_days = st.dates(min_value=dt.date(1930, 1, 1), max_value=dt.date(2005, 12, 31))
# words only: a number beside a date may be read as part of one (er.match._dates)
_names = st.lists(st.sampled_from([*_GIVEN, *_FAMILY, "strasse", "weg"]), max_size=4)


def _folded(text: str) -> str:
    out = normalise("text", text)
    assert out is not None
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_names, _days, st.sampled_from(_LAYOUTS)), min_size=2, max_size=8))
def test_the_word_views_read_a_string_without_its_dates(rows) -> None:  # type: ignore[no-untyped-def]
    """Beside a dates' view, grams, shared words and the rarest word are those of the
    strings' other words (built without the date, so the reader is not the oracle);
    without a dates' view (a model fitted before it) the whole strings are compared."""
    full = [_folded(" ".join([*words, day.strftime(layout)])) for words, day, layout in rows]
    rest = [" ".join(_folded(w) for w in words) for words, _, _ in rows]
    left, right = full[:-1], full[1:]
    views = [(kind, {}, 0.2) for kind in sorted(WITHOUT_DATES)]
    with_dates = view_levels([*views, ("text_dates", {}, None)], left, right)[:, :-1]
    assert (with_dates == view_levels(views, rest[:-1], rest[1:])).all()
    assert (view_levels(views, left, right) == view_levels(views, left, right)).all()


def _people(seed: int) -> tuple[list[str], np.ndarray]:
    """300 people drawn from 80 names (so namesakes abound), each born on its own day;
    one in five written twice, the copy's layout changed and one given name in three
    misspelt. Returns the strings and each one's person."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    person: list[int] = []
    for k in range(300):
        given_name, family = rng.choice(_GIVEN), rng.choice(_FAMILY)
        day = dt.date(1930, 1, 1) + dt.timedelta(days=int(rng.integers(0, 27_000)))
        texts.append(_folded(f"{given_name} {family} {day:%Y %m %d}"))
        person.append(k)
        if k % 5 == 0:
            typo = given_name[:-1] + "x" if k % 3 == 0 else given_name
            texts.append(_folded(f"{typo} {family} {day:%d.%m.%Y}"))
            person.append(k)
    return texts, np.asarray(person)


def test_em_on_names_and_birth_dates_tells_namesakes_from_duplicates() -> None:
    """Trained on every pair without labels, the model scores the generator's duplicates
    0.5 or more and its namesakes (every word but the birth date shared) under it, and
    ranks a duplicate with a misspelt name above all but the rare namesake born a digit
    apart; the dates are a
    person's (two-sided), and a far date weighs at least as much against a match as a
    typed date's bound allows (er.match._anchors.MAX_FAR_M)."""
    texts, person = _people(seed=11)
    table = FieldTable(["t"])
    table.add([[t] for t in texts])
    left, right = np.triu_indices(len(texts), k=1)
    pairs = left.astype(np.int64), right.astype(np.int64)
    model = train_pair_model(table, ["text"], pairs)
    dates = next(f for f in model.fields if f.kind == "text_dates")
    assert not dates.one_sided
    assert np.log2(dates.m[1] / dates.u[1]) <= np.log2(MAX_FAR_M / dates.u[1]) + 1e-9
    p = model.probability(table, *pairs)
    same = person[left] == person[right]
    rest = np.array([" ".join(t.split()[:2]) for t in texts])
    namesakes = ~same & (rest[left] == rest[right])
    assert namesakes.sum() > 3 * same.sum()  # the hard case: namesakes outnumber matches
    spelt = same & (rest[left] == rest[right])
    assert (p[spelt] >= 0.5).mean() >= 0.95
    assert (p[namesakes] >= 0.5).mean() <= 0.02
    assert (p[namesakes] < p[same & ~spelt].min()).mean() >= 0.95  # near dates aside
