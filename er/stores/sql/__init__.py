"""Relational store: SQLAlchemy 2 models and data functions (PostgreSQL, SQLite)."""

from er.stores.sql._evals import eval_runs, find_collection, last_done_seq, mentions_by_node
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
    "count_mentions",
    "eval_runs",
    "find_collection",
    "get_or_create_collection",
    "last_done_seq",
    "make_engine",
    "mentions_by_node",
    "set_mention_nodes",
    "upgrade",
    "upsert_mentions",
]
