"""Reading entities: the entity of a mention, its history, why two mentions are (not)
together (DESIGN §3, "Stable entity ids", "Explanations"; schema/queries/*.cypher).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from er.exceptions import ERError
from er.match import FieldTable
from er.pipeline.confidence import _pair_confidence
from er.pipeline.config import DEFAULT_CUT, _featurizer, field_types, stored_model
from er.stores.graph import GraphStore
from er.stores.sql import (
    Mention,
    count_mentions,
    find_collection,
)

# -- stable entities: entity, history, explain (DESIGN §3; schema/queries/*.cypher) ---------
EXPLAIN_SIDE_LIMIT = 5_000  # mentions per side searched for NEAR edges between the sides
EXPLAIN_NEAR = 5  # strongest NEAR edges shown
# ... out of this many read by their stored score, ranked again by the current model
NEAR_READ = 4 * EXPLAIN_NEAR


def _require_node(graph: GraphStore, collection: str, mention: str) -> int:
    node = graph.node_of(collection, mention)
    if node is None:
        raise ERError(
            f"collection {collection!r} has no clustered mention {mention!r} "
            "(unknown id, or its batch is still pending)."
        )
    return node


def mention_entity(
    graph: GraphStore, collection: str, mention: str, as_of: int | None = None
) -> dict[str, Any]:
    """The stable entity of ``mention`` (external id) as of batch ``as_of``, with its members.

    Raises
    ------
    ERError
        If the mention is unknown, or had no entity at ``as_of``.
    """
    _require_node(graph, collection, mention)
    found = graph.entity_of_mention(collection, mention, as_of=as_of)
    if found is None:
        when = "now" if as_of is None else f"as of batch {as_of}"
        raise ERError(f"mention {mention!r} of {collection!r} has no entity {when}.")
    return {
        "collection": collection,
        "mention": mention,
        "as_of": as_of,
        "entity": found["entity"],
        "minted": found["minted"],
        "members": [ext for ext, _ in found["members"]],
    }


def mention_history(graph: GraphStore, collection: str, mention: str) -> dict[str, Any]:
    """Every entity ``mention`` belonged to, oldest first, with the events between them."""
    _require_node(graph, collection, mention)
    return {
        "collection": collection,
        "mention": mention,
        "memberships": graph.mention_history(collection, mention),
    }


def _path_to(ancestors: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The ancestors up to and including ``top``, nearest first (depth <= top's depth)."""
    depth = next(a["depth"] for a in ancestors if a["id"] == top)
    return [
        {"id": a["id"], "score": a["score"], "size": a["size"]}
        for a in ancestors
        if a["depth"] <= depth
    ]


def _side(
    graph: GraphStore, collection: str, node: int, path: list[dict[str, Any]], as_of: int | None
) -> list[int]:
    """Mention nodes on one side of the LCA: under its child on this mention's path."""
    if len(path) < 2:
        return [node]
    return graph.members(collection, path[-2]["id"], as_of=as_of)[:EXPLAIN_SIDE_LIMIT]


def _deciding_merge(
    path_a: list[dict[str, Any]], path_b: list[dict[str, Any]], cut: float, together: bool
) -> dict[str, Any] | None:
    """The merge the cut turns on: the LCA when together; else the lowest merge below it.

    Apart means some cluster on a path formed at a linkage under the cut; the one
    nearest the mentions is where the cut separates them.
    """
    if together:
        return {**path_a[-1], "side": "both"}
    below = [
        (depth, side, x)
        for side, path in (("a", path_a), ("b", path_b))
        for depth, x in enumerate(path)
        if x["score"] is None or x["score"] < cut
    ]
    if not below:
        return None
    _, side, node = min(below, key=lambda t: (t[0], t[1]))
    return {**node, "side": side}


