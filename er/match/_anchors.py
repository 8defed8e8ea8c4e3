"""Anchor pairs: the candidates each field's m is counted on in EM (issue #53).

Non-matches that agree on many fields at once (a household: one surname, address,
phone and e-mail; twins; a junior) look like matches to EM, which then learns that
matches disagree on given name, date of birth and id: a third to a half of its
"matches" did (issue #53). So each field's m is counted on anchor pairs only: pairs
that agree exactly on ANCHOR_FIELDS personal fields other than it (a name, a date,
an id: PERSONAL_KINDS), which such relatives do not share together. Splink's way of
training each comparison on pairs blocked on other fields, with the blocks chosen by
type. A field with fewer than MIN_ANCHOR_MATCHES expected matches among its anchors
keeps the posterior-weighted count over every candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Anchors",
    "anchor_pairs",
    "anchored",
    "anchors_of",
    "bounded",
    "personal_agreement",
    "record_ids",
]

PERSONAL_KINDS = frozenset({"person_name", "date", "identifier"})
ANCHOR_FIELDS = 2
# A date's or an id's anchors agree on every other personal field: two of them still
# hold relatives (twins share a surname and a date, a junior both names), and a date
# or an id differs between one person's records about as rarely on such anchors as on
# all of that person's pairs. A name's anchors keep ANCHOR_FIELDS: a name varies with
# the rest of a badly typed record, and matches that agree on everything else rarely
# show it (hard people, tuning seed: an id differs in 1.7% of matching pairs on either
# anchors, a given name in 32% of them, 25% on two and 3% on all; bench/RESULTS.md,
# "Entity resolution quality on held-out sets (issue #53)").
STRICT_KINDS = frozenset({"date", "identifier"})
MIN_ANCHOR_MATCHES = 20.0
# A bound on m: one person's records differ outright (the far level) on an id or a date
# in at most one pair in ten, whatever EM counts. Where EM's matches are people (the
# people generator's tuning seeds: an id far in 1.7% of matching pairs) the bound never
# binds; where they are households (a file without duplicates, whose likest pairs
# share a surname and an address), an SSN that differs weighed -1.2 bits, near-neutral,
# and now at least log2(0.1 / 1) = -3.3 (bench/HISTORY.md, 2026-12-03).
MAX_FAR_M = 0.1
# An identifier that agrees in under RECORD_ID_AGREEMENT of its anchors (candidates
# agreeing on every other personal field, at least MIN_RECORD_ID_ANCHORS of them with
# it present) names each record, not its entity: a row number, a form's or a patent's
# id. Weighed as an entity's id, every match would differ on it; a real id (an SSN)
# agrees on most such anchors, namesakes among them or not (one that agreed on half
# would miss all of ten with odds of 1 in 1,024). Found, it is no personal field for
# the others' anchors either: no match agrees on it, so none would anchor them (a
# first batch of hard people with a form's number: 13 anchors for it, none agreeing,
# and none left for the national id; bench/HISTORY.md, 2026-12-04).
RECORD_ID_AGREEMENT = 0.05
MIN_RECORD_ID_ANCHORS = 10
# The kinds an identifier takes in the anchors' eyes: a record's own (no personal field,
# unbounded: it names no one) and one that agrees on no candidate (no personal field,
# still bounded: a file without duplicates has an SSN that never agrees).
RECORD_ID, SILENT_ID = "record_id", "silent_identifier"


def anchor_pairs(
    levels: NDArray[np.int8], kinds: Sequence[str], n_levels: Sequence[int]
) -> list[NDArray[np.bool_] | None]:
    """Per field, the candidates that agree exactly on ANCHOR_FIELDS personal fields
    other than it (PERSONAL_KINDS; as many as there are, when fewer; on all of them
    for a field of STRICT_KINDS, or an identifier :func:`record_ids` relabels); None for
    a field with no other personal field.

    Parameters
    ----------
    levels : ndarray of int8, shape (p, n_fields)
        The candidates' levels (the last of each ladder is exact agreement).
    kinds : sequence of str, length n_fields
    n_levels : sequence of int, length n_fields
        Levels of each field's ladder.
    """
    personal = [f for f, k in enumerate(kinds) if k in PERSONAL_KINDS]
    exact = levels == np.asarray(n_levels, np.int8)[None, :] - 1
    out: list[NDArray[np.bool_] | None] = []
    for f in range(len(kinds)):
        others = [g for g in personal if g != f]
        if not others:
            out.append(None)
            continue
        agree = exact[:, others].sum(axis=1)
        strict = kinds[f] in STRICT_KINDS or kinds[f] in (RECORD_ID, SILENT_ID)
        need = len(others) if strict else min(ANCHOR_FIELDS, len(others))
        out.append(agree >= need)
    return out


def record_ids(
    levels: NDArray[np.int8], kinds: Sequence[str], n_levels: Sequence[int]
) -> tuple[list[int], list[str]]:
    """The identifier fields that name each record rather than its entity
    (RECORD_ID_AGREEMENT), to be weighed one-sided, as context; and the kinds the
    anchors are found with (:func:`anchors_of`), where neither those (RECORD_ID) nor an
    identifier that agrees on no candidate (SILENT_ID) is a personal field: none
    anchors anything.

    Parameters
    ----------
    levels : ndarray of int8, shape (p, n_fields)
        The candidates' levels (0 missing, the last of each ladder exact agreement).
    kinds, n_levels : sequence, length n_fields

    Returns
    -------
    ids : list of int
    anchor_kinds : list of str, length n_fields
    """
    exact = levels == np.asarray(n_levels, np.int8)[None, :] - 1
    silent = {f for f, k in enumerate(kinds) if k == "identifier" and not exact[:, f].any()}
    out: list[int] = []
    while True:  # one found may free the anchors of another
        found = []
        seen = [
            RECORD_ID if f in out else SILENT_ID if f in silent else k for f, k in enumerate(kinds)
        ]
        for f, anchors in enumerate(anchor_pairs(levels, seen, n_levels)):
            if kinds[f] != "identifier" or anchors is None or f in out:
                continue
            present = anchors & (levels[:, f] != 0)
            enough = present.sum() >= MIN_RECORD_ID_ANCHORS
            if enough and np.mean(exact[present, f]) < RECORD_ID_AGREEMENT:
                found.append(f)
        if not found:
            return out, seen
        out = sorted(out + found)


def personal_agreement(
    levels: NDArray[np.int8], kinds: Sequence[str], n_levels: Sequence[int]
) -> NDArray[np.bool_] | None:
    """(p,) whether each candidate agrees exactly on ANCHOR_FIELDS personal fields (as
    many as there are, when fewer): the matches a household's shared block is counted
    on; None without a personal field."""
    personal = [f for f, k in enumerate(kinds) if k in PERSONAL_KINDS]
    if not personal:
        return None
    exact = levels[:, personal] == np.asarray(n_levels, np.int8)[personal][None, :] - 1
    out: NDArray[np.bool_] = exact.sum(axis=1) >= min(ANCHOR_FIELDS, len(personal))
    return out


@dataclass(frozen=True)
class Anchors:
    """The candidates EM counts m on: per field (:func:`anchor_pairs`) and for the
    fields a household shares (:func:`personal_agreement`); None: every candidate."""

    fields: list[NDArray[np.bool_] | None]
    shared: NDArray[np.bool_] | None
    strict: tuple[int, ...] = ()  # fields whose far m is bounded (anchors_of; a string's
    # dates that are a person's join them in er.match._train)


def anchors_of(levels: NDArray[np.int8], kinds: Sequence[str], n_levels: Sequence[int]) -> Anchors:
    """:class:`Anchors` of candidates with ``levels`` (p, n_fields); ``kinds`` as
    :func:`record_ids` gives them."""
    return Anchors(
        anchor_pairs(levels, kinds, n_levels),
        personal_agreement(levels, kinds, n_levels),
        tuple(f for f, k in enumerate(kinds) if k in STRICT_KINDS or k == SILENT_ID),
    )


def bounded(m: list[NDArray[np.float64]], anchors: Anchors | None) -> list[NDArray[np.float64]]:
    """``m`` with each strict field's far level held at MAX_FAR_M at most, the mass
    above it spread over the field's agreeing levels in their proportions (index 0,
    missing, untouched); the arrays of ``m`` are changed in place and returned."""
    for f in () if anchors is None else anchors.strict:
        mf = m[f]
        if mf[1] > MAX_FAR_M:
            mf[2:] *= (1.0 - MAX_FAR_M) / mf[2:].sum()
            mf[1] = MAX_FAR_M
    return m


def anchored(post: NDArray[np.float64], anchors: Anchors | None, f: int) -> NDArray[np.float64]:
    """(p,) the weights field ``f``'s m is counted with: the posterior on its anchors,
    or on every candidate when those hold too few matches."""
    mask = None if anchors is None else anchors.fields[f]
    if mask is None:
        return post
    weight = np.where(mask, post, 0.0)
    return weight if weight.sum() >= MIN_ANCHOR_MATCHES else post
