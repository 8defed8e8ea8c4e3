"""Data functions for batches, rejected records and the writer lock of a collection.

Callers open the session and its transaction (see ``_mentions``), except for
:func:`writer_lock`, which holds its own connection for as long as it is held.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.orm import Session

from er.stores.sql._models import Batch, BatchFeatures, Collection, Mention, RejectedRecord

__all__ = [
    "any_pending",
    "batch_counts",
    "batch_mentions",
    "batch_status",
    "drop_features",
    "last_failure",
    "lock_collection",
    "open_batch",
    "pending_batches",
    "recent_batches",
    "record_rejects",
    "rejected_rows",
    "retry_batches",
    "seqs_with_status",
    "store_features",
    "stored_features",
    "stored_payloads",
    "writer_lock",
    "writer_lock_free",
]

_LOCK_CLASS = 0x6572  # "er": the first key of every advisory lock er takes


def lock_collection(session: Session, collection_id: int) -> None:
    """Serialise ingests of one collection until the caller's transaction ends.

    Batch sequence numbers are then handed out and committed in order, so the
    cluster writer never sees batch b+1 before batch b.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            select(Collection.id).where(Collection.id == collection_id).with_for_update()
        )
    # SQLite: a write transaction already excludes every other writer.


def open_batch(session: Session, collection_id: int) -> Batch:
    """A new pending batch with the next sequence number (call after lock_collection)."""
    last = session.scalar(select(func.max(Batch.seq)).where(Batch.collection_id == collection_id))
    batch = Batch(
        collection_id=collection_id,
        seq=int(last or 0) + 1,
        status="pending",
        n_accepted=0,
        n_rejected=0,
        timings={},
    )
    session.add(batch)
    session.flush()
    return batch


def stored_payloads(
    session: Session, collection_id: int, external_ids: Sequence[str], chunk: int = 1000
) -> dict[str, Any]:
    """Payloads of the given external ids that are already stored, by external id."""
    out: dict[str, Any] = {}
    for start in range(0, len(external_ids), chunk):
        part = list(external_ids[start : start + chunk])
        rows: Iterable[tuple[str, Any]] = session.execute(
            select(Mention.external_id, Mention.payload).where(
                Mention.collection_id == collection_id, Mention.external_id.in_(part)
            )
        )
        out.update({ext: payload for ext, payload in rows})
    return out


def record_rejects(
    session: Session, collection_id: int, rejects: Iterable[Mapping[str, Any]]
) -> int:
    """Store rejected records (``external_id``, ``payload``, ``reason``); return how many."""
    rows = [
        RejectedRecord(
            collection_id=collection_id,
            external_id=r.get("external_id"),
            payload=r.get("payload"),
            reason=str(r["reason"]),
        )
        for r in rejects
    ]
    session.add_all(rows)
    session.flush()
    return len(rows)


def refused_records(session: Session, collection_id: int) -> list[Any]:
    """Payloads of the records refused at ingest that never became a mention.

    A record refused because its id came again with another payload is a mention
    already, and one refused more than once (the same file ingested twice) counts once;
    refusals without an id are each their own record.
    """
    accepted = select(Mention.external_id).where(Mention.collection_id == collection_id)
    rows = session.execute(
        select(RejectedRecord.external_id, RejectedRecord.payload)
        .where(
            RejectedRecord.collection_id == collection_id,
            (RejectedRecord.external_id.is_(None)) | (RejectedRecord.external_id.not_in(accepted)),
        )
        .order_by(RejectedRecord.id)
    ).all()
    seen: set[str] = set()
    out = []
    for ext, payload in rows:
        if ext is not None:
            if str(ext) in seen:
                continue
            seen.add(str(ext))
        out.append(payload)
    return out


def pending_batches(session: Session, collection_id: int) -> list[Batch]:
    """Batches not yet done or failed, in sequence order."""
    query = (
        select(Batch)
        .where(Batch.collection_id == collection_id, Batch.status.in_(("pending", "running")))
        .order_by(Batch.seq)
    )
    return list(session.scalars(query))


