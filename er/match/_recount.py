"""A free-text model's u counted again on its grown collection.

The views of free text (er.match._views) read their levels with document frequencies
frozen from the training sample, so that a replayed batch scores alike. A first model
knows its first batch alone: on a collection ten or thirty times larger most words
are ones that batch never saw, each weighed as the rarest, and the views' upper levels
("both rarest words shared" above all) are reached by more non-matches than they were
among the first batch's pairs, whose u counted them. :func:`recounted_u` counts u again
over random pairs of the grown collection, read with the same frozen frequencies, and
keeps what EM fitted (m, the prior). EM itself is not run again: on more strings it
takes near non-matches for matches; nor are the frequencies counted again: a match's
levels would then move away from the first batch's m (the measurements:
bench/RESULTS.md, "Entity resolution quality on held-out sets (issue #53)").
"""

from __future__ import annotations

from dataclasses import replace

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
    u = [tuple(_frequencies(levels[:, j], len(f.m)).tolist()) for j, f in enumerate(model.fields)]
    fields = tuple(
        f if f.source is None else replace(f, u=u_f) for f, u_f in zip(model.fields, u, strict=True)
    )
    return replace(model, fields=fields, version=version)
