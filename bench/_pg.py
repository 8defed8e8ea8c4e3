"""A throwaway PostgreSQL database for a benchmark run (the machine's server, trust auth)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """Create ``er_bench_<random>``, yield its SQLAlchemy URL, drop it afterwards."""
    import psycopg

    name = f"er_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')  # a name we generated, never input
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
