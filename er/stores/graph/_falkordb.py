"""FalkorDB adapter (embedded default and test database)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis.exceptions
from falkordb import Graph

from er.exceptions import ConfigError, StoreError, TransientStoreError
from er.stores.graph import _cypher as cy
from er.stores.graph._base import GraphStore

__all__ = ["FalkorDBStore"]

# Parts are chained into one query: FalkorDB runs a query atomically and undoes
# it on a runtime error, which gives apply_delta its all-or-nothing guarantee.
_CHAIN = " WITH count(*) AS _done "


class FalkorDBStore(GraphStore):
    """Graph store on FalkorDB.

    Parameters
    ----------
    graph : falkordb.Graph
        The graph to use (``FalkorDB(...).select_graph(name)``); the caller owns the
        connection.
    server_alive : callable, optional
        Whether the server behind ``graph`` still runs, when the caller started it (an
        embedded FalkorDB): :meth:`lost` once it returns False.
    """

    engine = "falkordb"

    def __init__(self, graph: Graph, *, server_alive: Callable[[], bool] | None = None) -> None:
        if not isinstance(graph, Graph):
            raise ConfigError(
                f"FalkorDBStore takes a falkordb.Graph. Got {type(graph).__name__} instead."
            )
        self._graph = graph
        self._server_alive = server_alive

    def lost(self) -> bool:
        return self._server_alive is not None and not self._server_alive()

    def _write(self, parts: Sequence[cy.WritePart], params: dict[str, Any]) -> None:
        if not parts:
            return
        query = _CHAIN.join(p.cypher for p in parts)
        self._graph.query(query, {**params, **{p.rows_param: p.rows for p in parts}})

    def _read(self, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        result = self._graph.ro_query(cypher, params)
        names = [h[1] for h in result.header]
        return [dict(zip(names, row, strict=True)) for row in result.result_set]

    def _run_schema(self, statements: Sequence[str]) -> None:
        for statement in statements:
            try:
                self._graph.query(statement)
            except redis.exceptions.ResponseError as exc:
                # FalkorDB has neither IF NOT EXISTS nor IF EXISTS for indexes.
                if "already indexed" not in str(exc) and "no such index" not in str(exc):
                    raise

    def _translate(self, exc: Exception) -> StoreError | None:
        if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            return TransientStoreError(f"falkordb: connection failed ({type(exc).__name__})")
        if isinstance(exc, redis.exceptions.RedisError):
            return StoreError(f"falkordb: {exc}")
        return None
