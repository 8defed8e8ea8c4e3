"""Free text that must tell entities apart alone, compared in views.

A collection whose only fields are free text (Leipzig's affiliation strings: "Dept. of
Computer Science, Univ. of Leipzig, Germany"), or free text beside places, numbers and
categories, has no name, date or id to identify an entity. One comparison of the
string (token-set similarity, the ``text`` ladder) is then all EM has to weigh, and a
single comparison cannot tell matches from non-matches: any prior fits it, EM found
no plausible fit, and er resolved Leipzig to pairwise F1 0.000 (bench/RESULTS.md).
Such a field is compared in five views instead, each one a field of the pair model
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
  shared; missing when a side has none;
- ``text_dates``: the dates the two sides write, in any layout (er.match._dates),
  compared as a date field is: far, two digits off, one digit off or day and month
  swapped, a date shared; missing when a side has none. A person's record as one
  string writes its birth date in layouts whose words two records rarely share, a
  household's members differ in little but the given name and this date, and
  namesakes in the date alone. Beside it the other word views read each string
  without its dates (WITHOUT_DATES), and where the dates are not one date the string
  counts once (:func:`dates_apart`).

Document frequencies are counted on the training sample and frozen with the model
(a word or gram seen in one training record or none gets the floor, one over the
sample), so a replayed batch gets the same levels. The first four views and their
thresholds were set in ``bench freetext``, a study on Leipzig (bench/RESULTS.md); the
linkage's neighbours and cut on two other sets (:data:`er.pipeline.config.FREE_TEXT_K`);
the dates' view on people as one string (bench/RESULTS.md, "Entity resolution quality
on held-out sets (issue #53)").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.match._anchors import MAX_FAR_M, MIN_RECORD_ID_ANCHORS
from er.match._dates import date_edits, dates_in, without_dates
from er.match._dependence import counted_once
from er.match._table import FieldTable

__all__ = [
    "DATES_FAR",
    "IDENTITY_KINDS",
    "VIEW_KINDS",
    "VIEW_TEMPERATURE",
    "View",
    "dates_apart",
    "document_frequencies",
    "event_dates",
    "free_text_only",
    "model_fields",
    "view_levels",
]

# what names an entity on its own (er.match._model weighs context fields beside these
# one-sided; without any, free text is compared in views)
IDENTITY_KINDS = frozenset({"person_name", "org_name", "date", "identifier", "email", "phone"})
VIEW_KINDS = ("text_grams", "text_share", "text_rarest", "text_numbers", "text_dates")
GRAM_CUTS = (0.4, 0.6, 0.8)  # text_grams: far < 0.4 <= similar < 0.6 <= close < 0.8
SHARE_CUTS = (0.3, 0.6, 0.9)  # text_share
DATES_FAR = 1  # text_dates: the level of dates that differ outright
DATES_SHARED = 4  # text_dates: the level of a date both strings write
# a string's text without its dates that fewer than this many of the training records
# would hold by chance (its words' shares multiplied) is one entity's (event_dates)
CHANCE_SHARERS = 0.1
# The views that read a string without its dates beside a dates' view: a date is then
# one piece of evidence, the dates' view's, not also shared grams and rare words, whose
# agreement on a year or a day made EM's matches pairs born alike (RLdata as one string,
# a name and a birth date: "frank peters 1990 7 1"). The numbers view still reads the
# dates' numbers: without them it found one person's records at two addresses apart
# (bench/RESULTS.md, "Entity resolution quality on held-out sets (issue #53)").
WITHOUT_DATES = frozenset({"text_grams", "text_share", "text_rarest"})
# A views model's match weight is divided by this before the logistic
# (er.match._model.PairModel.temperature): the views read one string's evidence several
# times over (a shared rare word raises the share, the rarest-word and the gram views
# at once), so their summed bits make near-certain what is a fair guess, and average
# linkage then counts votes, not evidence (bench/RESULTS.md, "Free text alone").
VIEW_TEMPERATURE = 3.0


def free_text_only(kinds: Sequence[str]) -> bool:
    """A collection that must tell entities apart by free text: a ``text`` field and no
    identity field (a name, date, id, e-mail or phone)."""
    return "text" in kinds and not any(k in IDENTITY_KINDS for k in kinds)


def event_dates(
    table: FieldTable,
    fields: Sequence[tuple[str, str | None]],
    candidates: tuple[NDArray[np.int64], NDArray[np.int64]],
    levels: NDArray[np.int8],
) -> list[int]:
    """The dates' views whose dates are an event's, not who the record is: weighed
    one-sided (a differing date is no evidence), so never setting pairs apart
    (:func:`dates_apart`).

    Found on the candidate pairs whose strings are equal but for their dates, which a
    household's members (another given name) cannot form, and whose rest is too rare
    to be shared by chance (:func:`_chance_sharers`), which namesakes' can be (a name
    and a birth date alone, RLdata's: "hans mueller"): at least MIN_RECORD_ID_ANCHORS
    of them, their dates differing outright in MAX_FAR_M of them or more, as no
    person's records differ on a birth date (er.match._anchors: the bound of a typed
    date). With fewer such pairs a date is taken for a person's.

    Parameters
    ----------
    table : FieldTable
        The training records' normalised values.
    fields : sequence of (kind, source), length F
        The model's fields (:func:`model_fields`).
    candidates : (left, right), ndarrays of int64, shape (p,)
        The candidate pairs' rows.
    levels : ndarray of int8, shape (p, F)
        The candidate pairs' levels.
    """
    out = []
    for d, (kind, source) in enumerate(fields):
        if kind != "text_dates" or source is None:
            continue
        column = table.fields.index(source)
        if not table.vocab[column]:
            continue
        # each value's text without its dates, numbered: equal numbers, equal texts
        rest: dict[str, int] = {}
        stripped = np.array(
            [rest.setdefault(without_dates(v), len(rest)) for v in table.vocab[column]], np.int64
        )
        a, b = (table.codes[rows, column].astype(np.int64) for rows in candidates)
        dated = levels[:, d] > 0  # both sides write a date (and so hold a value)
        same = dated & (stripped[np.maximum(a, 0)] == stripped[np.maximum(b, 0)])
        same &= _chance_sharers(table, column)[np.maximum(a, 0)] < CHANCE_SHARERS
        far = np.count_nonzero(same & (levels[:, d] == DATES_FAR))
        if same.sum() >= MIN_RECORD_ID_ANCHORS and far >= MAX_FAR_M * same.sum():
            out.append(d)
    return out


def _chance_sharers(table: FieldTable, column: int) -> NDArray[np.float64]:
    """(len(vocab),) for each value of the text column, how many of the table's records
    would hold every word of its text without dates by chance: n times the product of
    those words' shares of the records (inf for a text of dates alone). A rest of one
    word held by k records gives k: one name beside a date is never an event's."""
    vocab = table.vocab[column]
    codes = table.codes[:, column]
    held = np.bincount(codes[codes >= 0], minlength=len(vocab))  # records per value
    words = [frozenset(without_dates(v).split()) for v in vocab]
    records: Counter[str] = Counter()
    for ws, k in zip(words, held.tolist(), strict=True):
        records.update({w: k for w in ws})
    n = max(int(held.sum()), 1)
    return np.array(
        [n * math.prod(records[w] / n for w in ws) if ws else math.inf for ws in words],
        np.float64,
    )


