"""Changing a collection's entity cut (issue #31): an explicit, recorded operation.

The new cut takes effect through a batch of its own, with no mentions, queued behind
every batch already pending: the writer re-derives the entities at the new cut from the
stored hierarchy and matches them to the current ones, so the stable ids and the
merge/split events follow DESIGN §3's rules exactly as for any batch. Nothing is
re-ingested or re-clustered; the change is recorded in the collection's config
(``cut_changes``) with the batch that applies it.

``er cut --gold`` lets development data choose the cut (issue #29: "0.5 by default
unless development data says otherwise"): the cut of the stored hierarchy at which the
gold-labelled mentions score their best pairwise F1 (:func:`er.evaluation.best_cut`).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from er._arrays import find_sorted
from er.evaluation import best_cut
from er.exceptions import ERError
from er.pipeline.config import DEFAULT_CUT
from er.pipeline.partition import _hierarchy_from_store
from er.stores.graph import GraphStore
from er.stores.sql import find_collection, gold_labels, last_done_seq, lock_collection, open_batch


def change_cut(
    session: Session,
    *,
    collection: str,
    threshold: float,
    reason: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record a new entity cut and queue the batch that applies it (caller's transaction).

    Parameters
    ----------
    reason : dict, optional
        Recorded with the change (``er cut --gold``: the labelled figures behind it).

    Returns
    -------
    dict
        ``collection``, ``batch_seq`` (the batch that applies it), ``from`` and ``to``.

    Raises
    ------
    ERError
        Unknown collection, a cut that is not a finite number, or a probability cut
        outside (0, 1] for a pair-model collection.
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    if isinstance(threshold, bool) or not math.isfinite(threshold):
        raise ERError(f"--threshold must be a finite number. Got {threshold!r}.")
    if coll.config.get("scoring") == "pair_model" and not 0 < threshold <= 1:
        raise ERError(
            f"collection {collection!r} cuts at a match probability: --threshold must be in "
            f"(0, 1]. Got {threshold}."
        )
    lock_collection(session, coll.id)
    session.refresh(coll)
    before = float(coll.config.get("cut_threshold", DEFAULT_CUT))
    batch = open_batch(session, coll.id)
    change = {
        "batch": batch.seq,
        "from": before,
        "to": float(threshold),
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **({"reason": reason} if reason else {}),
    }
    changes = [*coll.config.get("cut_changes", []), change]
    coll.config = {**coll.config, "cut_threshold": float(threshold), "cut_changes": changes}
    return {"collection": collection, "batch_seq": batch.seq, "from": before, "to": threshold}


def cut_from_gold(session: Session, graph: GraphStore, *, collection: str) -> dict[str, Any]:
    """Set the cut where the collection's gold-labelled mentions score best (caller's
    transaction).

    The hierarchy is the one stored as of the newest batch done. The labelled mentions
    are taken to be whole entities (label a sample of entities, each with all of its
    mentions): a labelled mention cut together with an unlabelled one counts as a
    false merge (:func:`er.evaluation.best_cut`).

    Returns
    -------
    dict
        :func:`change_cut`'s keys plus ``gold``: the labelled mentions' pairwise
        ``precision``, ``recall``, ``f1`` at the new cut, ``n_labelled`` and ``as_of``
        (the batch whose hierarchy was cut).

    Raises
    ------
    ERError
        Unknown collection, nothing resolved yet, or labels that hold no two mentions
        of one entity.
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    if not coll.config.get("gold_field"):
        raise ERError(
            f"collection {collection!r} has no gold field: it is named at the first ingest "
            "(--gold-field), with the labelled records' gold ids; no cut chosen."
        )
    seq = last_done_seq(session, coll.id)
    if seq is None:
        raise ERError(f"collection {collection!r} has no resolved batch to cut yet.")
    hierarchy, node_ids = _hierarchy_from_store(graph.structure(collection, as_of=seq))
    nodes, labels = gold_labels(session, coll.id)
    at = find_sorted(nodes, node_ids[: hierarchy.n_points])
    gold = np.array([None if k < 0 else labels[k] for k in at.tolist()], dtype=object)
    probability = coll.config.get("scoring") == "pair_model"  # a cut in (0, 1]
    try:
        figures = best_cut(
            hierarchy,
            gold,
            np.fromiter((g is not None for g in gold), bool, gold.size),
            above=0.0 if probability else None,
        )
    except ValueError as exc:
        raise ERError(f"collection {collection!r}: {exc}; no cut chosen.") from None
    figures["as_of"] = int(seq)
    threshold = figures.pop("threshold")
    out = change_cut(session, collection=collection, threshold=threshold, reason=figures)
    return {**out, "gold": figures}