def any_pending(session: Session, collection_id: int) -> bool:
    """Whether a batch of the collection is not yet done or failed (one row read)."""
    query = (
        select(Batch.id)
        .where(Batch.collection_id == collection_id, Batch.status.in_(("pending", "running")))
        .limit(1)
    )
    return session.scalar(query) is not None


def batches_after(session: Session, collection_id: int, seq: int) -> list[Batch]:
    """The writer's work from its state at batch ``seq``, in sequence order: batches
    not yet done (or failed), and those done after ``seq`` (stepped since the writer's
    last checkpoint, to replay into its state)."""
    query = (
        select(Batch)
        .where(
            Batch.collection_id == collection_id,
            Batch.status.in_(("pending", "running"))
            | ((Batch.status == "done") & (Batch.seq > seq)),
        )
        .order_by(Batch.seq)
    )
    return list(session.scalars(query))


def return_batch(
    session: Session, collection_id: int, batch_id: int, now: int, before: int
) -> None:
    """Give a batch that `er retry` queued again under seq ``now`` back its seq
    ``before``, its mentions with it, and the group it was stepped in (caller's
    transaction). For a batch whose step the writer's checkpoint holds already under
    ``before`` (it failed after its checkpoint): its rows, the graph's stamps and a
    replay's order then agree again. ``before`` is free: nothing else takes a seq
    below the last."""
    retries = session.scalar(select(Batch.retries).where(Batch.id == batch_id)) or []
    entry: dict[str, Any] = next((r for r in reversed(retries) if r.get("seq") == before), {})
    session.execute(
        update(Batch)
        .where(Batch.id == batch_id)
        .values(seq=before, group_end=entry.get("group_end", before))
    )
    _move_mentions(session, collection_id, now, before)


def _move_mentions(session: Session, collection_id: int, old: int, new: int) -> None:
    """The mentions of the collection's batch ``old`` become batch ``new``'s."""
    session.execute(
        update(Mention)
        .where(Mention.collection_id == collection_id, Mention.batch_seq == old)
        .values(batch_seq=new)
    )


def batch_mentions(session: Session, collection_id: int, seq: int) -> list[tuple[str, Any]]:
    """``(external_id, payload)`` of the mentions a batch brought, in arrival order."""
    rows: Iterable[tuple[str, Any]] = session.execute(
        select(Mention.external_id, Mention.payload)
        .where(Mention.collection_id == collection_id, Mention.batch_seq == seq)
        .order_by(Mention.id)
    )
    return [(ext, payload) for ext, payload in rows]


def store_features(session: Session, batch_id: int, digest: str, data: bytes) -> None:
    """Keep the features an ingest process made of a batch (caller's transaction)."""
    session.add(BatchFeatures(batch_id=batch_id, digest=digest, data=data))


def stored_features(session: Session, batch_ids: Sequence[int]) -> dict[int, tuple[str, bytes]]:
    """Batch id -> ``(digest, data)`` of the stored features of those batches that have
    them."""
    rows = session.execute(
        select(BatchFeatures.batch_id, BatchFeatures.digest, BatchFeatures.data).where(
            BatchFeatures.batch_id.in_(list(batch_ids))
        )
    )
    return {batch_id: (digest, bytes(data)) for batch_id, digest, data in rows}


def drop_features(session: Session, batch_ids: Sequence[int]) -> None:
    """Delete the stored features of batches the writer has done (caller's transaction)."""
    session.execute(delete(BatchFeatures).where(BatchFeatures.batch_id.in_(list(batch_ids))))


