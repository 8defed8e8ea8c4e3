"""Open a graph store from an ``ER_GRAPH_URL``-style URL (entry points only)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from er.exceptions import ConfigError, DataDirLockedError, StoreError
from er.stores.graph._base import GraphStore

__all__ = ["open_graph_store"]

logger = logging.getLogger(__name__)

_SCHEMES = ("falkordb+embedded", "falkordb", "neo4j", "neo4j+s", "bolt", "bolt+s")


@contextmanager
def open_graph_store(
    url: str,
    *,
    data_dir: Path | str,
    graph_name: str = "er",
    user: str | None = None,
    password: str | None = None,
) -> Iterator[GraphStore]:
    """Yield a ready graph store for ``url``; close everything it opened on exit.

    ``falkordb+embedded://`` starts FalkorDB as a child process with its data in
    ``data_dir``; ``falkordb://host:port`` connects to a running FalkorDB;
    ``neo4j://``, ``bolt://`` (and their ``+s`` forms) connect to Neo4j.
    """
    scheme = urlsplit(url).scheme
    if scheme not in _SCHEMES:
        raise ConfigError(
            f"ER_GRAPH_URL must start with one of {', '.join(s + '://' for s in _SCHEMES)}. "
            f"Got {url!r} instead."
        )
    with ExitStack() as stack:
        if scheme.startswith("falkordb"):
            store = _falkordb(url, scheme, data_dir, graph_name, stack)
        else:
            store = _neo4j(url, graph_name, user, password, stack)
        yield store


def _falkordb(
    url: str, scheme: str, data_dir: Path | str, graph: str, stack: ExitStack
) -> GraphStore:
    from falkordb import FalkorDB

    from er.stores.graph._falkordb import FalkorDBStore

    alive = None
    if scheme == "falkordb+embedded":
        host, port, password, alive = "127.0.0.1", *_embedded(data_dir, stack)
    else:  # falkordb://[:password@]host:port
        parts = urlsplit(url)
        host, port, password = parts.hostname or "127.0.0.1", parts.port or 6379, parts.password
    try:
        db = FalkorDB(host=host, port=port, password=password)  # connects and checks
        stack.callback(db.connection.close)
        db.connection.ping()
    except Exception as exc:  # redis-py raises several connection error types
        raise StoreError(
            f"cannot reach FalkorDB at {host}:{port} (ER_GRAPH_URL): {_first_line(exc)}"
        ) from None
    return FalkorDBStore(db.select_graph(graph), server_alive=alive)


def _embedded(
    data_dir: Path | str, stack: ExitStack
) -> tuple[int, str | None, Callable[[], bool] | None]:
    """Start the data dir's FalkorDB, or share the one another er process runs.

    The first er process on a data dir owns the server (and stops it when it exits);
    the others (``er worker`` beside ``er ingest``, ``er export``, ``er query``)
    connect to the port the owner recorded, with the data dir's password. Returns the
    port, the password and, for the owner, whether its server still runs.
    """
    from er.stores.graph._embedded import EmbeddedFalkorDB

    try:
        server = stack.enter_context(EmbeddedFalkorDB(data_dir))
    except DataDirLockedError:
        shared = EmbeddedFalkorDB.running(data_dir)
        if shared is None:
            raise
        logger.info("sharing the embedded FalkorDB on 127.0.0.1:%d", shared[0])
        return (*shared, None)
    return int(server.port or 0), server.password, server.alive


def _neo4j(
    url: str, database: str, user: str | None, password: str | None, stack: ExitStack
) -> GraphStore:
    import neo4j

    from er.stores.graph._neo4j import Neo4jStore

    auth = (user, password or "") if user else None
    driver = neo4j.GraphDatabase.driver(url, auth=auth)
    stack.callback(driver.close)
    try:
        driver.verify_connectivity()
    except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
        raise StoreError(
            f"cannot reach Neo4j at {urlsplit(url).netloc} (ER_GRAPH_URL): {_first_line(exc)}"
        ) from None
    return Neo4jStore(driver, database=database)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
