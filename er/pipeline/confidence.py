"""Exact entity confidence (issue #10, trellis paper) on a collection's mentions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from er.cluster import entity_confidence
from er.exceptions import ERError
from er.match import FieldTable
from er.pipeline.config import DEFAULT_CUT, _featurizer, field_types, stored_model
from er.pipeline.partition import entities
from er.stores.graph import GraphStore
from er.stores.sql import (
    Mention,
    find_collection,
)

CONFIDENCE_LIMIT = 12  # mentions in the trellis (entity plus nearest outsiders): O(3^12)
CONFIDENCE_CONTEXT = 4  # nearest outside mentions that compete for the entity's members
# Inverse temperature of exp(beta * mean cosine): chosen on FEBRL2 by the Brier score of
# the pair probabilities, reported on FEBRL3 (bench/RESULTS.md, "Entity confidence:
# calibration"; bench/HISTORY.md, 2026-11-23).
CONFIDENCE_BETA = 60.0
# The same for a pair-model collection, whose similarities are match probabilities in
# [0, 1] instead of cosines: not yet calibrated (bench_confidence runs on cosine).
PAIR_CONFIDENCE_BETA = 10.0


def mention_confidence(
    session: Session, graph: GraphStore, collection: str, mention: str
) -> dict[str, Any]:
    """Exact confidence of the entity holding ``mention`` (issue #10, trellis paper).

    The collection's mentions are featurized again from their stored payloads (the
    featurizer is deterministic), the entity is the cut of :func:`entities`, and
    :func:`er.cluster.entity_confidence` runs the trellis over it and its nearest
    outside mentions.

    Raises
    ------
    ERError
        If the mention is unknown or not clustered yet, or the entity has more than
        ``CONFIDENCE_LIMIT`` mentions (the exact answer is out of reach; no estimate).
    """
    rows = entities(session, graph, collection)
    coll = find_collection(session, collection)
    assert coll is not None  # entities() checked it
    ext = [e for e, _ in rows]
    if mention not in ext:
        raise ERError(f"collection {collection!r} has no mention {mention!r}.")
    entity = dict(rows)[mention]
    if entity is None:
        raise ERError(f"mention {mention!r} is not clustered yet (its batch is pending).")
    members = [i for i, (_, ent) in enumerate(rows) if ent == entity]
    if len(members) > CONFIDENCE_LIMIT:
        raise ERError(
            f"entity {entity} has {len(members)} mentions; exact confidence is computed for "
            f"entities of up to {CONFIDENCE_LIMIT} (O(3^n)), so none is given."
        )
    payloads: Iterable[Any] = session.execute(
        select(Mention.payload).where(Mention.collection_id == coll.id).order_by(Mention.id)
    ).scalars()
    X, similarity = _similarity(coll.config, list(payloads))
    beta = CONFIDENCE_BETA if similarity is None else PAIR_CONFIDENCE_BETA
    out = entity_confidence(
        X,
        members,
        cut=float(coll.config.get("cut_threshold", DEFAULT_CUT)),
        limit=CONFIDENCE_LIMIT,
        context=CONFIDENCE_CONTEXT,
        beta=beta,
        similarity=similarity,
    )
    assert out is not None
    return {
        "entity": entity,
        "members": [ext[i] for i in out["members"]],
        "context": [ext[i] for i in out["context"]],
        "p_entity": round(out["p_entity"], 6),
        "pairs": [[ext[a], ext[b], round(p, 6)] for a, b, p in out["pairs"]],
        "beta": beta,
    }


def _similarity(
    config: Mapping[str, Any], payloads: list[Any]
) -> tuple[NDArray[np.float32], Callable[[NDArray[np.int64]], NDArray[np.float64]] | None]:
    """The mentions' vectors, and for a pair-model collection the pairwise match
    probabilities the writer scored candidates with (None: the vectors' cosine)."""
    types, model = field_types(config), stored_model(config)
    if types is None or model is None:
        return _featurizer(config)(payloads), None
    batch = types.normalise(payloads)
    table = FieldTable(types.names)
    table.add(batch.rows)
    X = _featurizer(config)([dict(zip(types.names, r, strict=True)) for r in batch.rows])

    def similarity(rows: NDArray[np.int64]) -> NDArray[np.float64]:
        a, b = np.triu_indices(rows.size, 1)
        S = np.eye(rows.size)
        S[a, b] = S[b, a] = model.probability(table, rows[a], rows[b], len(payloads))
        return S

    return X, similarity


def _pair_confidence(
    session: Session,
    graph: GraphStore,
    collection: str,
    a: str,
    b: str,
    found: Mapping[str, Any],
    as_of: int | None,
) -> dict[str, Any]:
    """The trellis line of ``er query explain``: P(the cut puts a and b in one entity),
    exact, when a and b are in one current entity of at most ``CONFIDENCE_LIMIT``."""
    if as_of is not None:
        return {"p": None, "why": "exact confidence is computed for the current structure"}
    if not found["together"]:
        return {"p": None, "why": "a and b are in different entities"}
    try:
        result = mention_confidence(session, graph, collection, a)
    except ERError as exc:
        return {"p": None, "why": str(exc)}
    pairs = {frozenset((x, y)): p for x, y, p in result["pairs"]}
    return {"p": pairs[frozenset((a, b))], "p_entity": result["p_entity"], "why": None}
