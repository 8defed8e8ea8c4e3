"""The graph store port: one interface, a FalkorDB and a Neo4j adapter.

Template methods here own validation, statement building, logging and error
wrapping; adapters implement three primitives (``_write``, ``_read``,
``_run_schema``) over their driver.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, final

import numpy as np
from numpy.typing import NDArray

from er.delta import ClusteringDelta
from er.entities import EntityStep
from er.exceptions import ConfigError, StoreError
from er.stores.graph import _cypher as cy
from er.stores.graph._structure import WINDOW, Memberships, Structure, id_pairs, node_columns

logger = logging.getLogger(__name__)

__all__ = ["GraphStore", "Memberships", "Structure"]


def _node_rows(
    delta: ClusteringDelta, leaf: bool, external_ids: Mapping[int, str] | None = None
) -> list[list[Any]]:
    """Rows ``[id, size, score, level_lo, level_hi]`` of the delta's mentions or clusters
    (:data:`~er.stores.graph._cypher.NODE_ROW`; NaN scores as null); mention rows also
    carry the record's external id (null when unknown)."""
    keep = np.flatnonzero(delta.is_leaf == leaf)
    score = [None if c != c else c for c in delta.score[keep].tolist()]  # c != c: NaN
    columns = [
        delta.node_id[keep].tolist(),
        delta.size[keep].tolist(),
        score,
        delta.level_lo[keep].tolist(),
        delta.level_hi[keep].tolist(),
    ]
    if leaf:
        ext = external_ids or {}
        columns.append([_text_or_none(ext.get(i)) for i in columns[0]])
    return [list(row) for row in zip(*columns, strict=True)]


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _edge_rows(edges: NDArray[np.int64]) -> list[list[int]]:
    """Rows ``[child, parent]``."""
    rows: list[list[int]] = np.asarray(edges, np.int64).reshape(-1, 2).tolist()
    return rows


def _pair_rows(pairs: Sequence[tuple[Any, Any]]) -> list[list[int]]:
    """Rows ``[mention, entity]`` (or any integer pairs)."""
    return [[int(a), int(b)] for a, b in pairs]


def _entity_parts(step: EntityStep | None) -> list[cy.WritePart]:
    """Statements of an entity step (mentions named by node id), in dependency order:
    mint, close memberships, open memberships, events, retire."""
    if step is None:
        return []
    return [
        cy.WritePart(
            cy.mint_entities_cypher(), "minted_entity_rows", [int(e) for e in step.minted]
        ),
        cy.WritePart(cy.leave_entities_cypher(), "left_entity_rows", _pair_rows(step.left)),
        cy.WritePart(cy.join_entities_cypher(), "joined_entity_rows", _pair_rows(step.joined)),
        cy.WritePart(
            cy.entity_events_cypher(),
            "entity_event_rows",
            [[int(a), int(b), str(k)] for a, b, k in step.events],
        ),
        cy.WritePart(
            cy.retire_entities_cypher(), "retired_entity_rows", [int(e) for e in step.retired]
        ),
    ]


def _near_rows(near: Sequence[tuple[int, int, float]] | None) -> list[list[Any]]:
    """Rows ``[mention, neighbour, cosine]``."""
    return [[int(a), int(b), float(s)] for a, b, s in (near or ())]


def _check_seq(batch_seq: int) -> int:
    if isinstance(batch_seq, bool) or not isinstance(batch_seq, int | np.integer) or batch_seq < 1:
        raise ConfigError(f"batch_seq must be an int >= 1. Got {batch_seq!r} instead.")
    return int(batch_seq)


def _check_as_of(as_of: int | None) -> int:
    return cy.AS_OF_NOW if as_of is None else int(as_of)


def _start(collection: str, node_id: int, as_of: int | None) -> dict[str, Any]:
    """Parameters of a query that starts from one node (:func:`cy.from_key`)."""
    return {
        "collection": collection,
        "key": cy.node_key(collection, int(node_id)),
        "as_of": _check_as_of(as_of),
    }