def _model_view(
    config: Mapping[str, Any],
    payloads: Mapping[str, Any],
    pair: tuple[str, str],
    near: list[dict[str, Any]],
    population: int,
) -> dict[str, Any] | None:
    """The pair model's reasons for two records and for the link that joined their
    sides, every probability from one model at one collection size (issue #55: a stored
    k-NN score and the model's own were two figures for one pair). None without a model.

    Parameters
    ----------
    payloads : mapping of str to dict
        External id -> record, for the pair and every end of ``near``.
    near : list of dict
        The stored k-NN edges between the two sides (``a``, ``b``, ``sim``); each gets
        its ``probability`` under the current model, strongest first, in place.

    Returns
    -------
    dict or None
        The pair's :meth:`PairModel.explain` with ``version`` and ``population``, and
        ``link``: the strongest edge's ``a``, ``b`` and its own reasons (None without
        edges): the pair on the path whose merge joined the two sides.
    """
    types, model = field_types(config), stored_model(config)
    if types is None or model is None:
        return None
    ids = list(dict.fromkeys([*pair, *(e[end] for e in near for end in ("a", "b"))]))
    row = {ext: k for k, ext in enumerate(ids)}
    table = FieldTable(types.names)
    table.add(types.normalise([payloads.get(ext) or {} for ext in ids]).rows)
    scored = {"version": model.version, "population": population}

    def reasons(a: str, b: str) -> dict[str, Any]:
        return {**scored, **model.explain(table, row[a], row[b], population)}

    link = None
    if near:
        left = np.array([row[e["a"]] for e in near])
        right = np.array([row[e["b"]] for e in near])
        for e, p in zip(near, model.probability(table, left, right, population), strict=True):
            e["probability"] = round(float(p), 6)
            del e["sim"]  # the score stored when the edge was written: another model's
        near.sort(key=lambda e: -e["probability"])
        link = {"a": near[0]["a"], "b": near[0]["b"], **reasons(near[0]["a"], near[0]["b"])}
    return {**reasons(*pair), "link": link}


def explain_pair(
    session: Session,
    graph: GraphStore,
    collection: str,
    a: str,
    b: str,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Why two mentions are in one entity, or not (DESIGN §3, "Explanations").

    Returns
    -------
    dict
        ``lca`` (id, score) and ``path_a``/``path_b`` (each ancestor up to the lowest
        common ancestor with the linkage score of its merge); ``near``: the strongest
        stored k-NN edges between the two sides of the LCA; ``fields``: per-field
        cosine of the two records; ``model``: the pair model's reasons (each field's
        comparison level and weight, the total weight and the match probability), None
        for a cosine-scored collection; ``cut``, ``together`` (both paths reach the LCA
        through merges at linkage >= the cut) and each mention's stable ``entity``.
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    node_a, node_b = _require_node(graph, collection, a), _require_node(graph, collection, b)
    up_a = graph.ancestors(collection, node_a, as_of=as_of)
    up_b = graph.ancestors(collection, node_b, as_of=as_of)
    common = {x["id"] for x in up_b}
    lca = next((x for x in up_a if x["id"] in common), None)
    cut = float(coll.config.get("cut_threshold", DEFAULT_CUT))
    out: dict[str, Any] = {"collection": collection, "a": a, "b": b, "as_of": as_of, "cut": cut}
    if lca is None:
        path_a, path_b, near = up_a, up_b, []
        out["lca"] = None
    else:
        path_a, path_b = _path_to(up_a, lca["id"]), _path_to(up_b, lca["id"])
        left = _side(graph, collection, node_a, path_a, as_of)
        right = _side(graph, collection, node_b, path_b, as_of)
        near = graph.near_between(collection, left, right, as_of=as_of, limit=NEAR_READ)
        out["lca"] = {"id": lca["id"], "score": lca["score"], "size": lca["size"]}
    out["path_a"], out["path_b"] = path_a, path_b
    scores = [x["score"] for x in path_a + path_b]
    out["together"] = lca is not None and all(s is not None and s >= cut for s in scores)
    out["deciding"] = _deciding_merge(path_a, path_b, cut, out["together"])
    out["near"] = [
        {"a": r["left_external_id"], "b": r["right_external_id"], "sim": round(r["sim"], 6)}
        for r in near
    ]
    ends = {a, b, *(e[end] for e in out["near"] for end in ("a", "b"))}
    payloads: dict[str, Any] = dict(
        session.execute(
            select(Mention.external_id, Mention.payload).where(
                Mention.collection_id == coll.id, Mention.external_id.in_(sorted(ends))
            )
        ).all()
    )
    out["fields"] = _featurizer(coll.config).field_similarities(payloads[a], payloads[b])
    population = count_mentions(session, coll.id)
    out["model"] = _model_view(coll.config, payloads, (a, b), out["near"], population)
    del out["near"][EXPLAIN_NEAR:]
    for key, ext in (("entity_a", a), ("entity_b", b)):
        found = graph.entity_of_mention(collection, ext, as_of=as_of)
        out[key] = None if found is None else found["entity"]
    out["confidence"] = _pair_confidence(session, graph, collection, a, b, out, as_of)
    return out
