"""Relational schema (DESIGN §3): collections, mentions, batches (and the features an
ingest process made of them), rejects, eval runs; workers and failed tasks (what an
operator sees in ``er status``).

The same models serve PostgreSQL (production, tests) and SQLite (embedded default);
JSON columns become JSONB on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Alembic docs, "The Importance of Naming Constraints": stable names make
# migrations reproducible on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Json = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-increments INTEGER PRIMARY KEY, so ids are BIGINT elsewhere.
Id = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _now() -> Any:
    return func.now()


class Collection(Base):
    """A set of mentions clustered together, with its configuration."""

    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    config: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class Mention(Base):
    """One accepted input record; ``(collection_id, external_id)`` is unique."""

    __tablename__ = "mentions"
    __table_args__ = (
        UniqueConstraint("collection_id", "external_id"),
        Index("ix_mentions_collection_id_node_id", "collection_id", "node_id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    external_id: Mapped[str] = mapped_column(String(512))
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    gold_entity: Mapped[str | None] = mapped_column(String(512), default=None)
    batch_seq: Mapped[int] = mapped_column(BigInteger, index=True)
    # the mention's leaf node in the graph, once a batch has clustered it
    node_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class Batch(Base):
    """One ingest batch of a collection, clustered in ``seq`` order."""

    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("collection_id", "seq"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20), default="pending", index=True)
    n_accepted: Mapped[int] = mapped_column(Integer, default=0)
    n_rejected: Mapped[int] = mapped_column(Integer, default=0)
    timings: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    # sha256 of the batch's input: a re-run with other input is refused (never merged)
    fingerprint: Mapped[str | None] = mapped_column(String(64), default=None)
    # field -> count of values the writer could not read as their type, or cut to length
    notes: Mapped[dict[str, Any] | None] = mapped_column(Json, default=None)
    # the seq of the last batch the writer stepped this one with (a backlog step),
    # recorded before the step so that a replay groups the batches the same way;
    # None: not stepped yet, or stepped alone by an older release
    group_end: Mapped[int | None] = mapped_column(BigInteger, default=None)
    # the worker process that marked the batch running (None: an in-process run)
    worker_id: Mapped[int | None] = mapped_column(
        ForeignKey("workers.id", ondelete="SET NULL"), default=None
    )
    # earlier failures, oldest first, each {"seq", "error", "failed_at", "retried_at"}
    # (er retry; the seq the batch had then, when it was queued again under a new one)
    retries: Mapped[list[dict[str, Any]] | None] = mapped_column(Json, default=None)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), default=None)


class BatchFeatures(Base):
    """A batch's features made by the ingest process that stored it
    (:mod:`er.pipeline.features`): an ``.npz`` of arrays and JSON, read by the writer
    under the config digest it was made with, deleted when the batch is done."""

    __tablename__ = "batch_features"

    batch_id: Mapped[int] = mapped_column(
        Id, ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True
    )
    digest: Mapped[str] = mapped_column(String(64))  # er.pipeline.features.features_digest
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Worker(Base):
    """A worker process (``er worker``, and each ingest process beside it), stamped by
    its heartbeat every ``interval_s`` seconds (:mod:`er.pipeline.heartbeat`); a row per
    process start, so a restarted worker never inherits a dead one's batches."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))  # Celery's node name: celery@host
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    queues: Mapped[str] = mapped_column(String(500), default="")  # comma-separated
    interval_s: Mapped[float] = mapped_column(Float)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    # the database's clock, so workers and readers on other machines agree on ages
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
    stopped_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    last_task: Mapped[str | None] = mapped_column(String(500), default=None)
    last_task_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), default=None)


class FailedTask(Base):
    """A queued task that failed for good in a worker (``er.ingest``, ``er.cluster``),
    with its reason and arguments (an ingest's records), until ``er retry`` queues it
    again."""

    __tablename__ = "failed_tasks"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    task: Mapped[str] = mapped_column(String(100))  # the task's name: er.ingest
    collection: Mapped[str] = mapped_column(String(200), index=True)  # as the task named it
    task_id: Mapped[str | None] = mapped_column(String(64), default=None)
    reason: Mapped[str] = mapped_column(Text)
    kwargs: Mapped[dict[str, Any]] = mapped_column(Json)
    retried_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class RejectedRecord(Base):
    """An input record that failed validation, with the reason (record and field)."""

    __tablename__ = "rejected_records"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    external_id: Mapped[str | None] = mapped_column(String(512), default=None)
    payload: Mapped[Any] = mapped_column(Json)
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())


class EvalRun(Base):
    """One evaluation of a collection's structure against gold labels."""

    __tablename__ = "eval_runs"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    algorithm: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    as_of_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)
    metrics: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    report_path: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=_now())