class GraphStore(ABC):
    """Where hierarchies live: nodes, parent edges and their history.

    Every structure is scoped by a ``collection`` name, so one graph holds many
    collections. Writes are stamped with a batch sequence number and idempotent.
    """

    engine: str = ""

    # -- primitives -------------------------------------------------------------
    @abstractmethod
    def _write(self, parts: Sequence[cy.WritePart], params: dict[str, Any]) -> None:
        """Run ``parts`` in order, all or nothing."""

    @abstractmethod
    def _read(self, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Run a read query; return its rows as dicts keyed by column."""

    @abstractmethod
    def _run_schema(self, statements: Sequence[str]) -> None:
        """Apply DDL statements, skipping what already exists."""

    @abstractmethod
    def _translate(self, exc: Exception) -> StoreError | None:
        """Map a driver exception to a StoreError, or None if it is not the driver's."""

    def close(self) -> None:  # noqa: B027 - adapters without resources need not override
        """Release the adapter's resources (the caller owns the driver)."""

    def lost(self) -> bool:
        """Whether the server behind this store is gone for good: a server this process
        started has died, so the store must be opened again (which starts it again).
        False for a server someone else runs: its connection errors are transient."""
        return False

    # -- template methods -----------------------------------------------------------
    @contextmanager
    def _operation(self, op: str) -> Iterator[None]:
        # Log the operation's name only: parameters hold personal data.
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            wrapped = self._translate(exc)
            if wrapped is None:
                raise
            logger.warning("graph store %s failed on %s: %s", self.engine, op, type(exc).__name__)
            raise wrapped from exc

    @final
    def init_schema(self) -> None:
        """Create indexes and constraints; safe to run any number of times."""
        with self._operation("init_schema"):
            self._run_schema(cy.schema_statements(self.engine))

    @final
    def apply_delta(
        self,
        collection: str,
        delta: ClusteringDelta,
        batch_seq: int,
        *,
        external_ids: Mapping[int, str] | None = None,
        entities: EntityStep | None = None,
        near: Sequence[tuple[int, int, float]] | None = None,
    ) -> None:
        """Apply one step's delta in one transaction, stamped with ``batch_seq``.

        Edges retire first, then nodes are upserted and retired, then edges are
        added. Applying the same delta with the same ``batch_seq`` again changes
        nothing. ``external_ids`` maps mention node ids to the external ids of their
        records, stored on the mention nodes (``external_id``) so that users and
        ``er query --mention`` find a record's node by the id they ingested.

        ``entities`` (DESIGN §3, stable entity ids) is the batch's entity step with
        mentions named by node id: entities minted and retired,
        ``(:Mention)-[:IN_ENTITY {since, until}]->(:Entity)`` memberships opened and
        closed, ``(:Entity)-[:BECAME {batch, kind}]->(:Entity)`` events. ``near`` holds
        ``(mention, neighbour, cosine)`` k-NN rows written as ``[:NEAR {sim}]`` edges
        (the strongest evidence ``er query explain`` shows). Both go in the same
        transaction as the delta and replay as no-ops like it, and so does the
        collection's last applied batch (:meth:`applied_seq`), which only rises.

        Raises
        ------
        StoreError
            If an edge or retirement names a node that is neither in the delta nor
            in the graph; nothing is written then.
        """
        seq = _check_seq(batch_seq)
        with self._operation("apply_delta"):
            self._check_references(collection, delta, entities, near)
            parts = [
                cy.WritePart(
                    cy.retire_edges_cypher(),
                    "retire_edge_rows",
                    _edge_rows(delta.edges_retired),
                ),
                cy.WritePart(
                    cy.upsert_nodes_cypher("Mention", "mention_rows"),
                    "mention_rows",
                    _node_rows(delta, leaf=True, external_ids=external_ids),
                ),
                cy.WritePart(
                    cy.upsert_nodes_cypher("Cluster", "cluster_rows"),
                    "cluster_rows",
                    _node_rows(delta, leaf=False),
                ),
                cy.WritePart(
                    cy.retire_nodes_cypher(),
                    "retire_node_rows",
                    delta.retired.tolist(),
                ),
                cy.WritePart(
                    cy.add_edges_cypher(),
                    "add_edge_rows",
                    _edge_rows(delta.edges_added),
                ),
                *_entity_parts(entities),
                cy.WritePart(cy.near_edges_cypher(), "near_rows", _near_rows(near)),
                cy.WritePart(cy.applied_cypher(), "applied_rows", [seq]),
            ]
            params = {
                "collection": collection,
                "prefix": cy.key_prefix(collection),
                "seq": seq,
                "open": cy.OPEN,
                "algorithm": delta.algorithm,
            }
            self._write([p for p in parts if p.rows], params)
        logger.info("applied delta: %d elements at batch %d", delta.n_elements, seq)

    def _check_references(
        self,
        collection: str,
        delta: ClusteringDelta,
        entities: EntityStep | None = None,
        near: Sequence[tuple[int, int, float]] | None = None,
    ) -> None:
        mentions = [m for m, _ in entities.joined + entities.left] if entities else []
        mentions += [x for a, b, _ in near or () for x in (a, b)]
        referenced = np.unique(
            np.concatenate(
                [
                    delta.edges_added.ravel(),
                    delta.edges_retired.ravel(),
                    delta.retired,
                    np.asarray(mentions, np.int64),
                ]
            )
        )
        outside = np.setdiff1d(referenced, delta.node_id)
        if outside.size == 0:
            return
        keys = [cy.node_key(collection, i) for i in outside.tolist()]
        if self._read(cy.count_existing_cypher(), {"keys": keys})[0]["n"] == len(keys):
            return  # all there (keys are distinct): no need to list them
        rows = self._read(cy.existing_ids_cypher(), {"keys": keys})
        missing = np.setdiff1d(outside, np.array([r["id"] for r in rows], dtype=np.int64))
        if missing.size:
            raise StoreError(
                f"apply_delta: {missing.size} node(s) referenced by edges or retirements are "
                f"neither in the delta nor in collection {collection!r}, e.g. ids "
                f"{missing[:5].tolist()}; nothing was written"
            )

    @final
    def ancestors(
        self, collection: str, node_id: int, as_of: int | None = None
    ) -> list[dict[str, Any]]:
        """Ancestors of a node, nearest first, as of batch ``as_of`` (None: now).

        Returns
        -------
        list of dict
            ``id``, ``depth``, ``score``, ``level_lo``, ``level_hi``, ``size`` per ancestor,
            attributes as of ``as_of`` too.
        """
        params = _start(collection, node_id, as_of)
        with self._operation("ancestors"):
            return self._read(cy.from_key("ancestors"), params)

    @final
    def node_of(self, collection: str, external_id: str) -> int | None:
        """Node id of the mention ingested under ``external_id``; None if there is none."""
        params = {"collection": collection, "external_id": str(external_id)}
        with self._operation("node_of"):
            rows = self._read(cy.canned_query("mention_by_external_id"), params)
        return int(rows[0]["id"]) if rows else None

    @final
    def members(self, collection: str, cluster_id: int, as_of: int | None = None) -> list[int]:
        """Sorted ids of the mentions under a cluster as of batch ``as_of``."""
        params = _start(collection, cluster_id, as_of)
        with self._operation("members"):
            return [int(r["id"]) for r in self._read(cy.from_key("members"), params)]

    @final
    def entity_of(
        self,
        collection: str,
        mention_id: int,
        *,
        score: float | None = None,
        level: int | None = None,
        as_of: int | None = None,
    ) -> int:
        """Id of the node that is a mention's entity under a score or a level cut.

        Exactly one of ``score`` (keep merges at linkage >= score) and ``level``
        (SCC/MBSCC level) is given. A mention that no cluster of the cut holds is
        its own entity, and its id is returned. Edges, scores and levels are those
        of batch ``as_of`` (None: now).
        """
        if (score is None) == (level is None):
            raise ConfigError("entity_of takes exactly one of score= and level=.")
        params = _start(collection, mention_id, as_of)
        if score is not None:
            name, params["threshold"] = "entity_at_score", float(score)
        else:
            # exactly one of score and level is given (checked above): level is an int
            name, params["level"] = "entity_at_level", int(level)  # type: ignore[arg-type]
        with self._operation("entity_of"):
            rows = self._read(cy.from_key(name), params)
        return int(rows[0]["id"]) if rows else int(mention_id)

    @final
    def entity_of_mention(
        self, collection: str, external_id: str, as_of: int | None = None
    ) -> dict[str, Any] | None:
        """The stable entity of a mention as of batch ``as_of`` (None: now), with its members.

        Returns
        -------
        dict or None
            ``entity`` (id), ``minted`` (batch), ``members`` (list of ``(external_id,
            node_id)`` sorted by external id); None if the mention has no entity then.
        """
        params = {
            "collection": collection,
            "external_id": str(external_id),
            "as_of": _check_as_of(as_of),
        }
        with self._operation("entity_of_mention"):
            rows = self._read(cy.canned_query("entity_of_mention"), params)
        if not rows:
            return None
        return {
            "entity": int(rows[0]["entity"]),
            "minted": int(rows[0]["minted"]),
            "members": [(r["member"], int(r["node"])) for r in rows],
        }

    @final
    def entity_memberships(self, collection: str, as_of: int | None = None) -> dict[int, int]:
        """Stable entity id of every mention node as of batch ``as_of`` (None: now)."""
        return self.memberships(collection, as_of).as_dict()

    @final
    def memberships(self, collection: str, as_of: int | None = None) -> Memberships:
        """:meth:`entity_memberships` as two columns, read window by window."""
        params = {"collection": collection, "as_of": _check_as_of(as_of)}
        query = cy.windowed("entity_memberships", "m")
        with self._operation("entity_memberships"):
            pages = [
                id_pairs(self._read(query, {**params, "lo": lo, "hi": hi}), "mention", "entity")
                for lo, hi in self._windows(collection)
            ]
        both = np.concatenate([np.zeros((0, 2), np.int64), *pages])
        return Memberships(both[:, 0].copy(), both[:, 1].copy())

    def _windows(self, collection: str) -> list[tuple[int, int]]:
        """``[lo, hi)`` id windows covering every node of a collection (:data:`WINDOW`)."""
        top = self._read(cy.top_id_cypher(), {"collection": collection})[0]["top"]
        return [] if top is None else [(lo, lo + WINDOW) for lo in range(0, int(top) + 1, WINDOW)]

    @final
    def mention_history(self, collection: str, external_id: str) -> list[dict[str, Any]]:
        """Every entity a mention belonged to, oldest first, with the events around it.

        Returns
        -------
        list of dict
            One per membership: ``entity``, ``since``, ``until`` (None: current) and
            ``events``, each ``{"batch", "kind", "from", "to"}`` (BECAME edges that touched
            the entity from the batch the mention joined to the batch it left).
        """
        params = {"collection": collection, "external_id": str(external_id)}
        with self._operation("mention_history"):
            rows = self._read(cy.canned_query("mention_history"), params)
        history: dict[tuple[int, int], dict[str, Any]] = {}
        for r in rows:
            key = (int(r["since"]), int(r["entity"]))
            item = history.setdefault(
                key,
                {"entity": key[1], "since": key[0], "until": r["until"], "events": []},
            )
            if r["batch"] is not None:
                item["events"].append(
                    {
                        "batch": int(r["batch"]),
                        "kind": r["kind"],
                        "from": int(r["from_entity"]),
                        "to": int(r["to_entity"]),
                    }
                )
        return [history[k] for k in sorted(history)]

    @final
    def near_between(
        self,
        collection: str,
        left: Sequence[int],
        right: Sequence[int],
        *,
        as_of: int | None = None,
        limit: int = 5,
    ) -> list[dict[str, Any]]:
        """The strongest stored k-NN (``NEAR``) edges between two sets of mention nodes.

        Returns
        -------
        list of dict
            ``left``, ``right`` (node ids), ``left_external_id``, ``right_external_id``,
            ``sim``; strongest first, at most ``limit``.
        """
        params = {
            "collection": collection,
            "left": [cy.node_key(collection, int(i)) for i in left],  # cy.from_key
            "right": [int(i) for i in right],
            "as_of": _check_as_of(as_of),
            "limit": int(limit),
        }
        with self._operation("near_between"):
            return self._read(cy.from_key("near_between"), params)

    @final
    def near_of(
        self, collection: str, nodes: Sequence[int], *, as_of: int | None = None
    ) -> list[tuple[int, int, float]]:
        """Every stored k-NN (``NEAR``) edge of the given mention nodes, either
        direction: ``(node, neighbour, sim)``, by node then neighbour."""
        params = {
            "collection": collection,
            "left": [cy.node_key(collection, int(i)) for i in nodes],  # cy.from_key
            "as_of": _check_as_of(as_of),
        }
        with self._operation("near_of"):
            rows = self._read(cy.from_key("near_of"), params)
        return [(int(r["left"]), int(r["right"]), float(r["sim"])) for r in rows]

    @final
    def structure(self, collection: str, as_of: int | None = None) -> Structure:
        """All nodes (with their attributes then) and parent edges of a collection as of
        batch ``as_of`` (None: now), read window by window into columns."""
        params = {"collection": collection, "as_of": _check_as_of(as_of)}
        node_query = cy.windowed("structure_nodes", "n")
        edge_query = cy.windowed("structure_edges", "c")
        nodes, edges = [], []
        with self._operation("structure"):
            for lo, hi in self._windows(collection):
                window = {**params, "lo": lo, "hi": hi}
                nodes.append(node_columns(self._read(node_query, window)))
                edges.append(id_pairs(self._read(edge_query, window), "child", "parent"))
        return Structure.from_windows(nodes, edges)

    @final
    def applied_seq(self, collection: str) -> int | None:
        """The last batch whose delta this graph holds for ``collection`` (written by
        :meth:`apply_delta` with it); None for a collection it holds nothing of, or
        one written before the graph recorded it."""
        with self._operation("applied_seq"):
            rows = self._read(cy.applied_seq_cypher(), {"collection": collection})
        return int(rows[0]["seq"]) if rows and rows[0]["seq"] is not None else None

    @final
    def stats(self, collection: str) -> dict[str, int]:
        """Counts of ``nodes``, ``edges`` and ``current_edges``, retired ones included."""
        with self._operation("stats"):
            rows = self._read(cy.canned_query("stats"), {"collection": collection})
        return {k: int(rows[0][k] or 0) for k in ("nodes", "edges", "current_edges")}

    @final
    def delete_collection(self, collection: str) -> None:
        """Remove every node and edge of a collection (tests, `er reset`)."""
        with self._operation("delete_collection"):
            self._write(
                [
                    cy.WritePart(cy.delete_entities_cypher(), "unused", [0]),
                    cy.WritePart(cy.delete_collection_cypher(), "unused", [0]),
                    cy.WritePart(cy.delete_applied_cypher(), "unused", [0]),
                ],
                {"collection": collection},
            )
