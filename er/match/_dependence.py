"""Dependent agreement among non-matches: the households a field-wise model merges.

Fellegi-Sunter multiplies the fields' u as if two different people agreed on each
field independently. They do not: two members of one household share a surname, an
address, its suburb and postcode, often a phone and an e-mail domain. Under
independence that pattern is about 2^-40 likely for a non-match; among random pairs of
a real collection it is about 2^-15, and a model that believes the former calls every
household one person. Worse, EM then explains the household pairs as matches, and
learns that a match's date of birth or national id disagrees 20-25% of the time
(counted from gold labels: 0.2-0.4%; ``bench/HISTORY.md``).

The correction works on agreement patterns (per field: agree, at any close level or
exact, or not: far or missing) over all fields at once. A missing value counts as not
agreeing here, so that a household's records with a phone or an e-mail left out fall
under one pattern instead of many too rare to count (on the tuning people: F1 hard
0.834 -> 0.845, medium 0.920 -> 0.929 against a third symbol for missing).

Among N random pairs of the training sample, a pattern seen c times is expected

    mu = N * prior * m(pattern) + N * (1 - prior) * u_ind(pattern)

times, m and u_ind being the model's own per-field probabilities multiplied. Where c
exceeds mu far beyond chance (c > mu + 4 sqrt(mu) + 3) and matches explain under a
tenth of c, the excess is non-match mass the independent u misses:

    u(pattern) = (c - N * prior * m(pattern)) / (N * (1 - prior))

and every pair with that pattern gets log2(u_ind / u) more bits (a negative number).
Patterns seen too rarely to tell keep the independent u: the correction only ever
uses evidence the sample holds.

Matches have dependent errors too, and those must not be mistaken for non-matches: a
person who moved disagrees on the address, suburb, postcode and state together; a
record with given name and surname swapped disagrees on both. So m(pattern) treats the
fields of a place (address, place, postcode, and category fields beside them) as one
block and a record's person-name fields as another, each block's joint pattern counted
over the candidates weighted by their match posterior; other fields multiply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from er.match._anchors import STRICT_KINDS

__all__ = [
    "PatternCounts",
    "count_patterns",
    "field_blocks",
    "fit_dependence",
    "households_seen",
    "pattern_keys",
    "shared_block",
    "shared_once",
]

SYMBOLS = 2  # per field: 0 not agreeing (far or missing), 1 agreeing
SIGNIFICANCE_Z = 4.0  # standard deviations (Poisson) a pattern's excess must exceed
SIGNIFICANCE_MIN = 3.0  # and this many pairs
MATCH_SHARE_MAX = 0.1  # matches explain less than this share of the pattern's count
PLACE_KINDS = frozenset({"address", "place", "postcode"})
# What the members of one household share: a place and its contacts (issue #53).
SHARED_KINDS = PLACE_KINDS | {"phone", "email"}
# A home and its contacts: non-matches that agree on one of these and another shared
# field share a household; a suburb and a state agreeing are neighbours.
DWELLING_KINDS = frozenset({"address", "phone", "email"})
MAX_SHARED = 12  # fields of the shared block at most (4,096 joint patterns)
# a pattern's key holds one bit per field in an int64: a model of more fields (a wide
# export, or many free-text fields in five views each) gets no correction at all,
# rather than keys that wrap around and patterns that collide
MAX_FIELDS = 62


def agreement(levels: NDArray[np.int8]) -> NDArray[np.int64]:
    """(p, F) levels -> 1 where the field agrees (a close level or exact), else 0."""
    return (levels >= 2).astype(np.int64)


def pattern_keys(levels: NDArray[np.int8]) -> NDArray[np.int64]:
    """(p,) key of each pair's agreement pattern over all fields (bit f: field f agrees).

    Parameters
    ----------
    levels : ndarray of int8, shape (p, F)
        F <= 62 (keys fit in int64).
    """
    return _keys(agreement(levels))


def _keys(symbols: NDArray[np.int64]) -> NDArray[np.int64]:
    key = np.zeros(symbols.shape[0], np.int64)
    for f in range(symbols.shape[1]):
        key = key * SYMBOLS + symbols[:, f]
    return key


def field_blocks(kinds: Sequence[str]) -> list[list[int]]:
    """Fields whose errors move together in matches: a place (its address, place and
    postcode fields, with any category fields beside them, e.g. a state) and a person's
    names (given name and surname, which records swap). Blocks of one field are none."""
    place = [f for f, k in enumerate(kinds) if k in PLACE_KINDS]
    if place:
        place += [f for f, k in enumerate(kinds) if k == "category"]
    names = [f for f, k in enumerate(kinds) if k == "person_name"]
    return [sorted(b) for b in (place, names) if len(b) > 1]


def shared_block(kinds: Sequence[str]) -> list[int]:
    """The fields a household shares (SHARED_KINDS, with the category fields beside a
    place), whose agreement among non-matches is corrected as one block before the
    whole pattern (:func:`fit_dependence`); [] for fewer than two."""
    block = [f for f, k in enumerate(kinds) if k in SHARED_KINDS]
    if any(kinds[f] in PLACE_KINDS for f in block):
        block += [f for f, k in enumerate(kinds) if k == "category"]
    block = block[:MAX_SHARED]  # its 2^B patterns are enumerated: categories go first
    return sorted(block) if len(block) > 1 else []


def households_seen(corrections: Mapping[int, float], kinds: Sequence[str]) -> bool:
    """Whether a learned correction lowers a pattern in which two or more of the
    shared fields (:func:`shared_block`) agree, one of them naming a home or its
    contacts (DWELLING_KINDS), and no date or identifier agrees: this collection's
    non-matches share homes (households), and :func:`shared_once` applies. Two people
    of one household share the home, not a birth date and an id; a pattern that agrees
    on those as well is one person's records (FEBRL3 thinned: matches whose two names
    were both mistyped). A collection without households (FEBRL's records, each
    person's own address and phone; its one correction a suburb and a state agreeing,
    neighbours) keeps the fields' sum: there, two agreeing fields are twice the
    evidence.

    Parameters
    ----------
    corrections : mapping
        Pattern key -> bits (:func:`fit_dependence`).
    kinds : sequence of str
        The type of each of the F fields the keys cover.
    """
    shared = shared_block(kinds)
    dwelling = [f for f in shared if kinds[f] in DWELLING_KINDS]
    if len(shared) < 2 or not dwelling or not corrections:
        return False
    strict = [f for f, k in enumerate(kinds) if k in STRICT_KINDS]
    keys = np.array(sorted(corrections), np.int64)
    symbols = _decode(keys, len(kinds))
    agree = symbols[:, shared].sum(axis=1) >= 2
    home = symbols[:, dwelling].any(axis=1)
    person = symbols[:, strict].any(axis=1)
    bits = np.array([corrections[k] for k in keys.tolist()])
    return bool(np.any(agree & home & ~person & (bits < 0)))


def shared_once(
    weights: NDArray[np.float64], shared: Sequence[int], correction: NDArray[np.float64]
) -> NDArray[np.float64]:
    """(p,) each pair's field weights summed with its pattern's correction, a
    household's shared fields counted as one piece of evidence.

    Two different people agree on several of a household's fields together about as
    often as they agree on the rarest one (they share the household): so where the
    shared fields agree, the block weighs its strongest agreeing field, plus the fields
    it disagrees on, never more than its weights summed with the learned correction.
    The rarest field's u and the random-pair prior both fall as 1/n, so a household
    pair's probability holds as the collection grows, where the sum of k such fields
    gains (k - 1) log2(n) bits over the prior and outgrows a correction counted on a
    sample (issue #53; bench/RESULTS.md, "Entity resolution quality on held-out sets
    (issue #53)").

    Parameters
    ----------
    weights : ndarray of float64, shape (p, F)
        Each pair's per-field weights in bits.
    shared : sequence of int
        :func:`shared_block` where :func:`households_seen` (none: the plain sum).
    correction : ndarray of float64, shape (p,)
        Each pair's learned correction (:func:`dependence_bits`).
    """
    total = np.asarray(weights.sum(axis=1) + correction, np.float64)
    if len(shared) < 2:
        return total
    block = weights[:, list(shared)]
    summed = block.sum(axis=1) + correction
    return np.asarray(total - summed + np.minimum(summed, counted_once(block)), np.float64)


def counted_once(block: NDArray[np.float64]) -> NDArray[np.float64]:
    """(p,) a block of fields (p, k) read as one piece of evidence: its strongest
    agreeing field (none: 0) plus every field that weighs against."""
    return np.asarray(
        np.maximum(block.max(axis=1, initial=0.0), 0.0) + np.minimum(block, 0.0).sum(axis=1),
        np.float64,
    )


@dataclass(frozen=True)
class PatternCounts:
    """The agreement patterns of a set of random pairs, counted once for every round
    of training (:func:`count_patterns`).

    Attributes
    ----------
    n_pairs : int
        N, the random pairs counted.
    keys : ndarray of int64, shape (k,)
        Each pattern seen (:func:`pattern_keys`).
    counts : ndarray of float64, shape (k,)
        How many of the N pairs show it (estimated, where the pairs were sampled).
    symbols : ndarray of int64, shape (k, F)
        Each pattern's agreement per field.
    present : ndarray of float64, shape (F,)
        Share of the pairs with both values present, per field.
    scale : ndarray of float64, shape (k,)
        Pairs one counted row of the pattern stands for, on average (1 where every
        pair was counted; a sampled pattern's excess must show in its rows).
    """

    n_pairs: int
    keys: NDArray[np.int64]
    counts: NDArray[np.float64]
    symbols: NDArray[np.int64]
    present: NDArray[np.float64]
    scale: NDArray[np.float64]


def count_patterns(
    random_levels: NDArray[np.int8],
    weights: NDArray[np.float64] | None = None,
    n_pairs: int | None = None,
) -> PatternCounts:
    """:class:`PatternCounts` of pairs' levels, shape (N, F).

    Parameters
    ----------
    random_levels : ndarray of int8, shape (N, F)
        Levels of a uniform sample of all pairs, or of a stratified one (every
        candidate pair, then a sample of the rest; ``er.match._train._pattern_counts``).
    weights : ndarray of float64, shape (N,), optional
        Pairs each row stands for (1 by default).
    n_pairs : int, optional
        The pairs the rows stand for in all (``weights.sum()`` by default).
    """
    w = np.ones(random_levels.shape[0]) if weights is None else weights
    if random_levels.shape[1] > MAX_FIELDS:  # no key for the pattern: no correction
        F = random_levels.shape[1]
        empty = np.zeros(0)
        return PatternCounts(
            0, np.zeros(0, np.int64), empty, np.zeros((0, F), np.int64), np.zeros(F), empty
        )
    keys, at = np.unique(pattern_keys(random_levels), return_inverse=True)
    counts = np.bincount(at.ravel(), weights=w, minlength=keys.size).astype(np.float64)
    squares = np.bincount(at.ravel(), weights=w * w, minlength=keys.size)
    total = float(w.sum())
    present = (random_levels > 0).astype(np.float64).T @ w / max(total, 1.0)
    return PatternCounts(
        n_pairs=round(total) if n_pairs is None else n_pairs,
        keys=keys,
        counts=counts,
        symbols=_decode(keys, random_levels.shape[1]),
        present=np.asarray(present, np.float64),
        scale=squares / np.maximum(counts, 1e-300),
    )


def fit_dependence(
    random: PatternCounts,
    candidate_levels: NDArray[np.int8],
    posterior: NDArray[np.float64],
    m: Sequence[NDArray[np.float64]],
    u: Sequence[NDArray[np.float64]],
    prior: float,
    blocks: Sequence[Sequence[int]],
    shared: Sequence[int] = (),
    anchored: NDArray[np.float64] | None = None,
) -> dict[int, float]:
    """Bits to add for each agreement pattern the independent u underrates (module doc).

    First over the ``shared`` fields alone (a household's place and contacts: their
    joint patterns are 2^B, not 2^F, so each is counted often enough to tell even
    where the whole patterns of a household split into many rare ones by a missing
    e-mail or a nickname), then over whole patterns with the shared block's u so
    corrected; a pattern's bits are the two summed.

    Parameters
    ----------
    random : PatternCounts
        The patterns of random pairs of the training sample.
    candidate_levels : ndarray of int8, shape (p, F)
        Levels of its candidate pairs.
    posterior : ndarray of float64, shape (p,)
        Their match posteriors under the current fit.
    m, u : sequences of ndarray, one (n_levels_f,) per field
    prior : float
        P(match) for a random pair.
    blocks : sequence of sequence of int
        :func:`field_blocks`.
    shared : sequence of int, optional
        :func:`shared_block`.
    anchored : ndarray of float64, shape (p,), optional
        The candidates' match weights for the shared block's patterns among matches:
        the posterior on pairs that agree on personal fields a household does not
        share (er.match._train.anchor_pairs), so that households EM took for matches
        do not count as matches that agree on their place; default ``posterior``.

    Returns
    -------
    dict
        Pattern key -> bits (<= 0), for the corrected patterns only.
    """
    n_pairs = random.n_pairs
    if n_pairs == 0:
        return {}
    agree = agreement(candidate_levels)
    p_m = _pattern_probability(random, m, blocks, agree, posterior)
    p_u = _pattern_probability(random, u, [], agree, posterior)
    block_bits = np.zeros(random.keys.size)
    if len(shared) > 1:
        weight = posterior if anchored is None else anchored
        block_bits = _shared_bits(random, m, u, prior, blocks, shared, agree, weight)
        p_u = p_u * np.exp2(-block_bits)  # the block's dependent u in its place
    bits = block_bits + _excess_bits(random.counts, random.scale, n_pairs, prior, p_m, p_u)
    return {int(random.keys[i]): float(bits[i]) for i in np.flatnonzero(bits < 0)}


def _excess_bits(
    counts: NDArray[np.float64],
    scale: NDArray[np.float64],
    n_pairs: int,
    prior: float,
    p_m: NDArray[np.float64],
    p_u: NDArray[np.float64],
    match_share_max: float = MATCH_SHARE_MAX,
) -> NDArray[np.float64]:
    """(k,) bits (<= 0) of each pattern whose count exceeds what matches (``p_m``) and
    independent non-matches (``p_u``) explain, far beyond chance, and of which matches
    explain less than ``match_share_max`` (module docstring); 0 for the others."""
    mu_match = n_pairs * prior * p_m
    mu = mu_match + n_pairs * (1 - prior) * p_u
    # Poisson in the counted rows: a row standing for s pairs scales the mean by 1/s
    excess = counts > mu + SIGNIFICANCE_Z * np.sqrt(mu * scale) + SIGNIFICANCE_MIN * scale
    unexplained = mu_match < match_share_max * counts
    out = np.zeros(counts.size)
    hit = np.flatnonzero(excess & unexplained)
    u_dep = (counts[hit] - mu_match[hit]) / (n_pairs * (1 - prior))
    out[hit] = np.minimum(np.log2(p_u[hit] / u_dep), 0.0)
    return out


def _shared_bits(
    random: PatternCounts,
    m: Sequence[NDArray[np.float64]],
    u: Sequence[NDArray[np.float64]],
    prior: float,
    blocks: Sequence[Sequence[int]],
    shared: Sequence[int],
    agree: NDArray[np.int64],
    posterior: NDArray[np.float64],
) -> NDArray[np.float64]:
    """(k,) bits of each whole pattern from its ``shared`` fields' joint pattern alone:
    :func:`_excess_bits` over the 2^B patterns of the block, the whole patterns'
    counts summed into them."""
    fields = list(shared)
    sub = _keys(random.symbols[:, fields])
    size = SYMBOLS ** len(fields)
    counts = np.bincount(sub, weights=random.counts, minlength=size).astype(np.float64)
    # pairs each counted row stands for, averaged over the rows of the block pattern
    rows = np.bincount(sub, weights=random.counts / random.scale, minlength=size).astype(np.float64)
    scale = counts / np.maximum(rows, 1e-300)
    block = _Marginal(random, fields)
    inner = [[fields.index(f) for f in b if f in fields] for b in blocks]
    p_m = _pattern_probability(
        block, [m[f] for f in fields], [b for b in inner if len(b) > 1], agree[:, fields], posterior
    )
    p_u = _pattern_probability(block, [u[f] for f in fields], [], agree[:, fields], posterior)
    # a block pattern is shared by matches and households alike (every field agreeing):
    # its excess over both is the households', however many matches it holds
    bits = _excess_bits(counts, np.maximum(scale, 1.0), random.n_pairs, prior, p_m, p_u, 1.0)
    return bits[sub]


@dataclass(frozen=True)
class _Marginal:
    """Every joint pattern of some fields, as :func:`_pattern_probability` reads a
    :class:`PatternCounts` (``symbols``, ``present``)."""

    symbols: NDArray[np.int64]
    present: NDArray[np.float64]

    def __init__(self, random: PatternCounts, fields: Sequence[int]) -> None:
        n = len(fields)
        object.__setattr__(self, "symbols", _decode(np.arange(SYMBOLS**n, dtype=np.int64), n))
        object.__setattr__(self, "present", random.present[list(fields)])


def _decode(keys: NDArray[np.int64], n_fields: int) -> NDArray[np.int64]:
    """(k, F) symbols of each key."""
    out = np.empty((keys.size, n_fields), np.int64)
    rest = keys.copy()
    for f in range(n_fields - 1, -1, -1):
        out[:, f] = rest % SYMBOLS
        rest //= SYMBOLS
    return out


def _pattern_probability(
    random: PatternCounts | _Marginal,
    probs: Sequence[NDArray[np.float64]],
    blocks: Sequence[Sequence[int]],
    candidate_agreement: NDArray[np.int64],
    posterior: NDArray[np.float64],
) -> NDArray[np.float64]:
    """(k,) probability of each pattern: fields outside ``blocks`` independent (agreeing
    when present, as often as among random pairs, and then at a close or exact level by
    ``probs``), each block's joint pattern as among the candidates (agreement, shape
    (p, F)) weighted by ``posterior``."""
    in_block = {f for b in blocks for f in b}
    symbols = random.symbols
    out = np.ones(symbols.shape[0])
    for f, p in enumerate(probs):
        if f in in_block:
            continue
        agree = random.present[f] * p[2:].sum()
        out *= np.array([1 - agree, agree])[symbols[:, f]]
    for block in blocks:
        joint = _joint(candidate_agreement[:, block], posterior)
        out *= joint[_keys(symbols[:, block])]
    return out


def _joint(symbols: NDArray[np.int64], weight: NDArray[np.float64]) -> NDArray[np.float64]:
    """(2^B,) weighted share of each joint pattern of B fields, smoothed by one pair
    spread over all patterns (per-pattern smoothing would swamp a small sample: a
    block of six fields has 64 patterns, a first batch a few dozen matches)."""
    size = SYMBOLS ** symbols.shape[1]
    counts = np.bincount(_keys(symbols), weights=weight, minlength=size) + 1.0 / size
    share: NDArray[np.float64] = counts / counts.sum()
    return share


def dependence_bits(
    corrections: Mapping[int, float], levels: NDArray[np.int8]
) -> NDArray[np.float64]:
    """(p,) bits each pair gets from its pattern's correction (0 for most)."""
    out = np.zeros(levels.shape[0])
    if not corrections:
        return out
    known = np.array(sorted(corrections), np.int64)
    bits = np.array([corrections[k] for k in known.tolist()])
    keys = pattern_keys(levels)
    pos = np.minimum(np.searchsorted(known, keys), known.size - 1)
    hit = known[pos] == keys
    out[hit] = bits[pos[hit]]
    return out
