"""The process's store connections, opened once per settings, and SQL errors made transient."""

from __future__ import annotations

import atexit
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import InterfaceError, OperationalError, ProgrammingError

from er.exceptions import StoreError, TransientStoreError, missing_tables
from er.stores.graph import GraphStore

logger = logging.getLogger(__name__)

_LOST_DATABASE = (OperationalError, InterfaceError)
# Errors that leave a batch pending for the task's retry instead of failing it: a lost
# store, or a task's soft time limit (celery raises billiard's exception in the task).
_STORES: dict[tuple[str, str, str], tuple[Engine, GraphStore, contextlib.ExitStack]] = {}
_ENGINES: dict[str, Engine] = {}


def _engine(settings: Any) -> Engine:
    """The process's SQL engine for these settings, opened once (an ingest worker, which
    needs no graph, keeps its connection pool between tasks); disposed at exit."""
    from er.stores.sql import make_engine

    url = str(settings.sqlalchemy_url)
    if url not in _ENGINES:
        _ENGINES[url] = engine = make_engine(url)
        atexit.register(engine.dispose)
    return _ENGINES[url]


def _stores(settings: Any) -> tuple[Engine, GraphStore]:
    """The process's engine and graph store for these settings, opened once.

    A worker keeps its stores for its whole life (an embedded FalkorDB starts once,
    the graph's indexes are ensured once); they close when the process exits. An
    embedded server that died (killed, out of memory) is started again here, from its
    append-only log: the task that met its death failed as transient and retries, and
    every write the dead server acknowledged is in the log, so the graph holds them.
    """
    from er.stores.graph import open_graph_store

    key = (settings.sqlalchemy_url, settings.graph_url, str(settings.data_dir.resolve()))
    if key in _STORES and _STORES[key][1].lost():
        logger.warning("the graph server of %s died; starting it again", settings.data_dir)
        _close(_STORES.pop(key)[2])
    if key not in _STORES:
        stack = contextlib.ExitStack()
        try:
            graph = stack.enter_context(
                open_graph_store(
                    settings.graph_url,
                    data_dir=settings.data_dir,
                    graph_name=settings.graph_name,
                    user=settings.graph_user,
                    password=settings.graph_password,
                )
            )
            graph.init_schema()  # idempotent; without the key index every write scans
            engine = _engine(settings)
        except BaseException:
            # what was opened closes now: an embedded server that died while its
            # schema was ensured would otherwise keep the data dir's lock, and every
            # later open would find the dead server's port (issue #54's chaos test)
            stack.close()
            raise
        atexit.register(stack.close)
        _STORES[key] = (engine, graph, stack)
    engine, graph, _ = _STORES[key]
    return engine, graph


def _close(stack: contextlib.ExitStack) -> None:
    atexit.unregister(stack.close)
    stack.close()


def close_stores() -> None:
    """Close the cached stores now (benchmarks, tests); the process exit does it anyway."""
    while _STORES:
        _, (_, _, stack) = _STORES.popitem()
        _close(stack)
    while _ENGINES:
        _, engine = _ENGINES.popitem()
        engine.dispose()


@contextlib.contextmanager
def _transient_sql() -> Iterator[None]:
    """A lost database connection is transient: the task retries it. A database that
    holds no er tables is not lost (SQLite says both with one exception class): one
    line, no retry."""
    try:
        yield
    except (*_LOST_DATABASE, ProgrammingError) as exc:
        line = missing_tables(exc)
        if line is not None:
            raise StoreError(line) from None
        if isinstance(exc, ProgrammingError):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TransientStoreError(f"database unavailable: {first}") from exc
