"""Relational store: SQLAlchemy 2 models and data functions (PostgreSQL, SQLite)."""

from er.stores.sql._batches import (
    any_pending,
    batch_counts,
    batch_mentions,
    batches_after,
    finish_batch,
    lock_collection,
    open_batch,
    pending_batches,
    recent_batches,
    record_rejects,
    refused_records,
    stored_payloads,
    writer_lock,
)
from er.stores.sql._evals import (
    eval_runs,
    find_collection,
    gold_labels,
    last_done_seq,
    mentions_of_nodes,
)
from er.stores.sql._mentions import (
    count_mentions,
    get_or_create_collection,
    set_mention_nodes,
    upsert_mentions,
)
from er.stores.sql._migrate import make_engine, upgrade
from er.stores.sql._models import Base, Batch, Collection, EvalRun, Mention, RejectedRecord

__all__ = [
    "Base",
    "Batch",
    "Collection",
    "EvalRun",
    "Mention",
    "RejectedRecord",
    "any_pending",
    "batch_counts",
    "batch_mentions",
    "batches_after",
    "count_mentions",
    "eval_runs",
    "find_collection",
    "finish_batch",
    "get_or_create_collection",
    "gold_labels",
    "last_done_seq",
    "lock_collection",
    "make_engine",
    "mentions_of_nodes",
    "open_batch",
    "pending_batches",
    "recent_batches",
    "record_rejects",
    "refused_records",
    "set_mention_nodes",
    "stored_payloads",
    "upgrade",
    "upsert_mentions",
    "writer_lock",
]
