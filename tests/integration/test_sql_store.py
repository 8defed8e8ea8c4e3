"""Relational store: migrations on PostgreSQL and SQLite, and the data functions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text
from sqlalchemy.orm import Session

from er.stores.sql import (
    Base,
    count_mentions,
    get_or_create_collection,
    make_engine,
    upgrade,
    upsert_mentions,
)
from er.stores.sql._migrate import check, downgrade

TABLES = {"collections", "mentions", "batches", "rejected_records", "eval_runs"}


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"])
def fresh_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on an empty database of each dialect."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'er.sqlite3'}")
    else:
        engine = make_engine(request.getfixturevalue("pg_url"))
        downgrade(engine, "base")  # the session database may hold an earlier test's schema
    yield engine
    engine.dispose()


def test_upgrade_downgrade_upgrade_and_no_drift(fresh_engine: Engine) -> None:
    upgrade(fresh_engine)
    assert set(inspect(fresh_engine).get_table_names()) >= TABLES
    downgrade(fresh_engine, "base")
    assert not TABLES & set(inspect(fresh_engine).get_table_names())
    upgrade(fresh_engine)
    check(fresh_engine)  # raises if the models and the migrated schema differ


def test_migrations_match_the_models_column_for_column(fresh_engine: Engine) -> None:
    upgrade(fresh_engine)
    insp = inspect(fresh_engine)
    for table in Base.metadata.sorted_tables:
        assert {c["name"] for c in insp.get_columns(table.name)} == set(table.columns.keys())


@pytest.fixture
def session(fresh_engine: Engine) -> Iterator[Session]:
    """A session joined to an outer transaction that is rolled back after the test."""
    upgrade(fresh_engine)
    with fresh_engine.connect() as conn:
        outer = conn.begin()
        with Session(bind=conn, join_transaction_mode="create_savepoint") as s:
            yield s
        outer.rollback()


def test_same_record_twice_is_one_mention(session: Session) -> None:
    coll = get_or_create_collection(session, "people", {"algorithm": "mbscc"})
    rows = [{"external_id": f"r{i}", "payload": {"name": f"n{i}"}} for i in range(10)]
    assert upsert_mentions(session, coll.id, 1, rows) == 10
    assert (
        upsert_mentions(session, coll.id, 2, [*rows[5:], {"external_id": "r10", "payload": {}}])
        == 1
    )
    assert count_mentions(session, coll.id) == 11
    first = session.execute(
        text("SELECT batch_seq FROM mentions WHERE external_id = 'r7'")
    ).scalar_one()
    assert first == 1  # the accepted record is not overwritten by its duplicate


def test_collections_are_separate_and_reused(session: Session) -> None:
    a = get_or_create_collection(session, "a")
    b = get_or_create_collection(session, "b")
    assert get_or_create_collection(session, "a").id == a.id != b.id
    upsert_mentions(session, a.id, 1, [{"external_id": "x", "payload": {}}])
    upsert_mentions(session, b.id, 1, [{"external_id": "x", "payload": {}}])
    assert count_mentions(session, a.id) == count_mentions(session, b.id) == 1


def test_hostile_values_are_stored_verbatim(session: Session) -> None:
    coll = get_or_create_collection(session, "c'); DROP TABLE mentions; --")
    hostile = "r'); DELETE FROM mentions; --"
    upsert_mentions(session, coll.id, 1, [{"external_id": hostile, "payload": {"q": hostile}}])
    stored = session.execute(text("SELECT external_id, payload FROM mentions")).one()
    assert stored.external_id == hostile
    payload = stored.payload if isinstance(stored.payload, dict) else json.loads(stored.payload)
    assert payload == {"q": hostile}


def test_duplicates_inside_one_batch_keep_the_first(session: Session) -> None:
    coll = get_or_create_collection(session, "dups")
    rows = [
        {"external_id": "a", "payload": {"v": 1}},
        {"external_id": "b", "payload": {"v": 2}},
        {"external_id": "a", "payload": {"v": 3}},
    ]
    assert upsert_mentions(session, coll.id, 1, rows) == 2
    stored = session.execute(
        text("SELECT payload FROM mentions WHERE external_id = 'a'")
    ).scalar_one()
    assert (stored if isinstance(stored, dict) else json.loads(stored)) == {"v": 1}


def test_a_batch_is_stored_in_arrival_order(session: Session) -> None:
    """Mention ids follow the input order on both databases: the writer clusters a batch
    in that order, so PostgreSQL and SQLite must give the same structure."""
    from er.stores.sql import batch_mentions

    coll = get_or_create_collection(session, "order")
    names = ["m2", "m10", "b", "a", "m1", "z", "a"]  # not sorted; "a" twice: first wins
    upsert_mentions(
        session, coll.id, 1, [{"external_id": n, "payload": {"k": k}} for k, n in enumerate(names)]
    )
    assert [ext for ext, _ in batch_mentions(session, coll.id, 1)] == [
        "m2",
        "m10",
        "b",
        "a",
        "m1",
        "z",
    ]


@pytest.mark.postgres
def test_a_kept_connection_plans_each_statement_for_its_values(pg_url: str) -> None:
    """The server holds no prepared statement however often one query runs on a
    connection: a generic plan kept from when the table was small became a scan (the
    ingest lookup of a batch's ids grew from 0.25 to 3.5 s between 25k and 125k)."""
    from er.stores.sql import stored_payloads

    engine = make_engine(pg_url)
    upgrade(engine)
    try:
        with Session(engine) as s, s.begin():
            coll = get_or_create_collection(s, "prepared")
            for _ in range(8):  # psycopg prepares after the fifth run by default
                stored_payloads(s, coll.id, [f"m{i}" for i in range(50)])
            held = s.execute(text("SELECT count(*) FROM pg_prepared_statements")).scalar()
            s.rollback()
        assert held == 0
    finally:
        engine.dispose()


def test_any_pending_follows_every_status(session: Session) -> None:
    from er.stores.sql import any_pending, finish_batch, open_batch, pending_batches

    coll = get_or_create_collection(session, "pending")
    other = get_or_create_collection(session, "other")
    assert not any_pending(session, coll.id)
    batches = [open_batch(session, coll.id) for _ in range(3)]
    session.flush()
    batches[1].status = "running"
    for ends in ("done", "failed", "done"):
        assert any_pending(session, coll.id) == bool(pending_batches(session, coll.id))
        left = [b for b in batches if b.status in ("pending", "running")]
        finish_batch(session, left[0].id, ends, {}, None)
        session.flush()
    assert not any_pending(session, coll.id) and not pending_batches(session, coll.id)
    open_batch(session, other.id)
    session.flush()
    assert not any_pending(session, coll.id) and any_pending(session, other.id)
