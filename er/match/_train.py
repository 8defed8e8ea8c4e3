"""Training a pair model: u from random pairs, m and the prior by EM or from gold.

Unsupervised (the default), as Fellegi-Sunter models are usually fitted in practice
(Winkler 1988; Splink's documented procedure does the same):

1. u_f: level frequencies over random record pairs of the training sample. Almost
   every random pair is a non-match, so this estimates P(level | non-match) directly
   and keeps EM from drifting towards whatever structure dominates the candidates.
2. m_f and the prior: expectation-maximisation over every pair of the training sample,
   u held fixed. The prior is P(match) for a *random* pair, the one u belongs with:
   the candidates are chosen by the same fields the model compares, so a candidate's
   P(match | levels) is any pair's with those levels. Pairs the index did not propose
   are taken as non-matches (their posterior is ~0 under any sensible fit), so the
   sums run over the candidates and the prior divides by all n(n-1)/2 pairs.
   (Using the candidates' own match share as the prior with the random-pair u, as
   er did first, counts every near non-match among the candidates as a match: on
   PATSTAT that prior was 0.96 where the truth is 0.84, and Leipzig's 0.85 for 0.50;
   bench/HISTORY.md.) Term frequencies are left out of EM and applied at scoring
   time only.

3. Where entities are larger than the candidate lists, the transitive closure of EM's
   matches adds the matching pairs outside the candidates to the prior and takes them
   out of u (CLOSURE_P below).

With gold labels, m_f is counted over candidate pairs of one gold entity, u_f over
random pairs of different ones, and the prior is the matching share of all pairs.
Every count is smoothed by half a pair per level (Jeffreys), so an unseen level never
weighs infinitely much.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from er.match._anchors import Anchors, anchored, anchors_of, bounded, record_ids
from er.match._compare import LADDERS
from er.match._dependence import (
    PatternCounts,
    count_patterns,
    dependence_bits,
    field_blocks,
    fit_dependence,
    households_seen,
    shared_block,
    shared_once,
)
from er.match._model import FieldWeights, PairModel, level_bits, one_sided_fields
from er.match._table import FieldTable
from er.match._views import (
    VIEW_TEMPERATURE,
    WITHOUT_DATES,
    dates_apart,
    document_frequencies,
    event_dates,
    model_fields,
)

__all__ = ["random_pairs", "train_pair_model"]

EM_ITERATIONS = 300
# EM cannot find m when the training sample holds (almost) no duplicates, e.g. a
# stream whose first records are all originals (FEBRL4), or when one short field is
# all it compares (Leipzig's affiliations, whose fit finds no matches at all). Such
# a fit is refused for the starting m (exact agreement likely for matches) with a
# prior of FALLBACK_DUPLICATES duplicate per record: 1 / (n - 1) for a random pair;
# u stays estimated.
FALLBACK_DUPLICATES = 1.0
M_PSEUDO_PAIRS = 10.0  # weight of the starting m in each M step (a Dirichlet prior)
EM_TOLERANCE = 1e-6
MIN_PRIOR = 1e-12  # a random pair's match prior: 1e-12 is one in 2^40
# every pair of a first batch of 1,000: the dependence correction needs the rare
# patterns (households) counted, not sampled away
RANDOM_PAIRS = 500_000
# EM and the dependence correction alternate: EM with the patterns corrected so far,
# then the patterns recounted under its m and prior (er.match._dependence)
DEPENDENCE_ROUNDS = 4
# Entities larger than the candidate lists (a firm's hundreds of patents among k = 10
# neighbours) hold most of their matching pairs outside the candidates, which EM takes
# for non-matches: its prior comes out a tenth of the true one on PATSTAT, and the
# random pairs behind u, one in twelve of them a match there, make an exact name weak
# evidence. When the transitive closure of the pairs EM calls matches (posterior at
# least CLOSURE_P) implies more matching pairs outside the candidates than EM found
# inside them, EM is run again with those pairs counted in its prior and the random
# pairs inside one closure component left out of u, up to CLOSURE_ROUNDS times. With
# small entities (people, FEBRL) the closure implies less than EM found, and nothing
# changes; it starts from pairs EM already calls matches, so where EM calls none
# nothing changes either. The closure can chain entities together: a round whose
# largest component grows more than CHAIN_GROWTH times is not kept. Chosen on PATSTAT,
# the one set with entities this large (bench/HISTORY.md, 2026-11-25).
CLOSURE_P = 0.5
CLOSURE_ROUNDS = 3
CHAIN_GROWTH = 2.0


def random_pairs(n: int, count: int, seed: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Up to ``count`` distinct unordered pairs of distinct rows of 0..n-1 (seeded).

    Returns
    -------
    left, right : ndarray of int64, shape (p,)
        left < right.
    """
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    total = n * (n - 1) // 2
    rng = np.random.default_rng(seed)
    if total <= count:
        i, j = np.triu_indices(n, 1)
        return i.astype(np.int64), j.astype(np.int64)
    a = rng.integers(0, n, 2 * count)
    b = rng.integers(0, n, 2 * count)
    keep = a != b
    lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    key = np.unique(lo * n + hi)[:count]
    return key // n, key % n