def finish_batch(
    session: Session,
    batch_id: int,
    status: str,
    timings: Mapping[str, float],
    error: str | None,
    notes: Mapping[str, Any] | None = None,
) -> None:
    """Mark a batch done or failed, with its stage timings and notes (caller's transaction).

    ``notes``: ``{"unreadable": {field: n}, "truncated": {field: n}}``, values the writer
    could not read as their field's type or cut to the featurized length.
    """
    session.execute(
        update(Batch)
        .where(Batch.id == batch_id)
        .values(
            status=status,
            timings=dict(timings),
            error=error,
            notes=dict(notes) if notes else None,
            finished_at=dt.datetime.now(dt.UTC),
        )
    )


def batch_counts(session: Session, collection_id: int) -> dict[str, Any]:
    """Batches by status, mentions, rejects and the oldest pending batch's age."""
    by_status = dict(
        session.execute(
            select(Batch.status, func.count())
            .where(Batch.collection_id == collection_id)
            .group_by(Batch.status)
        ).all()
    )
    mentions = session.scalar(
        select(func.count()).select_from(Mention).where(Mention.collection_id == collection_id)
    )
    rejects = session.scalar(
        select(func.count())
        .select_from(RejectedRecord)
        .where(RejectedRecord.collection_id == collection_id)
    )
    oldest = session.scalar(
        select(func.min(Batch.created_at)).where(
            Batch.collection_id == collection_id, Batch.status.in_(("pending", "running"))
        )
    )
    return {
        "batches": {k: int(v) for k, v in by_status.items()},
        "mentions": int(mentions or 0),
        "rejected": int(rejects or 0),
        "values": _summed_notes(session, collection_id),
        "oldest_pending": oldest,
    }


def _summed_notes(session: Session, collection_id: int) -> dict[str, dict[str, int]]:
    """Every batch's notes added up: {"unreadable": {field: n}, "truncated": {...}}."""
    out: dict[str, dict[str, int]] = {}
    rows: Iterable[dict[str, Any] | None] = session.scalars(
        select(Batch.notes).where(Batch.collection_id == collection_id, Batch.notes.is_not(None))
    )
    for notes in rows:
        for kind, counts in (notes or {}).items():
            into = out.setdefault(kind, {})
            for name, n in counts.items():
                into[name] = into.get(name, 0) + int(n)
    return out


def recent_batches(
    session: Session, collection_id: int, limit: int = 20
) -> list[tuple[int, dict[str, Any], dt.datetime | None]]:
    """The last ``limit`` done batches, oldest first: ``(n_accepted, timings, finished_at)``."""
    rows = session.execute(
        select(Batch.n_accepted, Batch.timings, Batch.finished_at)
        .where(Batch.collection_id == collection_id, Batch.status == "done")
        .order_by(Batch.seq.desc())
        .limit(limit)
    ).all()
    return [(int(r.n_accepted), dict(r.timings or {}), r.finished_at) for r in reversed(rows)]


def seqs_with_status(session: Session, collection_id: int, status: str) -> list[int]:
    """Seqs of the collection's batches with ``status``, in order."""
    query = (
        select(Batch.seq)
        .where(Batch.collection_id == collection_id, Batch.status == status)
        .order_by(Batch.seq)
    )
    return [int(seq) for seq in session.scalars(query)]


def batch_status(session: Session, collection_id: int, seq: int) -> str | None:
    """The status of batch ``seq`` of the collection (None: no such batch)."""
    return session.scalar(
        select(Batch.status).where(Batch.collection_id == collection_id, Batch.seq == seq)
    )


def last_failure(session: Session, collection_id: int) -> tuple[int, str | None] | None:
    """``(seq, error)`` of the collection's failed batch that failed last, if any."""
    row = session.execute(
        select(Batch.seq, Batch.error)
        .where(Batch.collection_id == collection_id, Batch.status == "failed")
        .order_by(Batch.finished_at.desc().nulls_last(), Batch.seq.desc())
        .limit(1)
    ).first()
    return None if row is None else (int(row.seq), row.error)


