"""Shared fixtures: real PostgreSQL, real FalkorDB (embedded), optional real Neo4j.

A service that the run needs and cannot reach fails the run; only the Neo4j tests
are skipped, when NEO4J_URI is not set, and the summary says so.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_ADMIN_URL = os.environ.get("ER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not os.environ.get("NEO4J_URI"):
        terminalreporter.write_line(
            "neo4j: tests against a real Neo4j server were skipped (NEO4J_URI not set); "
            "the Neo4j adapter ran against FalkorDB's Bolt port instead."
        )


@contextmanager
def _throwaway_database() -> Iterator[str]:
    """URL of a new, empty PostgreSQL database, dropped on leaving."""
    import psycopg

    name = f"er_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_ADMIN_URL} and is not reachable: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # identifier we generated, not input
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a throwaway PostgreSQL database, dropped after the session."""
    with _throwaway_database() as url:
        yield url


@pytest.fixture
def empty_pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database of this test's own, without er's tables."""
    with _throwaway_database() as url:
        yield url


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One embedded FalkorDB for the session, as er runs it (durable, no Bolt)."""
    from er.stores.graph import EmbeddedFalkorDB

    with EmbeddedFalkorDB(tmp_path_factory.mktemp("falkordb")) as server:
        yield server


@pytest.fixture
def falkordb_bolt_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A FalkorDB with its Bolt port open, for the Neo4j adapter; one per test.

    FalkorDB's Bolt layer is experimental: a statement that fails can take the
    server down, so no test inherits another's server. Not durable: FalkorDB 4.16
    also crashes on Bolt writes while its append-only file is on.
    """
    from er.stores.graph import EmbeddedFalkorDB

    with EmbeddedFalkorDB(
        tmp_path_factory.mktemp("falkordb-bolt"), bolt=True, durable=False
    ) as server:
        yield server
