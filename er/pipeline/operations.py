"""What an operator sees and mends (issue #54): workers and their heartbeats, batches
stranded on a worker that is gone, tasks that failed in a worker, ``er retry`` and
``er rejects``.

A batch is *stranded* when it is marked running and nothing is stepping it: its worker
has been silent for more than :data:`er.pipeline.heartbeat.MISSED_BEATS` intervals, or
(PostgreSQL) no process holds the collection's writer lock, which the server drops the
moment a killed worker's connection goes. The writer takes a stranded batch again on its
next run; ``er retry`` queues that run.
"""

from __future__ import annotations

import ast
import datetime as dt
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from er.exceptions import ERError
from er.pipeline.heartbeat import MISSED_BEATS
from er.stores.sql import (
    FailedTask,
    Worker,
    aware,
    batch_status,
    database_now,
    failed_tasks,
    find_collection,
    known_workers,
    last_failure,
    lock_collection,
    record_failed_task,
    rejected_rows,
    retry_batches,
    running_batches,
    seqs_with_status,
    writer_lock_free,
)

logger = logging.getLogger(__name__)

WORKERS_WITHIN_S = 3600.0  # er status lists workers seen in the last hour (and any holding work)


def worker_rows(session: Session) -> list[dict[str, Any]]:
    """The workers ``er status`` shows: each one's name, host, pid, queues, ``state``
    (alive, gone: silent past MISSED_BEATS intervals, or stopped), last beat and the
    seconds since (``silent_s``, by the database's clock) and its last task."""
    now = database_now(session)
    return [_worker_row(w, now) for w in known_workers(session, WORKERS_WITHIN_S)]


def _worker_row(worker: Worker, now: dt.datetime) -> dict[str, Any]:
    silent = max((now - aware(worker.last_seen)).total_seconds(), 0.0)
    state = "alive"
    if worker.stopped_at is not None:
        state = "stopped"
    elif silent > MISSED_BEATS * worker.interval_s:
        state = "gone"
    return {
        "id": worker.id,
        "name": worker.name,
        "host": worker.host,
        "pid": worker.pid,
        "queues": [q for q in worker.queues.split(",") if q],
        "state": state,
        "interval_s": worker.interval_s,
        "started_at": _iso(worker.started_at),
        "last_seen": _iso(worker.last_seen),
        "silent_s": round(silent, 3),
        "last_task": worker.last_task,
        "last_task_at": _iso(worker.last_task_at),
    }


def _iso(at: dt.datetime | None) -> str | None:
    return None if at is None else aware(at).isoformat()


