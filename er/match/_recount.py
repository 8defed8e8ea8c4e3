"""A free-text model's u counted again on its grown collection.

Random non-matches almost never reach the upper levels of free text's views
(er.match._views), so their u, counted over random pairs of the first batch, is
mostly the few matches among those pairs: about the sample's prior times m, and each
upper level then weighs about -log2 of that prior whatever its m. A first batch drawn
from a large collection holds fewer duplicates per record than one drawn from a small
one, so its views weigh more and near non-matches (a household's members,
organisations of one street) join. :func:`recounted_u` counts u again over random
pairs of the grown collection and keeps what EM fitted (m, the prior) and the
document frequencies the levels are read with: EM on more strings takes near
non-matches for matches, and under new document frequencies a match's levels move
away from the first batch's m (the measurements: bench/RESULTS.md, "Entity resolution
quality on held-out sets (issue #53)").
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from er.match._model import PairModel
from er.match._table import FieldTable
from er.match._train import RANDOM_PAIRS, _frequencies, random_pairs

__all__ = ["recounted_u"]


def recounted_u(model: PairModel, table: FieldTable, *, seed: int, version: int) -> PairModel:
    """``model`` with the u of each view of free text counted on RANDOM_PAIRS random
    pairs (``seed``) of ``table``'s records; every other parameter kept.

    Parameters
    ----------
    model : PairModel
        Trained on the first ``model.n_train`` records of ``table``.
    table : FieldTable
        The collection's records, n of them.
    version : int
        The version the returned model carries.

    Returns
    -------
    PairModel
        Equal to ``model`` but for ``version`` and its views' u.
    """
    rl, rr = random_pairs(len(table), RANDOM_PAIRS, seed)
    levels = model.levels(table, rl, rr)
    fields = tuple(
        f if f.source is None else replace(f, u=_shares(levels[:, j], len(f.m)))
        for j, f in enumerate(model.fields)
    )
    return replace(model, fields=fields, version=version)


def _shares(levels: NDArray[np.int8], n_levels: int) -> tuple[float, ...]:
    """Each level's smoothed share among ``levels`` (shape (p,)), as training counts u."""
    return tuple(_frequencies(levels, n_levels).tolist())
