"""Exceptions raised by er.

Every error er raises on purpose derives from :class:`ERError`::

    ERError
    ├── ConfigError (ValueError)          bad hyper-parameter, setting or URL
    ├── NotFittedError (AttributeError)   estimator used before fit
    ├── RecordError (ValueError)          an input record failed validation
    ├── DataDirLockedError                another er process owns the data dir
    ├── IndexStaleError                   ANN index older than the data asked for
    └── StoreError                        a store operation failed
        └── TransientStoreError           ... and may succeed if retried

``is_retryable`` tells a task whether retrying can help; Celery tasks retry only
:class:`TransientStoreError`.
"""

from __future__ import annotations


class ERError(Exception):
    """Root of er's exceptions."""

    @property
    def is_retryable(self) -> bool:
        return False


class ConfigError(ERError, ValueError):
    """A hyper-parameter, setting or URL is invalid."""


class NotFittedError(ERError, AttributeError):
    """An estimator was used before ``fit``."""


class RecordError(ERError, ValueError):
    """An input record failed validation.

    Parameters
    ----------
    record : str
        The record's external id (or its position when it has none).
    field : str
        The offending field.
    reason : str
        What is wrong with it.
    """

    def __init__(self, record: str, field: str, reason: str) -> None:
        self.record = record
        self.field = field
        self.reason = reason
        super().__init__(f"record {record!r}, field {field!r}: {reason}")


class BatchConflictError(ERError):
    """A batch that was already resolved came back with different input."""


class DataDirLockedError(ERError):
    """Another er process owns the embedded database in this data dir."""


class IndexStaleError(ERError):
    """The ANN index is older than the data the caller asked for."""


class StoreError(ERError):
    """A store operation failed; the operation's name is in the message."""


class TransientStoreError(StoreError):
    """A store operation failed in a way that a retry may fix (connection, deadlock)."""

    @property
    def is_retryable(self) -> bool:
        return True


NO_TABLES = (
    "the database holds no er tables yet: `er ingest` (or `er init`) makes them; "
    "check ER_DATABASE_URL / ER_DATA_DIR if it should hold collections."
)


UNDEFINED_TABLE = "42P01"  # PostgreSQL's SQLSTATE for a relation that does not exist


def missing_tables(exc: BaseException) -> str | None:
    """:data:`NO_TABLES` when ``exc`` or an exception in its chain says the database
    has no er tables; None otherwise. A database without the tables is not a lost
    one: retrying cannot help.

    PostgreSQL says so by its error code (psycopg's ``sqlstate``, 42P01). SQLite
    raises the same ``OperationalError`` for a missing table as for a file it cannot
    open, with no code that tells them apart, so there its message is read ("no such
    table")."""
    seen: BaseException | None = exc
    while seen is not None:
        if getattr(seen, "sqlstate", None) == UNDEFINED_TABLE or "no such table" in str(seen):
            return NO_TABLES
        seen = seen.__cause__ or seen.__context__
    return None