def dates_apart(
    total: NDArray[np.float64],
    weights: NDArray[np.float64],
    levels: NDArray[np.int8],
    fields: Sequence[tuple[str, str | None]],
    temperature: float,
    one_sided: Sequence[bool] | None = None,
    undated: Sequence[bool] | None = None,
) -> NDArray[np.float64]:
    """(p,) match weights where a pair's strings write dates that are not one date: the
    views of that string counted once.

    Two records whose dates differ, where the dates are a person's (a birth date's, not
    an event's: :func:`event_dates`), are two people unless the rest says more than
    namesakes or a household's members share; and namesakes share every word of the
    string but the date, a household all but a given name and the date, so their views
    agree together as a match's do. Such a string weighs its strongest agreeing view
    plus the views that weigh against it, and its dates, as the typed fields a household
    shares are counted (er.match._dependence.shared_once); and since no evidence of the
    pair is then read twice, its total is not taken over the temperature, which exists
    for that (the prior and every other field count as they are). Never more than the
    tempered total. EM weighs its pairs so too (er.match._train), or its matches are
    namesakes. On people as one string, 2,223 of 2,606 false pairs wrote dates differing
    outright (the far level) where 14 of 8,931 true pairs did; RLdata as one string
    (names and a birth date) is resolved only so (bench/RESULTS.md, "Entity resolution
    quality on held-out sets (issue #53)").

    Parameters
    ----------
    total : ndarray of float64, shape (p,)
        The pairs' match weights: prior and fields summed (before the temperature).
    weights : ndarray of float64, shape (p, F)
    levels : ndarray of int8, shape (p, F)
    fields : sequence of (kind, source), length F
        Each model field's kind and the text field it is a view of (None: no view).
    temperature : float
    one_sided : sequence of bool, length F, optional
        Fields weighed one-sided (an event's dates: never apart); None: none.
    undated : sequence of bool, length F, optional
        Views that read their strings without dates; None: all of them. A string whose
        views read whole strings (a model fitted before that rule) keeps the rule it
        was fitted with: apart only where its dates differ outright and weigh against.
    """
    once, apart = np.array(total, np.float64), np.zeros(total.shape, bool)
    for d, (kind, source) in enumerate(fields):
        if kind != "text_dates" or (one_sided is not None and one_sided[d]):
            continue
        views = [f for f, (k, s) in enumerate(fields) if s == source and k != "text_dates"]
        if undated is None or any(undated[f] for f in views):
            here = (levels[:, d] >= DATES_FAR) & (levels[:, d] < DATES_SHARED)
        else:
            here = (levels[:, d] == DATES_FAR) & (weights[:, d] < 0)
        block = weights[here][:, views]
        once[here] += counted_once(block) - block.sum(axis=1)
        apart |= here
    return np.where(apart, np.minimum(total, temperature * once), total)


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
        field becomes its views, named ``<field>``, ``<field>:share``,
        ``<field>:rarest``, ``<field>:numbers`` and ``<field>:dates``, with ``source``
        the field they compare (None: the field itself).
    """
    views = free_text_only(kinds) if views is None else views
    out: list[tuple[str, str, str | None]] = []
    for name, kind in zip(names, kinds, strict=True):
        if views and kind == "text":
            suffixes = ("", ":share", ":rarest", ":numbers", ":dates")
            out += [(name + s, v, name) for s, v in zip(suffixes, VIEW_KINDS, strict=True)]
        else:
            out.append((name, kind, None))
    return out


def document_frequencies(
    kind: str, values: Sequence[str], undated: bool = False
) -> tuple[dict[str, float], float | None]:
    """Share of the training records whose value holds each gram (``text_grams``) or
    word (``text_share``, ``text_rarest``), for those held by two or more; and the
    floor (one over the records) for any other. None for ``text_numbers`` and
    ``text_dates``.

    Parameters
    ----------
    values : sequence of str
        The field's normalised value in each training record that has one.
    undated : bool
        Count them without their dates, as a view that reads strings so does.
    """
    if kind in ("text_numbers", "text_dates") or not values:
        return {}, None
    split = _grams if kind == "text_grams" else _words
    read = without_dates if undated else str
    counts = Counter(t for v in values for t in set(split(read(v))))  # records, not uses
    n = float(len(values))
    return {t: c / n for t, c in sorted(counts.items()) if c >= 2}, 1.0 / n


View = tuple[str, Mapping[str, float], float | None, bool]  # kind, frozen df, floor, undated


def view_levels(views: Sequence[View], left: list[str], right: list[str]) -> NDArray[np.int8]:
    """(p, len(views)) level of each pair of values (both present) in each view of one
    text field (module docstring); the values' words are gathered once for all views.

    Parameters
    ----------
    views : sequence of (kind, df, floor, undated)
        Each view's kind (one of :data:`VIEW_KINDS`), frozen document frequencies
        (:func:`document_frequencies`), and whether it reads each string without its
        dates (er.match._dates.without_dates; WITHOUT_DATES in a model fitted since
        that rule, none before).
    left, right : list of str, length p
    """
    out = np.empty((len(left), len(views)), np.int8)
    rest = left, right
    if any(undated for _, _, _, undated in views):
        rest = [without_dates(v) for v in left], [without_dates(v) for v in right]
    whole = rest == (left, right)  # no string writes a date: one reading serves every view
    words: dict[bool, _WordMatrix] = {}  # the words of each reading, gathered once
    for j, (kind, df, floor, undated) in enumerate(views):
        if kind == "text_dates":
            out[:, j] = _dates(left, right)
            continue
        stripped = undated and not whole
        x, y = rest if stripped else (left, right)
        if kind != "text_grams" and stripped not in words:
            words[stripped] = _WordMatrix(x, y)
        idf = _Idf(df, 1.0 if floor is None else floor)
        out[:, j] = _one_view(kind, x, y, words.get(stripped), idf)
    return out


def _one_view(
    kind: str, left: list[str], right: list[str], words: _WordMatrix | None, idf: _Idf
) -> NDArray[np.int8]:
    if kind == "text_grams":
        level = np.asarray(1 + np.digitize(_gram_cosine(left, right, idf), GRAM_CUTS), np.int8)
        level[[not (x and y) for x, y in zip(left, right, strict=True)]] = 0  # a date alone
        return level
    assert words is not None  # view_levels gathers them for every word view
    if kind == "text_numbers":
        return _numbers(words)
    if kind == "text_share":
        share = _share(words, idf)
        level = np.asarray(1 + np.digitize(share, SHARE_CUTS), np.int8)
        level[np.isnan(share)] = 0  # a side of words every record holds: no evidence
        return level
    return _rarest(words, idf)


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


class _WordMatrix:
    """The words of a call's distinct values as a 0/1 matrix: one row per value, one
    column per word, columns in sorted word order (so a pair's sums run in the same
    order whatever else the call holds, and a replay gets the same bits), and each
    pair's two rows ``a`` and ``b`` (shape (p,))."""

    def __init__(self, left: list[str], right: list[str]) -> None:
        values = sorted(set(left) | set(right))
        row = {v: i for i, v in enumerate(values)}
        self.words = sorted({w for v in values for w in _words(v)})
        column = {w: j for j, w in enumerate(self.words)}
        indptr, indices = [0], []
        for v in values:
            indices += sorted(column[w] for w in _words(v))
            indptr.append(len(indices))
        shape = (len(values), max(len(self.words), 1))
        cols = np.asarray(indices, np.int64)
        self.held = sparse.csr_array((np.ones(cols.size), cols, np.asarray(indptr)), shape=shape)
        self.rows = np.repeat(np.arange(len(values), dtype=np.int64), np.diff(indptr))  # per entry
        # each entry as one key, ascending (rows, then sorted columns): for holds()
        self.keys = self.rows * shape[1] + cols
        self.a = np.array([row[v] for v in left], np.int64)
        self.b = np.array([row[v] for v in right], np.int64)

    def weighted(self, weight: NDArray[np.float64]) -> sparse.csr_array:
        """The matrix with each word's entries ``weight[word]`` (shape (n_words,))."""
        out = self.held.copy()
        out.data = weight[out.indices] if weight.size else out.data
        return out

    def holds(self, rows: NDArray[np.int64], cols: NDArray[np.int64]) -> NDArray[np.bool_]:
        """(p,) whether value ``rows[i]`` holds word ``cols[i]`` (-1: no word)."""
        keys = self.keys
        if keys.size == 0:
            return np.zeros(rows.shape, bool)
        want = rows * self.held.shape[1] + cols
        at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        found: NDArray[np.bool_] = (cols >= 0) & (keys[at] == want)
        return found


