"""Data functions for evaluation runs and the mentions they score.

Callers open the session and its transaction (see ``_mentions``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from er.stores.sql._models import Batch, Collection, EvalRun, Mention

__all__ = [
    "eval_runs",
    "find_collection",
    "gold_labels",
    "last_done_seq",
    "mentions_of_nodes",
]


def find_collection(session: Session, name: str) -> Collection | None:
    """The collection called ``name``, or None."""
    return session.scalar(select(Collection).where(Collection.name == name))


def last_done_seq(session: Session, collection_id: int) -> int | None:
    """Sequence number of the newest batch marked done, or None."""
    query = select(func.max(Batch.seq)).where(
        Batch.collection_id == collection_id, Batch.status == "done"
    )
    return session.scalar(query)


def gold_labels(session: Session, collection_id: int) -> tuple[NDArray[np.int64], list[str | None]]:
    """The gold label of every clustered mention, by node.

    Returns
    -------
    nodes : ndarray of int64, shape (m,)
        Mention node ids, ascending.
    gold : list of str or None, length m
        The gold entity of each (None: unlabelled).

    Only these two columns are read: at a million mentions the payloads, and a map
    per mention, were most of ``er eval``'s memory; :func:`mentions_of_nodes` reads
    the few a report shows.
    """
    rows: Iterable[tuple[int, str | None]] = session.execute(
        select(Mention.node_id, Mention.gold_entity)
        .where(Mention.collection_id == collection_id, Mention.node_id.is_not(None))
        .order_by(Mention.node_id)  # the (collection_id, node_id) index gives this order
    )
    nodes: list[int] = []
    gold: list[str | None] = []
    for node, label in rows:
        nodes.append(node)
        gold.append(label)
    return np.asarray(nodes, np.int64), gold


def mentions_of_nodes(
    session: Session, collection_id: int, nodes: Iterable[int]
) -> dict[int, dict[str, Any]]:
    """Node id -> {external_id, gold_entity, payload} of the given mentions (the few a
    report shows)."""
    wanted = sorted({int(v) for v in nodes})
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(wanted), 500):  # bound the IN list's parameters
        found: Iterable[tuple[int, str, str | None, Any]] = session.execute(
            select(
                Mention.node_id, Mention.external_id, Mention.gold_entity, Mention.payload
            ).where(
                Mention.collection_id == collection_id,
                Mention.node_id.in_(wanted[start : start + 500]),
            )
        )
        out.update(
            (int(node), {"external_id": ext, "gold_entity": gold, "payload": payload})
            for node, ext, gold, payload in found
        )
    return out


def eval_runs(session: Session, collection_id: int | None = None) -> list[EvalRun]:
    """Evaluation runs, oldest first (of one collection, or of all)."""
    query = select(EvalRun).order_by(EvalRun.id)
    if collection_id is not None:
        query = query.where(EvalRun.collection_id == collection_id)
    return list(session.scalars(query))
