"""Data functions for evaluation runs and the mentions they score.

Callers open the session and its transaction (see ``_mentions``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from er.stores.sql._models import Batch, Collection, EvalRun, Mention

__all__ = [
    "eval_runs",
    "find_collection",
    "last_done_seq",
    "mention_payloads",
    "mentions_by_node",
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


def mentions_by_node(session: Session, collection_id: int) -> dict[int, dict[str, Any]]:
    """Leaf node id -> {external_id, gold_entity, payload} of every clustered mention.

    The payloads are left None: scoring needs only the labels (at a million mentions
    the payloads were most of ``er eval``'s memory); :func:`mention_payloads` reads
    the few a report shows.
    """
    # (node_id, external_id, gold_entity); node_id is never NULL here
    rows: Iterable[tuple[int, str, str | None]] = session.execute(
        select(Mention.node_id, Mention.external_id, Mention.gold_entity).where(
            Mention.collection_id == collection_id, Mention.node_id.is_not(None)
        )
    )
    return {
        int(node): {"external_id": ext, "gold_entity": gold, "payload": None}
        for node, ext, gold in rows
    }


def mention_payloads(
    session: Session, collection_id: int, external_ids: Iterable[str]
) -> dict[str, Any]:
    """external_id -> payload of the given mentions (the few a report shows)."""
    wanted = sorted(set(external_ids))
    out: dict[str, Any] = {}
    for start in range(0, len(wanted), 500):  # bound the IN list's parameters
        found: Iterable[tuple[str, Any]] = session.execute(
            select(Mention.external_id, Mention.payload).where(
                Mention.collection_id == collection_id,
                Mention.external_id.in_(wanted[start : start + 500]),
            )
        )
        out.update((ext, payload) for ext, payload in found)
    return out


def eval_runs(session: Session, collection_id: int | None = None) -> list[EvalRun]:
    """Evaluation runs, oldest first (of one collection, or of all)."""
    query = select(EvalRun).order_by(EvalRun.id)
    if collection_id is not None:
        query = query.where(EvalRun.collection_id == collection_id)
    return list(session.scalars(query))
