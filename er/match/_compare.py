"""Field comparisons: normalised values of candidate pairs -> comparison levels.

Each field type has a fixed ladder of levels, from "no evidence" to "exact":

    0 missing (either side has no value: weight 0 by construction)
    1 far     (values disagree beyond the type's own notion of close)
    2.. close levels of the type, weakest first
    top exact (equal normalised values)

A pair's level is the highest rung it reaches. Comparisons run over whole arrays of
pairs: equality on integer codes, string similarities through rapidfuzz's C++
``cpdist`` (one call per field and rung, no Python loop per pair), except for the
few pairs that need set logic (nicknames, ambiguous dates). The views of free text
(``text_*``, er.match._views) have ladders of their own whose top is no equality, and
are computed there, partly pair by pair (once per distinct pair of values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import jellyfish
import numpy as np
from numpy.typing import NDArray
from rapidfuzz import fuzz
from rapidfuzz.distance import DamerauLevenshtein, JaroWinkler
from rapidfuzz.process import cpdist

from er.match._dates import date_edits
from er.match._views import VIEW_KINDS, View, view_levels

__all__ = ["LADDERS", "Ladder", "compare_field", "compare_views"]


@dataclass(frozen=True)
class Ladder:
    """The comparison levels of one field type.

    Attributes
    ----------
    names : tuple of str
        Level names, index = level (0 missing, 1 far, ..., last exact).
    rungs : tuple of (str, float)
        The close levels 2..n-2, weakest first: (measure, threshold). A pair reaches a
        rung when ``measure(a, b) >= threshold`` (similarities) or ``<=`` (edits). A
        last rung may reach the exact level for values that differ as text but not in
        meaning.
    """

    names: tuple[str, ...]
    rungs: tuple[tuple[str, float], ...]

    @property
    def n_levels(self) -> int:
        return len(self.names)


LADDERS: dict[str, Ladder] = {
    "person_name": Ladder(
        (
            "missing",
            "far",
            "similar (JW >= 0.80 or same sound)",
            "close (JW >= 0.92 or nickname)",
            "exact",
        ),
        (("jw_or_sound", 0.80), ("jw_or_nickname", 0.92)),
    ),
    "org_name": Ladder(
        ("missing", "far", "similar (token set >= 75)", "close (token set >= 90)", "exact"),
        (("token_set", 75.0), ("token_set", 90.0)),
    ),
    "text": Ladder(
        ("missing", "far", "similar (token set >= 60)", "close (token set >= 80)", "exact"),
        (("token_set", 60.0), ("token_set", 80.0)),
    ),
    "address": Ladder(
        ("missing", "far", "similar (token sort >= 70)", "close (token sort >= 88)", "exact"),
        (("token_sort", 70.0), ("token_sort", 88.0)),
    ),
    "place": Ladder(("missing", "far", "close (JW >= 0.88)", "exact"), (("jw", 0.88),)),
    "date": Ladder(
        ("missing", "far", "two digits off", "one digit off or day/month swapped", "exact"),
        # the last rung reaches "exact": an ambiguous date one of whose readings is
        # the other side's date
        (("date_edits", 2.0), ("date_edits", 1.0), ("date_edits", 0.0)),
    ),
    "phone": Ladder(("missing", "far", "one digit off", "exact"), (("edits", 1.0),)),
    "identifier": Ladder(("missing", "far", "one character off", "exact"), (("edits", 1.0),)),
    "postcode": Ladder(("missing", "far", "one character off", "exact"), (("edits", 1.0),)),
    "email": Ladder(
        ("missing", "far", "same user or one character off", "exact"), (("email", 1.0),)
    ),
    "category": Ladder(("missing", "far", "exact"), ()),
    "number": Ladder(("missing", "far", "within 5%", "exact"), (("ratio", 0.95),)),
    # the views of free text (er.match._views): levels computed there, no rungs here
    "text_grams": Ladder(
        ("missing", "far (3-gram cosine < 0.4)", "similar (>= 0.4)", "close (>= 0.6)", ">= 0.8"),
        (),
    ),
    "text_share": Ladder(
        (
            "missing",
            "rare words apart (< 0.3)",
            "some shared (>= 0.3)",
            "most (>= 0.6)",
            "all (>= 0.9)",
        ),
        (),
    ),
    "text_rarest": Ladder(
        ("missing", "neither rarest word shared", "one side's rarest word shared", "both shared"),
        (),
    ),
    "text_numbers": Ladder(("missing", "numbers differ", "a number shared"), ()),
    "text_dates": Ladder(
        ("missing", "far", "two digits off", "one digit off or day/month swapped", "a date shared"),
        (),
    ),
}
LADDERS["event_date"] = LADDERS["date"]  # an event's date compares as any date


def compare_field(
    kind: str,
    vocab: Sequence[str],
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    df: Mapping[str, float] | None = None,
    df_floor: float | None = None,
    undated: bool = False,
) -> NDArray[np.int8]:
    """Comparison level of each pair for one field (a view of free text: with its
    document frequencies, and ``undated`` if it reads strings without their dates).

    Parameters
    ----------
    kind : str
        Field type (a key of :data:`LADDERS`).
    vocab : sequence of str
        Normalised values by code.
    a, b : ndarray of int64, shape (p,)
        Codes of the two sides (-1: missing).

    Returns
    -------
    ndarray of int8, shape (p,)
        Level of each pair (see the module docstring).
    """
    if kind in VIEW_KINDS:
        return compare_views([(kind, df or {}, df_floor, undated)], vocab, a, b)[:, 0]
    ladder = LADDERS[kind]
    top = ladder.n_levels - 1
    level = np.ones(a.shape, np.int8)
    level[(a < 0) | (b < 0)] = 0
    level[(a == b) & (a >= 0)] = top
    todo = np.flatnonzero(level == 1)
    if todo.size == 0 or not ladder.rungs:
        return level
    # distinct code pairs only: common values repeat across many candidate pairs
    # (one int64 key per pair: np.unique over rows sorts a structured view, 4x slower)
    left, right, inverse = _distinct(vocab, a[todo], b[todo])
    reached = np.ones(len(left), np.int8)
    distances: dict[str, NDArray[np.int64]] = {}  # a distance's rungs read it once
    for rung, (measure, threshold) in enumerate(ladder.rungs, start=2):
        if measure in _DISTANCES:
            if measure not in distances:
                distances[measure] = _DISTANCES[measure](left, right)
            reached[distances[measure] <= threshold] = rung
        else:
            reached[_MEASURES[measure](left, right, threshold)] = rung
    level[todo] = reached[inverse]
    return level


def _distinct(
    vocab: Sequence[str], a: NDArray[np.int64], b: NDArray[np.int64]
) -> tuple[list[str], list[str], NDArray[np.int64]]:
    """The distinct code pairs' values and, per pair, the index of its distinct pair."""
    width = np.int64(len(vocab))
    keys, inverse = np.unique(a * width + b, return_inverse=True)
    left = [vocab[i] for i in (keys // width).tolist()]
    right = [vocab[i] for i in (keys % width).tolist()]
    return left, right, inverse.ravel()


def compare_views(
    views: Sequence[View], vocab: Sequence[str], a: NDArray[np.int64], b: NDArray[np.int64]
) -> NDArray[np.int8]:
    """(p, len(views)) levels of the views of one free-text field (er.match._views),
    equal values included (the numbers view has no "exact": equal text without digits
    is missing there); the distinct value pairs found once for all views."""
    level = np.zeros((a.size, len(views)), np.int8)
    todo = np.flatnonzero((a >= 0) & (b >= 0))
    if todo.size:
        left, right, inverse = _distinct(vocab, a[todo], b[todo])
        level[todo] = view_levels(views, left, right)[inverse]
    return level


def _jw(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    sim = cpdist(left, right, scorer=JaroWinkler.normalized_similarity, workers=1)
    return np.asarray(sim) >= t


def _jw_or_sound(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    same_sound = np.array([_sound(x) == _sound(y) for x, y in zip(left, right, strict=True)])
    return np.asarray(_jw(left, right, t) | same_sound, bool)


def _jw_or_nickname(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    nick = np.array(
        [not _name_keys(x).isdisjoint(_name_keys(y)) for x, y in zip(left, right, strict=True)]
    )
    return np.asarray(_jw(left, right, t) | nick, bool)


def _token_set(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    return np.asarray(cpdist(left, right, scorer=fuzz.token_set_ratio, workers=1)) >= t


def _token_sort(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    return np.asarray(cpdist(left, right, scorer=fuzz.token_sort_ratio, workers=1)) >= t


def _edits(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    return np.asarray(cpdist(left, right, scorer=DamerauLevenshtein.distance, workers=1)) <= t


def _email(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    user = np.array([x.split("@")[0] == y.split("@")[0] for x, y in zip(left, right, strict=True)])
    return user | _edits(left, right, t)


def _ratio(left: list[str], right: list[str], t: float) -> NDArray[np.bool_]:
    x = np.array([float(v) for v in left])
    y = np.array([float(v) for v in right])
    big = np.maximum(np.abs(x), np.abs(y))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(big > 0, np.minimum(np.abs(x), np.abs(y)) / big, 1.0) >= t


# distances whose rungs are thresholds on one number per pair, computed once per field:
# the fewest digit edits over every reading of each date (a day/month swap is one)
_DISTANCES: dict[str, Callable[[list[str], list[str]], NDArray[np.int64]]] = {
    "date_edits": date_edits,
}
_MEASURES: dict[str, Callable[[list[str], list[str], float], NDArray[np.bool_]]] = {
    "jw": _jw,
    "jw_or_sound": _jw_or_sound,
    "jw_or_nickname": _jw_or_nickname,
    "token_set": _token_set,
    "token_sort": _token_sort,
    "edits": _edits,
    "email": _email,
    "ratio": _ratio,
}


@lru_cache(maxsize=100_000)
def _sound(name: str) -> str:
    """Metaphone key of a name (empty names never sound alike)."""
    return jellyfish.metaphone(name) if name else "\0"


@lru_cache(maxsize=100_000)
def _name_keys(name: str) -> frozenset[str]:
    """The first given name and the canonical names it is a nickname of.

    Two names are nickname-equivalent when these sets meet ("bill" and "william" share
    "william"). The table is the ``nicknames`` package's (a curated list of US given
    names and their diminutives).
    """
    first = name.split(" ")[0]
    return frozenset({first, *_nicknamer().canonicals_of(first)})


@lru_cache(maxsize=1)
def _nicknamer():  # type: ignore[no-untyped-def]
    from nicknames import NickNamer

    return NickNamer()