def train_pair_model(
    table: FieldTable,
    kinds: Sequence[str],
    candidates: tuple[NDArray[np.int64], NDArray[np.int64]],
    *,
    gold: Sequence[object] | None = None,
    seed: int = 0,
    version: int = 1,
    views: bool | None = None,
) -> PairModel:
    """Fit a pair model on the records of ``table``.

    Parameters
    ----------
    table : FieldTable
        Normalised values of the training records.
    kinds : sequence of str
        Type of each of the table's fields.
    candidates : (left, right), ndarrays of int64, shape (p,)
        Candidate pairs among the table's rows (the index's k nearest neighbours).
    gold : sequence, length len(table), optional
        Gold entity of each row: count m and u instead of estimating them.
    seed : int
        Seed of the random pairs behind u.
    version : int
        Version number the model carries.
    views : bool, optional
        Compare ``text`` fields in views (:func:`er.match._views.model_fields`);
        default: when the collection's only identity is free text.
    """
    protos = [
        _blank(name, kind, source, table)
        for name, kind, source in model_fields(table.fields, kinds, views)
    ]
    kinds = [p.kind for p in protos]  # the model's fields: views of free text expanded
    proto = PairModel(fields=tuple(protos), prior=0.5)
    left, right = candidates
    cand_levels = proto.levels(table, left, right)
    rl, rr = random_pairs(len(table), RANDOM_PAIRS, seed)
    if gold is not None:
        labels = np.unique(np.asarray(gold, dtype=object).astype(str), return_inverse=True)[1]
        rand_match = labels[rl] == labels[rr]
        rl, rr = rl[~rand_match], rr[~rand_match]
    rand_levels = proto.levels(table, rl, rr)
    n = len(table)
    total = max(n * (n - 1) // 2, 1)
    blocks = field_blocks(kinds)
    sides = one_sided_fields(kinds)
    n_levels = [len(p.m) for p in protos]
    ids, anchor_kinds = record_ids(cand_levels, kinds, n_levels)
    compared = [(p.kind, p.source) for p in protos]
    for f in ids + event_dates(table, compared, candidates, cand_levels):
        sides[f] = True  # a row's or a form's id, an event's date: context, not who it is
    anchors = anchors_of(cand_levels, anchor_kinds, n_levels)
    # a string's dates that are a person's, bounded as a typed date's (MAX_FAR_M)
    dates = [f for f, k in enumerate(kinds) if k == "text_dates" and not sides[f]]
    anchors = replace(anchors, strict=anchors.strict + tuple(dates))
    if gold is not None:
        u = [_frequencies(rand_levels[:, f], len(p.m)) for f, p in enumerate(protos)]
        patterns = _pattern_counts(rand_levels, (rl, rr), cand_levels, candidates, n)
        match = (labels[left] == labels[right]).astype(np.float64)
        m = [_frequencies(cand_levels[:, f], len(p.m), match) for f, p in enumerate(protos)]
        sizes = np.bincount(labels)
        prior = _clip_prior(float((sizes * (sizes - 1) // 2).sum()) / total)
        # the random pairs hold no match here: every excess is non-match dependence
        dependence = fit_dependence(
            patterns, cand_levels, match, m, u, 0.0, blocks, shared_block(kinds)
        )
        method = "gold"
    else:
        blank_m = [np.asarray(p.m) for p in protos]
        fit = _fit_unsupervised(
            cand_levels,
            candidates,
            blank_m,
            rand_levels,
            (rl, rr),
            n,
            sides,
            (blocks, kinds, compared if proto.compares_views else []),
            anchors,
        )
        m, u, prior, dependence = fit.m, fit.u, fit.prior, fit.dependence
        method = "em"
        if not _plausible(m, u, prior, total, sides):
            fallback = _clip_prior(FALLBACK_DUPLICATES / max(n - 1, 1))
            m, prior, method, dependence = blank_m, fallback, "prior", {}
    fields = tuple(
        replace(
            p,
            m=tuple(mf.tolist()),
            u=tuple(uf.tolist()),
            tf=tf,
            tf_floor=floor,
            one_sided=side,
        )
        for p, mf, uf, side in zip(protos, m, u, sides, strict=True)
        for tf, floor in [table.frequencies(p.name) if p.source is None else ({}, None)]
    )
    return PairModel(
        fields,
        prior,
        version=version,
        method=method,
        n_train=n,
        dependence=dependence,
        temperature=VIEW_TEMPERATURE if proto.compares_views else 1.0,
    )


# a fit's fields: the dependence blocks, each field's kind, each (kind, source) in views
Fields = tuple[list[list[int]], Sequence[str], Sequence[tuple[str, str | None]]]


@dataclass
class _Fit:
    """One unsupervised fit: m, u, the prior, the dependence correction, and each
    candidate's match posterior."""

    m: list[NDArray[np.float64]]
    u: list[NDArray[np.float64]]
    prior: float
    dependence: dict[int, float]
    post: NDArray[np.float64]


def _fit_unsupervised(
    cand_levels: NDArray[np.int8],
    candidates: tuple[NDArray[np.int64], NDArray[np.int64]],
    blank_m: list[NDArray[np.float64]],
    rand_levels: NDArray[np.int8],
    rand: tuple[NDArray[np.int64], NDArray[np.int64]],
    n: int,
    one_sided: Sequence[bool],
    fields: Fields,
    anchors: Anchors | None = None,
) -> _Fit:
    """m, u, the prior and the dependence correction without labels (module docstring):
    EM alternating with the dependence correction; then, while the closure of EM's
    matches implies more matches outside the candidates than inside, EM again with
    them (CLOSURE_P). A closure round is kept only if its fit is plausible and its
    largest component did not grow more than CHAIN_GROWTH times (else the previous
    fit stands), so the first fit, with u from every random pair, is the fallback.

    Parameters
    ----------
    cand_levels, rand_levels : ndarray of int8, shape (p, n_fields) and (r, n_fields)
        Levels of the candidate pairs and of the random pairs.
    candidates, rand : (left, right), ndarrays of int64, shapes (p,) and (r,)
    blank_m : list of ndarray, one (n_levels_f,) per field
        EM's starting m (_blank).
    n : int
        Records in the sample.
    one_sided : sequence of bool, one per field
    fields : (blocks, kinds, strings)
        Field blocks of the dependence correction (er.match._dependence.field_blocks);
        the type of each field: which of them a household shares
        (er.match._dependence.shared_block, households_seen; none when empty); and
        each field's (kind, source) where free text is compared in views, whose pairs
        EM weighs as scoring does (er.match._views.dates_apart), else empty.
    anchors : Anchors, optional
        The candidates each field's m is counted on (er.match._anchors).
    """
    rl, rr = rand
    n_levels = [mf.size for mf in blank_m]
    patterns = _pattern_counts(rand_levels, rand, cand_levels, candidates, n)
    u = [_frequencies(rand_levels[:, f], k) for f, k in enumerate(n_levels)]
    total = max(n * (n - 1) // 2, 1)
    fit = _em_rounds(
        cand_levels, blank_m, u, total, one_sided, (patterns, None), fields, None, 0.0, anchors
    )
    largest = None
    for _ in range(CLOSURE_ROUNDS):
        labels, size, beyond = _closure(n, candidates, fit.post)
        if beyond <= fit.post.sum():  # small entities: the candidates hold their matches
            break
        if largest is not None and size > CHAIN_GROWTH * largest:
            break
        keep = labels[rl] != labels[rr]
        u = [_frequencies(rand_levels[keep, f], k) for f, k in enumerate(n_levels)]
        # the correction counts the pairs across components, whose matches are the
        # candidates across them (those inside are the closure's)
        across = labels[candidates[0]] != labels[candidates[1]]
        net = _pattern_counts(rand_levels, rand, cand_levels, candidates, n, labels)
        again = _em_rounds(
            cand_levels, blank_m, u, total, one_sided, (net, across), fields, fit, beyond, anchors
        )
        if not _plausible(again.m, again.u, again.prior, total, one_sided):
            break
        fit, largest = again, size
    return fit


def _em_rounds(
    cand_levels: NDArray[np.int8],
    blank_m: list[NDArray[np.float64]],
    u: list[NDArray[np.float64]],
    total: int,
    one_sided: Sequence[bool],
    counted: tuple[PatternCounts, NDArray[np.bool_] | None],
    fields: Fields,
    start: _Fit | None,
    beyond: float,
    anchors: Anchors | None = None,
) -> _Fit:
    """EM and the dependence correction in turn, DEPENDENCE_ROUNDS times, from ``start``
    (None: the starting m and no correction), over ``total`` pairs. ``counted``: the
    pattern counts, and which candidates they hold (None: every one). ``fields``: the
    correction's blocks of matches (field_blocks), each field's type (from the round
    whose correction shows households, households_seen, EM counts the fields they
    share, shared_block, once) and the strings in views (_fit_em's ``strings``)."""
    patterns, held = counted
    blocks, kinds, strings = fields
    shared = shared_block(kinds)
    m = blank_m if start is None else start.m
    dependence = {} if start is None else start.dependence
    prior, post = 0.5, np.zeros(cand_levels.shape[0])
    for round_ in range(DEPENDENCE_ROUNDS):
        offset = dependence_bits(dependence, cand_levels)
        m, prior, post = _fit_em(
            cand_levels,
            blank_m,
            u,
            total,
            one_sided=one_sided,
            offset=offset,
            start=m,
            beyond=beyond,
            anchors=anchors,
            shared=shared if households_seen(dependence, kinds) else (),
            strings=strings,
        )
        # the first count judges patterns by the starting m: EM's first fit has
        # taken the households for matches (their names and dates "disagree" in
        # a third of its matches), and would explain them away
        judge = blank_m if round_ == 0 and start is None else m
        among = prior if held is None else _clip_prior(post[held].sum() / max(patterns.n_pairs, 1))
        shared_post = None if anchors is None or anchors.shared is None else post * anchors.shared
        dependence = fit_dependence(
            patterns, cand_levels, post, judge, u, among, blocks, shared, shared_post
        )
    return _Fit(m, u, prior, dependence, post)


def _closure(
    n: int, candidates: tuple[NDArray[np.int64], NDArray[np.int64]], post: NDArray[np.float64]
) -> tuple[NDArray[np.int64], int, float]:
    """Entities as EM sees them: the connected components of the candidate pairs whose
    match posterior is at least CLOSURE_P.

    Returns
    -------
    labels : ndarray of int64, shape (n,)
        Component of each record.
    largest : int
        Records in the largest component.
    beyond : float
        Matching pairs the components imply outside the candidates.
    """
    left, right = candidates
    sure = post >= CLOSURE_P
    graph = sparse.coo_array((np.ones(int(sure.sum())), (left[sure], right[sure])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    sizes = np.bincount(labels).astype(np.float64)
    implied = float((sizes * (sizes - 1) / 2).sum())
    inside = float((labels[left] == labels[right]).sum())
    return labels.astype(np.int64), int(sizes.max()), max(implied - inside, 0.0)


def _pattern_counts(
    rand_levels: NDArray[np.int8],
    rand: tuple[NDArray[np.int64], NDArray[np.int64]],
    cand_levels: NDArray[np.int8],
    cand: tuple[NDArray[np.int64], NDArray[np.int64]],
    n: int,
    labels: NDArray[np.int64] | None = None,
) -> PatternCounts:
    """The agreement patterns of all n(n-1)/2 pairs of the sample, for the dependence
    correction: counted over all of them when the random pairs are all of them, else
    stratified (every candidate pair once, the random pairs that are not candidates
    each standing for its share of the other pairs). With closure ``labels`` (_closure),
    the pairs across two components only.

    A household's pairs are nearly all among the candidates (they agree on several
    fields the candidate vectors are made of), and random pairs find them at a rate
    that falls as 1/n: at 20,000 records, 500,000 random pairs hold a few dozen of a
    household pattern's thousands, too few to tell it from chance.
    """
    total = n * (n - 1) // 2
    everything = rand_levels.shape[0] >= total
    (rl, rr), (cl, cr) = rand, cand
    if labels is not None:  # pairs inside one component left out
        sizes = np.bincount(labels)
        total -= int((sizes * (sizes - 1) // 2).sum())
        across, cand_across = labels[rl] != labels[rr], labels[cl] != labels[cr]
        rand_levels, rl, rr = rand_levels[across], rl[across], rr[across]
        cand_levels, cl, cr = cand_levels[cand_across], cl[cand_across], cr[cand_across]
    if everything or cand_levels.shape[0] == 0:
        return count_patterns(rand_levels)
    others = rand_levels[~np.isin(rl * n + rr, np.minimum(cl, cr) * n + np.maximum(cl, cr))]
    n_cand = cand_levels.shape[0]
    weight = (total - n_cand) / max(others.shape[0], 1)
    weights = np.r_[np.ones(n_cand), np.full(others.shape[0], weight)]
    return count_patterns(np.concatenate([cand_levels, others]), weights, n_pairs=total)


def _blank(name: str, kind: str, source: str | None, table: FieldTable) -> FieldWeights:
    """Starting m (:func:`starting_m`) and u (far most likely for non-matches) of a
    field of type ``kind``; a view of free text (``source`` not None) with its document
    frequencies counted on the table's records."""
    n = LADDERS[kind].n_levels
    m = starting_m(n)
    u = np.full(n, 0.05 / max(n - 2, 1))
    u[1] = 0.95
    u[0] = 1.0
    out = FieldWeights(name=name, kind=kind, m=tuple(m), u=tuple(u), source=source)
    if source is None:
        return out
    undated = kind in WITHOUT_DATES  # read as view_levels reads them
    df, floor = document_frequencies(kind, _present(table, table.fields.index(source)), undated)
    return replace(out, df=df, df_floor=floor, undated=undated)


def _present(table: FieldTable, c: int) -> list[str]:
    """The values of column ``c`` of the records that have one."""
    codes = table.codes[:, c]
    return [table.vocab[c][v] for v in codes[codes >= 0].tolist()]


def starting_m(n_levels: int) -> NDArray[np.float64]:
    """EM's starting m over a ladder of ``n_levels`` (index 0 missing, 1 far, the last
    exact): exact most likely for matches (0.7), the close levels next (0.2 between
    them, the closer more), far least (0.1).

    Returns
    -------
    ndarray of float64, shape (n_levels,)
        Missing's entry is 1 (missing is no evidence, never a level EM weighs).
    """
    m = np.zeros(n_levels)
    m[0], m[1] = 1.0, 0.1
    if n_levels > 3:
        closeness = np.arange(1, n_levels - 2, dtype=np.float64)
        m[2 : n_levels - 1] = 0.2 * closeness / closeness.sum()
        m[-1] = 0.7
    else:
        m[-1] = 0.9
    return m


def _plausible(
    m: list[NDArray[np.float64]],
    u: list[NDArray[np.float64]],
    prior: float,
    total: int,
    one_sided: Sequence[bool],
) -> bool:
    """A fit whose "match" class is one: in most fields exact agreement is evidence for
    it (its weight above the far level's), it expects at least one matching pair in
    the sample, and not half of all pairs."""
    better = [
        w[-1] > w[1]
        for mf, uf, side in zip(m, u, one_sided, strict=True)
        for w in [level_bits(mf, uf, side)]
    ]
    return prior * total >= 1.0 and prior < 0.5 and sum(better) > len(better) / 2


def _clip_prior(prior: float) -> float:
    return float(np.clip(prior, MIN_PRIOR, 0.5))


def _frequencies(
    levels: NDArray[np.int8],
    n_levels: int,
    weight: NDArray[np.float64] | None = None,
    pseudo: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """(n_levels,) smoothed share of each non-missing level; index 0 set to 1.

    ``pseudo`` adds prior counts per level (EM's pull towards its starting m)."""
    w = np.ones(levels.size) if weight is None else weight
    counts = np.bincount(levels, weights=w, minlength=n_levels)[:n_levels].astype(np.float64)
    counts[0] = 0.0
    counts[1:] += 0.5
    if pseudo is not None:
        counts[1:] += pseudo[1:]
    out = counts / counts[1:].sum()
    out[0] = 1.0
    return np.asarray(out, np.float64)


def _fit_em(
    levels: NDArray[np.int8],
    m0: list[NDArray[np.float64]],
    u: list[NDArray[np.float64]],
    total: int | None = None,
    *,
    one_sided: Sequence[bool] | None = None,
    offset: NDArray[np.float64] | None = None,
    start: list[NDArray[np.float64]] | None = None,
    beyond: float = 0.0,
    anchors: Anchors | None = None,
    shared: Sequence[int] = (),
    strings: Sequence[tuple[str, str | None]] = (),
) -> tuple[list[NDArray[np.float64]], float, NDArray[np.float64]]:
    """EM for m and the prior with u fixed.

    Parameters
    ----------
    levels : ndarray of int8, shape (p, n_fields)
        Levels of the candidate pairs.
    m0, u : list of ndarray, one (n_levels_f,) per field
        m0: the starting m, and the pull of each M step (M_PSEUDO_PAIRS pairs).
    total : int, optional
        Number of pairs the candidates were drawn from, the rest taken as non-matches
        (module docstring); None: the candidates are all the pairs.
    one_sided : sequence of bool, optional
        Fields whose weights are one-sided in EM as in scoring
        (er.match._model.level_bits); None: none.
    beyond : float
        Matching pairs outside the candidates, counted in the prior (_closure).
    offset : ndarray of float64, shape (p,), optional
        Bits added to each pair's weight (the dependence correction).
    start : list of ndarray, optional
        Starting m other than m0 (a previous fit).
    anchors : Anchors, optional
        The candidates each field's m is counted on (er.match._anchors); a field
        whose anchors hold too few expected matches, or None, is counted on every
        candidate. Its strict fields' far m is bounded (er.match._anchors.bounded).
    shared : sequence of int, optional
        The fields a household shares, counted once as in scoring where the sample
        shows households (er.match._dependence.shared_once).
    strings : sequence of (kind, source), optional
        Each field's kind and the text it is a view of: a string whose dates differ
        counted once, as in scoring (er.match._views.dates_apart, untempered); (): none.

    Returns
    -------
    m : list of ndarray
    prior : float
        P(match) for one of the ``total`` pairs.
    posterior : ndarray of float64, shape (p,)
        Each candidate's match posterior under the returned fit.
    """
    m = [x.copy() for x in (start if start is not None else m0)]
    pseudo = [M_PSEUDO_PAIRS * x / x[1:].sum() for x in m0]
    p = levels.shape[0]
    total = p if total is None else max(total, p)
    prior = _clip_prior(0.5 * p / max(total, 1))
    extra = np.zeros(p) if offset is None else offset
    post = np.zeros(p)
    if p == 0:
        return m, prior, post
    sides = list(one_sided) if one_sided is not None else [False] * len(m)
    for _ in range(EM_ITERATIONS):
        bits = np.stack([level_bits(m[f], u[f], sides[f])[levels[:, f]] for f in range(len(m))], 1)
        w = np.log2(prior / (1 - prior)) + shared_once(bits, shared, extra)
        if strings:
            w = dates_apart(w, bits, levels, strings, 1.0, sides)
        post = 1.0 / (1.0 + np.exp2(-np.clip(w, -60, 60)))
        new_m = bounded(
            [
                _frequencies(levels[:, f], len(m[f]), anchored(post, anchors, f), pseudo[f])
                for f in range(len(m))
            ],
            anchors,
        )
        new_prior = _clip_prior((float(post.sum()) + beyond) / total)
        shift = max(float(np.abs(a - b).max()) for a, b in zip(new_m, m, strict=True))
        # the prior's change relative to itself: it may be 1e-4 or 0.4
        shift = max(shift, abs(new_prior - prior) / prior)
        m, prior = new_m, new_prior
        if shift < EM_TOLERANCE:
            break
    return m, prior, post
