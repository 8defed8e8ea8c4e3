"""Neo4j adapter over the official driver (Bolt), with managed transactions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import neo4j
import neo4j.exceptions

from er.exceptions import ConfigError, StoreError, TransientStoreError
from er.stores.graph import _cypher as cy
from er.stores.graph._base import GraphStore

__all__ = ["Neo4jStore"]

_TRANSIENT = (
    neo4j.exceptions.ServiceUnavailable,
    neo4j.exceptions.SessionExpired,
    neo4j.exceptions.TransientError,
)


class Neo4jStore(GraphStore):
    """Graph store on Neo4j 5.

    Parameters
    ----------
    driver : neo4j.Driver
        An open driver; the caller owns it.
    database : str or None, default None
        Database name (None: the server's default).
    write_batch_size : int, default 2000
        Rows per ``UNWIND`` statement. All of a delta's statements run in one
        transaction whatever this is.
    """

    engine = "neo4j"

    def __init__(
        self, driver: neo4j.Driver, database: str | None = None, write_batch_size: int = 2000
    ) -> None:
        if not isinstance(driver, neo4j.Driver):
            raise ConfigError(
                f"Neo4jStore takes a neo4j.Driver. Got {type(driver).__name__} instead."
            )
        if write_batch_size < 1:
            raise ConfigError(
                "The 'write_batch_size' parameter of Neo4jStore must be an int in the range "
                f"[1, inf). Got {write_batch_size!r} instead."
            )
        self._driver = driver
        self._database = database
        self._batch = write_batch_size

    def _statements(
        self, parts: Sequence[cy.WritePart], params: dict[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each ``(cypher, parameters)`` a write sends, its rows split into batches.

        The one place that decides what reaches the server, so that the offline Cypher
        check (``tests/integration/test_neo4j_cypher.py``) lints exactly what is sent.
        """
        for part in parts:
            for start in range(0, len(part.rows), self._batch):
                chunk = part.rows[start : start + self._batch]
                yield part.cypher, {**params, part.rows_param: chunk}

    def _write(self, parts: Sequence[cy.WritePart], params: dict[str, Any]) -> None:
        def work(tx: neo4j.ManagedTransaction) -> None:
            # The driver may retry this function: every statement is idempotent.
            for cypher, statement_params in self._statements(parts, params):
                tx.run(cypher, statement_params).consume()

        if parts:
            with self._driver.session(database=self._database) as session:
                session.execute_write(work)

    def _read(self, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        records, _, _ = self._driver.execute_query(
            cypher, params, database_=self._database, routing_=neo4j.RoutingControl.READ
        )
        return [record.data() for record in records]

    def _run_schema(self, statements: Sequence[str]) -> None:
        for statement in statements:
            self._driver.execute_query(statement, database_=self._database)

    def _translate(self, exc: Exception) -> StoreError | None:
        if isinstance(exc, _TRANSIENT):
            return TransientStoreError(f"neo4j: {type(exc).__name__}")
        if isinstance(exc, neo4j.exceptions.Neo4jError | neo4j.exceptions.DriverError):
            return StoreError(f"neo4j: {type(exc).__name__}: {getattr(exc, 'message', '')}")
        return None
