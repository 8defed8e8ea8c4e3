"""The one definition of a collection's entities: each accepted mention's stable
entity as the writer stored it (``IN_ENTITY``), read by export, eval, queries and reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from er.cluster import Hierarchy
from er.evaluation import cut_at_score
from er.exceptions import ERError
from er.pipeline.config import DEFAULT_CUT
from er.stores.graph import GraphStore
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
        entity_of = {ids[i]: ids[label[i]] for i in range(hierarchy.n_points)}
    return entity_of


def _hierarchy_from_store(structure: Any) -> tuple[Hierarchy, list[int]]:
    """The stored structure as a Hierarchy (leaves first); also each row's node id."""
    nodes = sorted(structure.nodes, key=lambda n: (not n["leaf"], n["id"]))
    index = {n["id"]: k for k, n in enumerate(nodes)}
    leaves = [n["id"] for n in nodes if n["leaf"]]
    ids = [int(n["id"]) for n in nodes]
    edges = [(index[c], index[p]) for c, p in structure.edges.tolist() if c in index and p in index]
    score = [np.nan if n["score"] is None else float(n["score"]) for n in nodes]
    lo = [int(n["level_lo"] or 0) for n in nodes]
    hi = [int(n["level_hi"] or 0) for n in nodes]
    # the conversions Hierarchy.__post_init__ makes of lists, written out for the types
    hierarchy = Hierarchy(
        len(leaves),
        np.array(edges, np.int64),
        np.asarray(score, np.float64),
        np.asarray(lo, np.int32),
        np.asarray(hi, np.int32),
    )
    return hierarchy, ids