def stranded_batches(
    session: Session, collection_id: int, workers: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The collection's running batches that nothing steps, each with the worker that
    took it (None: an in-process run) and ``why`` in words.

    The writer lock is read before and after the batches: a batch is stranded by the
    lock only if no writer held it either time (a writer starting or ending between
    the reads is not taken for a dead one).
    """
    free_before = writer_lock_free(session, collection_id)
    running = running_batches(session, collection_id)
    if not running:
        return []
    lock_free = bool(free_before and writer_lock_free(session, collection_id))
    by_id = {w["id"]: w for w in workers}
    out = []
    for seq, worker_id in running:
        worker = by_id.get(worker_id) if worker_id is not None else None
        gone = worker is not None and worker["state"] != "alive"
        if not (gone or lock_free):
            continue
        out.append(
            {
                "batch_seq": seq,
                "worker": None if worker is None else worker["name"],
                "worker_id": worker_id,
                "host": None if worker is None else worker["host"],
                "pid": None if worker is None else worker["pid"],
                "last_seen": None if worker is None else worker["last_seen"],
                "silent_s": None if worker is None else worker["silent_s"],
                "why": _why(worker, gone),
            }
        )
    return out


def _why(worker: Mapping[str, Any] | None, gone: bool) -> str:
    """Why a running batch is stranded, in words."""
    if worker is None:
        return "no process holds the collection's writer lock (an in-process run that ended)"
    who = f"worker {worker['name']} (pid {worker['pid']} on {worker['host']})"
    seen = f"last seen {worker['silent_s']:.1f} s ago, beating every {worker['interval_s']:g} s"
    if gone and worker["state"] == "stopped":
        return f"{who} stopped"
    if gone:
        return f"{who} is gone: {seen}"
    return f"{who} no longer holds the collection's writer lock ({seen})"


def failed_task_summary(session: Session, collection: str) -> dict[str, Any]:
    """The collection's failed tasks not yet queued again: ``count``, and the ``last``
    one's ``task``, ``reason`` and ``at`` (None when there is none)."""
    tasks = failed_tasks(session, collection)
    if not tasks:
        return {"count": 0, "last": None}
    last = tasks[-1]
    return {
        "count": len(tasks),
        "last": {"task": last.task, "reason": last.reason, "at": _iso(last.created_at)},
    }


def last_failed_batch(session: Session, collection_id: int) -> dict[str, Any] | None:
    """``batch_seq`` and ``error`` of the collection's failed batch that failed last."""
    found = last_failure(session, collection_id)
    return None if found is None else {"batch_seq": found[0], "error": found[1]}


def reason_of(exc: BaseException) -> str:
    """An error as one line: its type and the first line of its message."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def keep_failed_task(
    session: Session, *, task: str, task_id: str | None, kwargs: Mapping[str, Any], error: str
) -> None:
    """Keep a task that failed for good in a worker, for ``er status`` and ``er retry``."""
    collection = str(kwargs.get("collection", ""))
    record_failed_task(
        session, task=task, collection=collection, task_id=task_id, reason=error, kwargs=kwargs
    )
    logger.error("task %s (%s) of %s failed for good: %s", task_id, task, collection, error)


def plan_retry(session: Session, collection: str, batch: int | None = None) -> dict[str, Any]:
    """Put a collection's failed batches back to pending and find what else to queue
    again (``er retry``); the caller commits, then queues (:func:`er.pipeline.run.run_retry`).

    Parameters
    ----------
    batch : int, optional
        Only this batch (failed, or stranded on a worker that is gone); failed tasks
        are then left alone.

    Returns
    -------
    dict
        ``batches``: ``{"batch_seq", "now", "error"}`` of each batch put back (``now``:
        its seq from here on, another when batches after it were resolved since);
        ``stranded``: the stranded batches (:func:`stranded_batches`), which the
        writer's next run takes again; ``tasks``: ``{"id", "task", "task_id",
        "reason", "kwargs"}`` of each failed task to queue again.

    Raises
    ------
    ERError
        If nothing matches (one line saying why).
    """
    coll = find_collection(session, collection)
    tasks = [] if batch is not None else failed_tasks(session, collection)
    if coll is None and not tasks:
        raise ERError(f"no collection {collection!r}.")
    failed: list[int] = []
    stranded: list[dict[str, Any]] = []
    if coll is not None:
        lock_collection(session, coll.id)  # no ingest opens a batch meanwhile
        stranded = stranded_batches(session, coll.id, worker_rows(session))
        failed = seqs_with_status(session, coll.id, "failed")
    if batch is not None:
        failed = [s for s in failed if s == batch]
        stranded = [s for s in stranded if s["batch_seq"] == batch]
        if not (failed or stranded):
            raise ERError(_not_retried(session, collection, coll, batch))
    if not (failed or stranded or tasks):
        raise ERError(
            f"nothing to retry in {collection!r}: no failed batch, no batch stranded on a "
            "worker that is gone, no failed task."
        )
    moved = [] if coll is None else retry_batches(session, coll.id, failed)
    return {
        "collection": collection,
        "batches": [{"batch_seq": o, "now": n, "error": e} for o, n, e in moved],
        "stranded": stranded,
        "tasks": [_task_row(t) for t in tasks],
    }


def _not_retried(session: Session, collection: str, coll: Any, seq: int) -> str:
    """Why batch ``seq`` of the collection cannot be retried, in one line."""
    status = None if coll is None else batch_status(session, coll.id, seq)
    if status is None:
        return f"{collection!r} has no batch {seq}."
    if status == "running":
        return f"batch {seq} of {collection!r} is running on a live writer; nothing to retry."
    return f"batch {seq} of {collection!r} is {status}, not failed; nothing to retry."


def _task_row(task: FailedTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "task": task.task,
        "task_id": task.task_id,
        "reason": task.reason,
        "kwargs": dict(task.kwargs),
    }


# er's reasons name the field as Python shows a string: record 'r1': field 'dob': ...
_FIELD = re.compile(r"\bfield ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


def field_of(reason: str) -> str | None:
    """The field a rejection names (None: the record as a whole was refused)."""
    found = _FIELD.search(reason)
    if found is None:
        return None
    try:
        name = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return None
    return name if isinstance(name, str) else None


def rejects(session: Session, collection: str) -> list[dict[str, Any]]:
    """The collection's rejected records, oldest first: ``external_id`` (None when the
    record had no usable id), ``field`` (the one its reason names, or None) and
    ``reason`` (``er rejects``)."""
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    return [
        {"external_id": ext, "field": field_of(reason), "reason": reason}
        for ext, reason in rejected_rows(session, coll.id)
    ]
