"""Data functions for workers (their heartbeats) and the tasks that failed in them.

Callers open the session and its transaction (see ``_mentions``). Times a worker's age
is judged by are the database's own (``now()``), so workers and readers on machines
whose clocks differ still agree on how long a worker has been silent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from er.stores.sql._models import Batch, FailedTask, Worker

__all__ = [
    "aware",
    "beat_worker",
    "database_now",
    "failed_task_names",
    "failed_tasks",
    "known_workers",
    "mark_tasks_retried",
    "record_failed_task",
    "register_worker",
    "running_batches",
    "stop_worker",
]


def database_now(session: Session) -> dt.datetime:
    """The database's current time, timezone-aware (UTC when the database gives none)."""
    now = session.scalar(select(func.now()))
    if isinstance(now, str):  # SQLite: CURRENT_TIMESTAMP as text, in UTC
        now = dt.datetime.fromisoformat(now)
    assert isinstance(now, dt.datetime)  # both dialects give a time
    return aware(now)


def aware(at: dt.datetime) -> dt.datetime:
    """``at`` with a timezone (SQLite stores none: its times are UTC)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def register_worker(
    session: Session, *, name: str, host: str, pid: int, queues: Sequence[str], interval_s: float
) -> int:
    """A new worker row, seen now; its id. Rows of workers silent for a week and holding
    no running batch are dropped on the way (the batches they did keep no link)."""
    cutoff = database_now(session) - dt.timedelta(days=7)
    holding = select(Batch.worker_id).where(Batch.status == "running", Batch.worker_id.is_not(None))
    session.execute(delete(Worker).where(Worker.last_seen < cutoff, Worker.id.not_in(holding)))
    worker = Worker(
        name=name, host=host, pid=pid, queues=",".join(queues), interval_s=float(interval_s)
    )
    session.add(worker)
    session.flush()
    return int(worker.id)


def beat_worker(
    session: Session, worker_id: int, last_task: str | None, last_task_at: dt.datetime | None
) -> bool:
    """Stamp the worker seen now, with the task it last started; False if its row is gone."""
    done = session.execute(
        update(Worker)
        .where(Worker.id == worker_id)
        .values(last_seen=func.now(), last_task=last_task, last_task_at=last_task_at)
    )
    return bool(getattr(done, "rowcount", 0))


def stop_worker(session: Session, worker_id: int) -> None:
    """Mark the worker stopped (a warm shutdown: its tasks in hand finished)."""
    session.execute(
        update(Worker)
        .where(Worker.id == worker_id)
        .values(last_seen=func.now(), stopped_at=func.now())
    )


def known_workers(session: Session, within_s: float) -> list[Worker]:
    """Workers seen in the last ``within_s`` seconds, not stopped before that, and any
    that a running batch names, oldest first."""
    since = database_now(session) - dt.timedelta(seconds=within_s)
    holding = select(Batch.worker_id).where(Batch.status == "running", Batch.worker_id.is_not(None))
    query = (
        select(Worker)
        .where(or_(Worker.last_seen >= since, Worker.id.in_(holding)))
        .order_by(Worker.id)
    )
    return list(session.scalars(query))


def running_batches(session: Session, collection_id: int) -> list[tuple[int, int | None]]:
    """``(seq, worker id)`` of the collection's batches marked running, in seq order."""
    rows = session.execute(
        select(Batch.seq, Batch.worker_id)
        .where(Batch.collection_id == collection_id, Batch.status == "running")
        .order_by(Batch.seq)
    ).all()
    return [(int(seq), None if w is None else int(w)) for seq, w in rows]


def record_failed_task(
    session: Session,
    *,
    task: str,
    collection: str,
    task_id: str | None,
    reason: str,
    kwargs: Mapping[str, Any],
) -> None:
    """Keep a task that failed for good, with its reason and arguments."""
    session.add(
        FailedTask(
            task=task, collection=collection, task_id=task_id, reason=reason, kwargs=dict(kwargs)
        )
    )
    session.flush()


def failed_tasks(session: Session, collection: str) -> list[FailedTask]:
    """The collection's failed tasks not yet queued again, oldest first."""
    query = (
        select(FailedTask)
        .where(FailedTask.collection == collection, FailedTask.retried_at.is_(None))
        .order_by(FailedTask.id)
    )
    return list(session.scalars(query))


def failed_task_names(session: Session) -> list[str]:
    """Collections (as the tasks named them) with failed tasks not yet queued again."""
    query = (
        select(FailedTask.collection)
        .where(FailedTask.retried_at.is_(None))
        .group_by(FailedTask.collection)
        .order_by(func.min(FailedTask.id))
    )
    return [str(name) for name in session.scalars(query)]


def mark_tasks_retried(session: Session, ids: Sequence[int]) -> None:
    """Record that these failed tasks were queued again (``er retry``)."""
    if ids:
        session.execute(
            update(FailedTask).where(FailedTask.id.in_(list(ids))).values(retried_at=func.now())
        )
