"""Changing a collection's entity cut (issue #31): an explicit, recorded operation.

The new cut takes effect through a batch of its own, with no mentions, queued behind
every batch already pending: the writer re-derives the entities at the new cut from the
stored hierarchy and matches them to the current ones, so the stable ids and the
merge/split events follow DESIGN §3's rules exactly as for any batch. Nothing is
re-ingested or re-clustered; the change is recorded in the collection's config
(``cut_changes``) with the batch that applies it.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from sqlalchemy.orm import Session

from er.exceptions import ERError
from er.pipeline.config import DEFAULT_CUT
from er.stores.sql import find_collection, lock_collection, open_batch


def change_cut(session: Session, *, collection: str, threshold: float) -> dict[str, Any]:
    """Record a new entity cut and queue the batch that applies it (caller's transaction).

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
    }
    changes = [*coll.config.get("cut_changes", []), change]
    coll.config = {**coll.config, "cut_threshold": float(threshold), "cut_changes": changes}
    return {"collection": collection, "batch_seq": batch.seq, "from": before, "to": threshold}