def retry_batches(
    session: Session, collection_id: int, seqs: Sequence[int]
) -> list[tuple[int, int, str | None]]:
    """Put the collection's failed batches ``seqs`` back to pending (call after
    :func:`lock_collection`); their errors go to ``Batch.retries``.

    The writer takes batches in seq order and never writes under a seq below one it
    has written. So the batches after which every later batch is failed and retried
    here keep their seq; each other one, which batches resolved since have passed, is
    queued again under a new seq after the last, its mentions with it.

    Returns
    -------
    list of (int, int, str or None)
        ``(old seq, new seq, error)`` of each batch, in the order the writer takes them.
    """
    wanted = set(seqs)
    batches = list(
        session.scalars(
            select(Batch).where(Batch.collection_id == collection_id).order_by(Batch.seq.desc())
        )
    )
    kept: list[Batch] = []
    for batch in batches:  # the last batches, while each is failed and wanted
        if batch.seq not in wanted or batch.status != "failed":
            break
        kept.append(batch)
    moved = [b for b in reversed(batches) if b.seq in wanted and b.status == "failed"]
    moved = [b for b in moved if b not in kept]
    top = batches[0].seq if batches else 0
    now = dt.datetime.now(dt.UTC).isoformat()
    out = []
    for batch in [*reversed(kept), *moved]:
        old = batch.seq
        history = list(batch.retries or [])
        failed_at = batch.finished_at.isoformat() if batch.finished_at else None
        history.append(
            {
                "seq": old,
                "group_end": batch.group_end,  # restored should the step be held already
                "error": batch.error,
                "failed_at": failed_at,
                "retried_at": now,
            }
        )
        if batch in moved:
            top += 1
            batch.seq, batch.group_end = top, None  # a new step: no grouping to replay
            session.flush()  # the new seq is free: unique (collection_id, seq) holds
            _move_mentions(session, collection_id, old, top)
        batch.status, batch.retries, batch.error = "pending", history, None
        batch.started_at = batch.finished_at = None
        batch.worker_id = None
        out.append((old, batch.seq, history[-1]["error"]))
    session.flush()
    return out


def rejected_rows(session: Session, collection_id: int) -> list[tuple[str | None, str]]:
    """``(external id, reason)`` of the collection's rejected records, oldest first."""
    rows = session.execute(
        select(RejectedRecord.external_id, RejectedRecord.reason)
        .where(RejectedRecord.collection_id == collection_id)
        .order_by(RejectedRecord.id)
    ).all()
    return [(ext, str(reason)) for ext, reason in rows]


def writer_lock_free(session: Session, collection_id: int) -> bool | None:
    """Whether no process holds the collection's :func:`writer_lock` (PostgreSQL: the
    server drops a killed writer's lock with its connection); None where it cannot be
    told (SQLite, whose lock is a file another machine cannot see)."""
    if session.get_bind().dialect.name != "postgresql":
        return None
    held = session.scalar(
        text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = :a AND objid = :b AND objsubid = 2"
        ),
        {"a": _LOCK_CLASS, "b": collection_id},
    )
    return not held


@contextmanager
def writer_lock(engine: Engine, collection_id: int, lock_dir: Path) -> Iterator[None]:
    """Hold the one-writer-per-collection lock while the block runs.

    PostgreSQL: a session advisory lock on a connection of its own (the server drops
    it when a crashed worker's connection goes away). SQLite: an flock on a file in
    ``lock_dir`` (the kernel drops it when the process dies). Blocks until free.
    """
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(
                text("SELECT pg_advisory_lock(:a, :b)"), {"a": _LOCK_CLASS, "b": collection_id}
            )
            conn.commit()
            try:
                yield
            finally:
                conn.execute(
                    text("SELECT pg_advisory_unlock(:a, :b)"),
                    {"a": _LOCK_CLASS, "b": collection_id},
                )
                conn.commit()
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = f"writer-{collection_id}-{zlib.crc32(str(engine.url).encode()):08x}.lock"
    with (lock_dir / name).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
