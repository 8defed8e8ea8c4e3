"""Which SQL errors a task retries: a lost database, not one that holds no tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from er.exceptions import NO_TABLES, StoreError, TransientStoreError
from er.pipeline.stores import _transient_sql
from er.stores.sql import Collection


def test_a_database_without_tables_is_not_retried(tmp_path: Path) -> None:
    # SQLite raises OperationalError both for "no such table" and for a lost file; a
    # worker started before any migration must fail with the one line, not retry
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(StoreError) as raised, _transient_sql(), Session(engine) as session:
        session.execute(select(Collection)).all()
    assert not isinstance(raised.value, TransientStoreError)
    assert not raised.value.is_retryable and str(raised.value) == NO_TABLES


def test_a_postgresql_database_without_tables_is_not_retried(empty_pg_url: str) -> None:
    """PostgreSQL tells a missing table by its error code (42P01), not by a message
    that a locale may translate: a fresh database gets the one line, no retry."""
    engine = create_engine(empty_pg_url)
    try:
        with pytest.raises(StoreError) as raised, _transient_sql(), Session(engine) as session:
            session.execute(select(Collection)).all()
        assert not isinstance(raised.value, TransientStoreError)
        assert str(raised.value) == NO_TABLES
    finally:
        engine.dispose()  # the fixture drops the database after


def test_a_database_that_cannot_be_opened_is_retried(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.db'}")
    with (
        pytest.raises(TransientStoreError, match="database unavailable"),
        _transient_sql(),
        Session(engine) as session,
    ):
        session.execute(select(Collection)).all()
