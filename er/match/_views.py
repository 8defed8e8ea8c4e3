"""Free text that must tell entities apart alone, compared in four views.

A collection whose only fields are free text (Leipzig's affiliation strings: "Dept. of
Computer Science, Univ. of Leipzig, Germany"), or free text beside places, numbers and
categories, has no name, date or id to identify an entity. One comparison of the
string (token-set similarity, the ``text`` ladder) is then all EM has to weigh, and a
single comparison cannot tell matches from non-matches: any prior fits it, EM found
no plausible fit, and er resolved Leipzig to pairwise F1 0.000 (bench/RESULTS.md).
Such a field is compared in four views instead, each one a field of the pair model
with its own levels and its own trained weights:

- ``text_grams``: cosine of the two strings' character 3-grams (within words, padded
  by a space), each gram weighted by its inverse document frequency (rare grams count
  more): far < 0.4 <= 0.6 <= 0.8;
- ``text_share``: the inverse-document-frequency weight of the words both sides hold,
  as a share of the lighter side's (the side whose words weigh less in all): far < 0.3
  <= 0.6 <= 0.9; missing when a side weighs 0 (only words every training record holds,
  or a training sample of one record);
- ``text_rarest``: whether each side's rarest word is on the other side (neither,
  one, both); among words equally rare (each seen in one training record or none)
  the last in alphabetical order stands for the side;
- ``text_numbers``: the numbers (digit words) of the two sides: none shared, one
  shared; missing when a side has none.

Document frequencies are counted on the training sample and frozen with the model
(a word or gram seen in one training record or none gets the floor, one over the
sample), so a replayed batch gets the same levels. The views and their thresholds
were set in ``bench freetext``, a study on Leipzig (bench/RESULTS.md); the linkage's
neighbours and cut on two other sets (:data:`er.pipeline.config.FREE_TEXT_K`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

__all__ = [
    "IDENTITY_KINDS",
    "VIEW_KINDS",
    "document_frequencies",
    "free_text_only",
    "model_fields",
    "view_levels",
]

# what names an entity on its own (er.match._model weighs context fields beside these
# one-sided; without any, free text is compared in views)
IDENTITY_KINDS = frozenset({"person_name", "org_name", "date", "identifier", "email", "phone"})
VIEW_KINDS = ("text_grams", "text_share", "text_rarest", "text_numbers")
GRAM_CUTS = (0.4, 0.6, 0.8)  # text_grams: far < 0.4 <= similar < 0.6 <= close < 0.8
SHARE_CUTS = (0.3, 0.6, 0.9)  # text_share


def free_text_only(kinds: Sequence[str]) -> bool:
    """A collection that must tell entities apart by free text: a ``text`` field and no
    identity field (a name, date, id, e-mail or phone)."""
    return "text" in kinds and not any(k in IDENTITY_KINDS for k in kinds)


def model_fields(
    names: Sequence[str], kinds: Sequence[str], views: bool | None = None
) -> list[tuple[str, str, str | None]]:
    """The pair model's fields for a collection's typed fields.

    Parameters
    ----------
    views : bool, optional
        Whether ``text`` fields become views; default :func:`free_text_only`. A model
        retrained for a collection keeps its first model's choice (the collection's
        linkage and cut were set for it).

    Returns
    -------
    list of (name, kind, source)
        One per compared field; in a :func:`free_text_only` collection each ``text``
        field becomes its four views, named ``<field>``, ``<field>:share``,
        ``<field>:rarest`` and ``<field>:numbers``, with ``source`` the field they
        compare (None: the field itself).
    """
    views = free_text_only(kinds) if views is None else views
    out: list[tuple[str, str, str | None]] = []
    for name, kind in zip(names, kinds, strict=True):
        if views and kind == "text":
            suffixes = ("", ":share", ":rarest", ":numbers")
            out += [(name + s, v, name) for s, v in zip(suffixes, VIEW_KINDS, strict=True)]
        else:
            out.append((name, kind, None))
    return out


def document_frequencies(kind: str, values: Sequence[str]) -> tuple[dict[str, float], float | None]:
    """Share of the training records whose value holds each gram (``text_grams``) or
    word (``text_share``, ``text_rarest``), for those held by two or more; and the
    floor (one over the records) for any other. None for ``text_numbers``.

    Parameters
    ----------
    values : sequence of str
        The field's normalised value in each training record that has one.
    """
    if kind == "text_numbers" or not values:
        return {}, None
    split = _grams if kind == "text_grams" else _words
    counts = Counter(t for v in values for t in set(split(v)))  # records, not uses
    n = float(len(values))
    return {t: c / n for t, c in sorted(counts.items()) if c >= 2}, 1.0 / n


def view_levels(
    kind: str,
    left: list[str],
    right: list[str],
    df: Mapping[str, float],
    floor: float | None,
) -> NDArray[np.int8]:
    """(p,) level of each pair of values (both present) in one view (module docstring).

    Parameters
    ----------
    kind : str
        One of :data:`VIEW_KINDS`.
    left, right : list of str, length p
    df, floor : the view's frozen document frequencies (:func:`document_frequencies`)
    """
    if kind == "text_numbers":
        return np.array([_numbers(a, b) for a, b in zip(left, right, strict=True)], np.int8)
    idf = _Idf(df, floor if floor is not None else 1.0)
    if kind == "text_grams":
        return np.asarray(1 + np.digitize(_gram_cosine(left, right, idf), GRAM_CUTS), np.int8)
    if kind == "text_share":
        share = np.array([_share(a, b, idf) for a, b in zip(left, right, strict=True)])
        level = np.asarray(1 + np.digitize(share, SHARE_CUTS), np.int8)
        level[np.isnan(share)] = 0  # a side of words every record holds: no evidence
        return level
    return np.array([_rarest(a, b, idf) for a, b in zip(left, right, strict=True)], np.int8)


class _Idf:
    """ln(1 / share) of a gram or word; unseen ones at the floor (the rarest)."""

    def __init__(self, df: Mapping[str, float], floor: float) -> None:
        self.df, self.top = df, -math.log(floor)
        self.known: dict[str, float] = {}

    def __call__(self, token: str) -> float:
        idf = self.known.get(token)
        if idf is None:
            share = self.df.get(token)
            idf = self.known[token] = self.top if share is None else -math.log(share)
        return idf


def _gram_cosine(left: list[str], right: list[str], idf: _Idf) -> NDArray[np.float64]:
    """(p,) cosine of the idf-weighted 3-gram counts of each pair (scikit-learn's
    ``char_wb`` grams and its unsmoothed idf, ln(1 / share) + 1)."""
    values = sorted(set(left) | set(right))
    row = {v: i for i, v in enumerate(values)}
    # grams numbered in sorted order: a pair's sums then run in the same order whatever
    # else the call holds (the writer, explain and confidence get the same bits)
    column = {g: j for j, g in enumerate(sorted({g for v in values for g in _grams(v)}))}
    rows, cols, data = [], [], []
    for i, v in enumerate(values):
        for gram, count in sorted(Counter(_grams(v)).items()):
            rows.append(i)
            cols.append(column[gram])
            data.append(count * (idf(gram) + 1.0))
    X = sparse.csr_array((data, (rows, cols)), shape=(len(values), max(len(column), 1)))
    norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sparse.csr_array(sparse.diags_array(1.0 / np.maximum(norm, 1e-12)) @ X)
    a = np.array([row[v] for v in left], np.int64)
    b = np.array([row[v] for v in right], np.int64)
    return np.asarray(X[a].multiply(X[b]).sum(axis=1), np.float64).ravel()


def _share(a: str, b: str, idf: _Idf) -> float:
    """The shared words' idf weight over the lighter side's; nan when a side weighs 0.
    Sums with fsum: a frozenset's order follows the process's hash seed, and a replay
    after a restart must get the same bits."""
    A, B = _words(a), _words(b)
    lighter = min(math.fsum(map(idf, A)), math.fsum(map(idf, B)))
    return math.fsum(map(idf, A & B)) / lighter if lighter > 0 else float("nan")


def _rarest(a: str, b: str, idf: _Idf) -> int:
    A, B = _words(a), _words(b)
    if not A or not B:
        return 0
    rarest_a = max(A, key=lambda t: (idf(t), t))
    rarest_b = max(B, key=lambda t: (idf(t), t))
    return 1 + (rarest_a in B) + (rarest_b in A)


def _numbers(a: str, b: str) -> int:
    na = {t for t in _words(a) if t.isdigit()}
    nb = {t for t in _words(b) if t.isdigit()}
    if not na or not nb:
        return 0
    return 2 if na & nb else 1


@lru_cache(maxsize=100_000)
def _words(value: str) -> frozenset[str]:
    return frozenset(value.split())


@lru_cache(maxsize=100_000)
def _grams(value: str) -> tuple[str, ...]:
    """Character 3-grams of each word padded by a space ("ab" -> " ab", "ab ")."""
    out: list[str] = []
    for word in value.split():
        padded = f" {word} "
        out += [padded[i : i + 3] for i in range(max(len(padded) - 2, 1))]
    return tuple(out)
