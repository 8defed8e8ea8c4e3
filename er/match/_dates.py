"""Dates compared, as a typed field holds them and as a sentence mentions them.

A date field's value is every calendar reading of what was written, as YYYYMMDD,
``|``-joined when the layout is ambiguous (``er.featurize.read_date``). Free text
holds dates too: a person's record joined into one string ("lillian sanby feb 4 1976
300 dickinson cres kenwick 3031 nsw") writes the birth date in any layout, so two
records of one person rarely share its words ("04 02 76" and "feb 4 1976"), while a
household's members share every word but the given name and the date. The
``text_dates`` view (er.match._views) reads the dates out of the folded text and
compares them as a date field is compared.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from rapidfuzz.distance import DamerauLevenshtein
from rapidfuzz.process import cpdist

from er.featurize import MONTH_WORDS, read_date

__all__ = ["date_edits", "dates_in", "without_dates"]

# A year a date in free text may hold: wider than a person's life, narrow enough that
# an 8-digit number (an id, a phone number without its area code) rarely reads as one.
_YEARS = (1800, 2100)
_DAY_OR_MONTH = re.compile(r"\d{1,2}")
_YEAR = re.compile(r"\d{2}|\d{4}")


def date_edits(left: Sequence[str], right: Sequence[str]) -> NDArray[np.int64]:
    """(p,) fewest edits between a reading of ``left[i]`` and one of ``right[i]`` (each
    YYYYMMDD readings, ``|``-joined); a day and month swapped counts as one edit.

    Every reading of one side meets every reading of the other in one vectorised call
    (rapidfuzz's ``cpdist``), and each pair keeps its closest.
    """
    at: list[int] = []
    xs: list[str] = []
    ys: list[str] = []
    for i, (x, y) in enumerate(zip(left, right, strict=True)):
        for p in x.split("|"):
            for q in y.split("|"):
                at.append(i)
                xs.append(p)
                ys.append(q)
    edits = np.asarray(cpdist(xs, ys, scorer=DamerauLevenshtein.distance, workers=1), np.int64)
    a, b = np.asarray(xs, np.int64), np.asarray(ys, np.int64)  # YYYYMMDD as numbers
    month, day = a // 100 % 100, a % 100
    swapped = (a // 10_000 == b // 10_000) & (month == b % 100) & (day == b // 100 % 100)
    edits[swapped] = np.minimum(edits[swapped], 1)
    best = np.full(len(left), 8, np.int64)
    np.minimum.at(best, np.asarray(at, np.int64), edits)
    return best


@lru_cache(maxsize=100_000)
def dates_in(text: str) -> str | None:
    """Every reading of every date written in folded free text, ``|``-joined (None when
    it holds none).

    A date is three words in a date's layout (day, month and a year of two or four
    digits in either order of day and month, the year first with four digits, or a
    month's name in place of its number: "04 02 76", "1976 02 04", "feb 4 1976", "4 feb
    1976") or one 8-digit word that reads as one ("19760204"), with a year from 1800
    to 2100. Folding took the separators away, so three words that overlap two such
    layouts ("3 04 02 76": a house number before "04.02.76"; "may 4 12 1976") give the
    readings of both: a date left out would read as one that differs.
    """
    out: list[str] = []
    for readings, _ in _spans(text):
        out += [r for r in readings if r not in out]
    return "|".join(out) if out else None


@lru_cache(maxsize=100_000)
def without_dates(text: str) -> str:
    """Folded free text without the words of its dates (:func:`dates_in`)."""
    words = text.split()
    taken: set[int] = set()
    for _, (start, stop) in _spans(text):
        taken.update(range(start, stop))
    return " ".join(w for k, w in enumerate(words) if k not in taken)


def _spans(text: str) -> list[tuple[tuple[str, ...], tuple[int, int]]]:
    """Each date of ``text``: its readings and the words it spans, [start, stop)."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        if len(word) == 8 and word.isdigit():
            readings = _in_years(read_date(word))
            if readings:
                out.append((readings, (i, i + 1)))
        three = words[i : i + 3]
        if len(three) == 3 and _date_layout(three):
            readings = _in_years(read_date(" ".join(three)))
            if readings:
                out.append((readings, (i, i + 3)))
    return out


def _date_layout(three: list[str]) -> bool:
    a, b, c = three
    if a in MONTH_WORDS:  # feb 4 1976
        return bool(_DAY_OR_MONTH.fullmatch(b) and _YEAR.fullmatch(c))
    if b in MONTH_WORDS:  # 4 feb 1976
        return bool(_DAY_OR_MONTH.fullmatch(a) and _YEAR.fullmatch(c))
    if len(a) == 4:  # 1976 02 04
        return a.isdigit() and bool(_DAY_OR_MONTH.fullmatch(b) and _DAY_OR_MONTH.fullmatch(c))
    return bool(_DAY_OR_MONTH.fullmatch(a) and _DAY_OR_MONTH.fullmatch(b) and _YEAR.fullmatch(c))


def _in_years(readings: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(r for r in readings if _YEARS[0] <= int(r[:4]) <= _YEARS[1])