def _row_sums(X: sparse.csr_array) -> NDArray[np.float64]:
    return np.asarray(X.sum(axis=1), np.float64).ravel()


def _share(words: _WordMatrix, idf: _Idf) -> NDArray[np.float64]:
    """(p,) the shared words' idf weight over the lighter side's; nan when a side
    weighs 0."""
    weight = np.array([idf(w) for w in words.words], np.float64)
    W = words.weighted(weight)
    mass = _row_sums(W)
    shared = _row_sums(W[words.a].multiply(words.held[words.b]))
    lighter = np.minimum(mass[words.a], mass[words.b])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lighter > 0, shared / np.where(lighter > 0, lighter, 1.0), np.nan)


def _rarest(words: _WordMatrix, idf: _Idf) -> NDArray[np.int8]:
    """(p,) 1 + how many of the two sides' rarest words the other side holds; 0 when a
    side has no word. A value's rarest word: highest idf, ties to the alphabetically
    last (the highest column)."""
    held, rows = words.held, words.rows
    weight = np.array([idf(w) for w in words.words], np.float64)
    cols = held.indices.astype(np.int64)
    rarest = np.full(held.shape[0], -1, np.int64)
    if cols.size:
        order = np.lexsort((cols, weight[cols], rows))  # the last of each row is its rarest
        last = order[np.r_[np.flatnonzero(np.diff(rows[order])), order.size - 1]]
        rarest[rows[last]] = cols[last]
    ra, rb = rarest[words.a], rarest[words.b]
    level = 1 + words.holds(words.b, ra).astype(np.int8) + words.holds(words.a, rb)
    level[(ra < 0) | (rb < 0)] = 0
    return np.asarray(level, np.int8)


def _numbers(words: _WordMatrix) -> NDArray[np.int8]:
    """(p,) 0 when a side has no number (digit word), 2 when they share one, else 1."""
    digits = np.array([w.isdigit() for w in words.words], np.float64)
    D = words.weighted(digits)
    has = _row_sums(D) > 0
    shared = _row_sums(D[words.a].multiply(D[words.b])) > 0
    level = np.where(shared, 2, 1).astype(np.int8)
    level[~(has[words.a] & has[words.b])] = 0
    return level


def _dates(left: list[str], right: list[str]) -> NDArray[np.int8]:
    """(p,) 0 when a side writes no date; else 1 far, 2 two digits off, 3 one digit off
    or day and month swapped, 4 a date shared (the ``date`` field's ladder)."""
    out = np.zeros(len(left), np.int8)
    both: list[int] = []
    xs: list[str] = []
    ys: list[str] = []
    for i, (x, y) in enumerate(zip(left, right, strict=True)):
        a, b = dates_in(x), dates_in(y)
        if a is not None and b is not None:
            both.append(i)
            xs.append(a)
            ys.append(b)
    if both:
        out[both] = DATES_FAR + 3 - np.minimum(date_edits(xs, ys), 3)
    return out


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
