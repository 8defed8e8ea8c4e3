"""Engine creation and Alembic upgrades driven from code (``er init``, tests)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, make_url, text

# migrations/ ships inside the package as er._migrations (see setup.py).
_MIGRATIONS = Path(str(resources.files("er._migrations")))
_MIGRATION_LOCK = 0x6572_0001  # advisory lock key of schema upgrades


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite gets foreign keys and WAL for concurrent readers.

    psycopg prepares a statement on the server after its fifth run on a connection, and
    PostgreSQL may then keep one generic plan for it. er's statements carry long id
    lists against tables that grow by orders of magnitude, so a plan chosen while a
    table was small turns into a scan later (looking up a batch's ids took 0.25 s at
    25k mentions and 3.5 s at 125k on a kept connection); every statement is planned
    for its values instead (``prepare_threshold=None``).
    """
    extra: dict[str, Any] = {}
    if make_url(url).get_driver_name() == "psycopg":
        extra["connect_args"] = {"prepare_threshold": None}
    engine = create_engine(url, pool_pre_ping=True, **extra)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: object) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.close()


def alembic_config(engine: Engine | None = None) -> Config:
    """Alembic config from ``pyproject.toml``; an engine, if given, is used directly."""
    cfg = Config()  # the packaged scripts; pyproject's [tool.alembic] is for the alembic CLI
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the relational schema of ``engine`` to ``revision``.

    Safe to run from several processes at once (workers starting together): they
    take turns under a lock, and the later ones find nothing to do.
    """
    with _migration_lock(engine):
        command.upgrade(alembic_config(engine), revision)


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """PostgreSQL: a session advisory lock; SQLite: an flock beside the database file."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:a, 0)"), {"a": _MIGRATION_LOCK})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:a, 0)"), {"a": _MIGRATION_LOCK})
                conn.commit()
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrate.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Downgrade the relational schema of ``engine`` to ``revision``."""
    command.downgrade(alembic_config(engine), revision)


def check(engine: Engine) -> None:
    """Raise if the models and the migrated database differ (``alembic check``)."""
    command.check(alembic_config(engine))
