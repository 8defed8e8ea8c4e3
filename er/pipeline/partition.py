"""The one definition of a collection's entities: each accepted mention's stable
entity as the writer stored it (``IN_ENTITY``), read by export, eval, queries and reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from er._arrays import find_sorted
from er.cluster import Hierarchy
from er.evaluation import cut_at_score
from er.exceptions import ERError
from er.pipeline.config import DEFAULT_CUT
from er.stores.graph import GraphStore, Structure
from er.stores.sql import (
    Mention,
    find_collection,
)


# -- reading entities and status ------------------------------------------------------------
def entities(
    session: Session, graph: GraphStore, collection: str, as_of: int | None = None
) -> list[tuple[str, int | None]]:
    """``(external_id, entity_id)`` of every accepted mention, in ingest order.

    An entity is the cut of the hierarchy at the collection's ``cut_threshold``
    (merges at linkage >= the cut). Its id is the stable entity id (DESIGN §3) of
    the ``IN_ENTITY`` membership current at ``as_of``; a collection clustered before
    stable ids existed falls back to the id of the cut's highest node. A mention
    whose batch is not clustered yet has no entity (None).
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    entity_of = entity_map(graph, collection, coll.config, as_of)
    rows = session.execute(
        select(Mention.external_id, Mention.node_id)
        .where(Mention.collection_id == coll.id)
        .order_by(Mention.id)
    )
    return [(ext, None if node is None else entity_of.get(int(node))) for ext, node in rows]


def entity_map(
    graph: GraphStore, collection: str, config: Mapping[str, Any], as_of: int | None
) -> dict[int, int]:
    """Mention node -> entity id as of batch ``as_of``: the stable entities the writer
    stored; for a collection stored without them (``er demo --synthetic``, releases
    before stable ids), the id of each mention's highest node at the cut."""
    entity_of = graph.entity_memberships(collection, as_of=as_of)
    if not entity_of:
        cut = float(config.get("cut_threshold", DEFAULT_CUT))
        hierarchy, ids = _hierarchy_from_store(graph.structure(collection, as_of=as_of))
        label = cut_at_score(hierarchy, cut)
        entity_of = dict(zip(ids[: hierarchy.n_points].tolist(), ids[label].tolist(), strict=True))
    return entity_of


def _hierarchy_from_store(structure: Structure) -> tuple[Hierarchy, NDArray[np.int64]]:
    """The stored structure as a Hierarchy (leaves first, each part by id); also each
    row's node id, shape (n_nodes,). Edges to nodes not alive then are left out."""
    order = np.lexsort((structure.ids, ~structure.leaf))
    ids = structure.ids[order]
    rows = np.full(len(ids), -1, np.int64)
    rows[order] = np.arange(len(ids))  # structure.ids is ascending: row of each node there
    at = find_sorted(structure.ids, structure.edges)  # (e, 2); -1: not alive then
    hierarchy = Hierarchy(
        int(structure.leaf.sum()),
        rows[at[(at >= 0).all(axis=1)]].reshape(-1, 2),
        structure.score[order],
        structure.level_lo[order].astype(np.int32),
        structure.level_hi[order].astype(np.int32),
    )
    return hierarchy, ids
