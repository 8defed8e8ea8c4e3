"""The gold-free quality signal of a collection (``er status``, ``er eval``, the report).

How often the stored entities and the collection's own pair model disagree
(:mod:`er.evaluation._agreement`): pairs inside an entity the model scores under even
odds, and candidate pairs (the stored ``NEAR`` edges) across two entities it scores at
even odds or more. Both from seeded samples, so the figure costs the same at any size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from er.evaluation._agreement import agreement_figures, inside_pairs
from er.exceptions import ERError
from er.match import FieldTable
from er.pipeline.config import field_types, stored_model
from er.stores.graph import GraphStore
from er.stores.sql import count_mentions, find_collection, mentions_of_nodes

# At most this many pairs per figure: a share's standard error is then at most
# 0.5 / sqrt(2,000), about 1.1%.
AGREEMENT_PAIRS = 2_000
# The candidate pairs across entities are the NEAR edges of this many mentions.
AGREEMENT_MENTIONS = 500
AGREEMENT_SEED = 0
# A pair is improbable under this match probability, probable at it or more: the
# model's own even odds, whatever cut the collection's entities are taken at.
AGREEMENT_P = 0.5


def model_agreement(
    session: Session, graph: GraphStore, collection: str, as_of: int | None = None
) -> dict[str, Any] | None:
    """The shares of :func:`er.evaluation._agreement.agreement_figures` for a collection's
    stored entities as of batch ``as_of``, scored by its current pair model; None for a
    collection without one (cosine-scored, or nothing clustered yet).

    Returns
    -------
    dict or None
        ``inside_pairs``, ``inside_improbable``, ``across_pairs``, ``across_probable``,
        ``cut``, ``sampled`` (whether the inside pairs are a sample), ``model_version``
        and ``population`` (mentions the probabilities were scored for).
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    types, model = field_types(coll.config), stored_model(coll.config)
    if types is None or model is None:
        return None
    entity_of = graph.entity_memberships(collection, as_of=as_of)
    if not entity_of:
        return None
    rng = np.random.default_rng(AGREEMENT_SEED)
    nodes = np.array(sorted(entity_of), np.int64)
    labels = np.array([entity_of[int(v)] for v in nodes.tolist()], np.int64)
    li, ri, sampled = inside_pairs(labels, AGREEMENT_PAIRS, rng)
    inside = (nodes[li], nodes[ri])
    across = _across(graph, collection, as_of, nodes, entity_of, rng)
    population = count_mentions(session, coll.id)
    probs = _probabilities(session, coll.id, types, model, [inside, across], population)
    return {
        **agreement_figures(probs[0], probs[1], AGREEMENT_P),
        "sampled": sampled,
        "model_version": model.version,
        "population": population,
    }


def _across(
    graph: GraphStore,
    collection: str,
    as_of: int | None,
    nodes: np.ndarray,
    entity_of: dict[int, int],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """NEAR edges of AGREEMENT_MENTIONS mentions drawn at random whose ends lie in two
    entities (each pair once), at most AGREEMENT_PAIRS of them drawn at random."""
    pick = (
        nodes if nodes.size <= AGREEMENT_MENTIONS else rng.choice(nodes, AGREEMENT_MENTIONS, False)
    )
    pairs = {
        (min(a, b), max(a, b))
        for a, b, _ in graph.near_of(collection, sorted(pick.tolist()), as_of=as_of)
        if b in entity_of and entity_of[a] != entity_of[b]
    }
    found = np.array(sorted(pairs), np.int64).reshape(-1, 2)
    if found.shape[0] > AGREEMENT_PAIRS:
        found = found[np.sort(rng.choice(found.shape[0], AGREEMENT_PAIRS, replace=False))]
    return found[:, 0], found[:, 1]


def _probabilities(
    session: Session,
    collection_id: int,
    types: Any,
    model: Any,
    pairs: list[tuple[np.ndarray, np.ndarray]],
    population: int,
) -> list[np.ndarray]:
    """The model's match probability of each pair of mention nodes, per list of pairs."""
    wanted = np.unique(np.concatenate([np.r_[a, b] for a, b in pairs]))
    rows = mentions_of_nodes(session, collection_id, wanted.tolist())
    have = np.array(sorted(rows), np.int64)
    table = FieldTable(types.names)
    table.add(types.normalise([rows[int(v)]["payload"] for v in have.tolist()]).rows)
    out = []
    for a, b in pairs:
        known = np.isin(a, have) & np.isin(b, have)
        left, right = np.searchsorted(have, a[known]), np.searchsorted(have, b[known])
        out.append(model.probability(table, left, right, population))
    return out
