"""The report's worst errors as a user can act on them (issue #55): every record of a
false merge or a split with its gold and its predicted entity, and the deciding link,
the pair the error turns on, field by field under the collection's pair model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.match import FieldTable, PairModel
from er.pipeline.config import field_types, stored_model
from er.stores.graph._cypher import canned_query

# The deciding link is looked for among the pairs of at most this many of an error's
# records (the first ones by leaf order): 300 records make 44,850 pairs, a few
# milliseconds of scoring; a larger error says so in the report.
LINK_RECORDS = 300
EXCERPT_CHARS = 160  # of a record's fields as JSON in the records table

# What the deciding link of each kind of error is, in the report's words.
LINK_MEANING = {
    "false_merges": "the strongest link between two of its gold entities: the likeliest "
    "to have joined them",
    "splits": "the strongest link between two of its predicted entities: the best "
    "evidence that they are one, which fell short",
}


def error_views(
    metrics: Mapping[str, Any],
    known: Mapping[int, Mapping[str, Any]],
    entities: NDArray[np.int64],
    leaf_nodes: NDArray[np.int64],
    config: Mapping[str, Any],
    *,
    collection: str,
    as_of: int,
) -> dict[str, list[dict[str, Any]]]:
    """The worst false merges and splits of a run, ready for the report.

    Parameters
    ----------
    metrics : mapping
        :func:`er.evaluation.coreference_report`'s figures (``false_merges``,
        ``splits``: each ``mentions``, leaf indices, and ``parts``).
    known : mapping of int to mapping
        Leaf index -> ``external_id``, ``gold_entity``, ``payload`` of every record the
        errors hold.
    entities : ndarray, shape (n_points,)
        The predicted entity of each leaf (the stored stable entity id).
    leaf_nodes : ndarray, shape (n_points,)
        Each leaf's node id in the graph (the lineage query's parameter).

    Returns
    -------
    dict
        ``false_merges`` and ``splits``, each a list of {``kind``, ``title``, ``size``,
        ``parts``, ``records`` (every record: ``id``, ``gold``, ``entity``,
        ``excerpt``), ``link`` (:func:`deciding_link`, None without a pair model),
        ``lineage`` (a Cypher with its parameters)}.
    """
    types, model = field_types(config), stored_model(config)
    # the record's fields, less the two its row already shows as columns and a vector
    hidden = {config.get("id_field"), config.get("gold_field"), "vector"}
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in ("false_merges", "splits"):
        views = []
        for err in metrics[kind]:
            members = list(err["mentions"])
            first = members[0]
            title = (
                f"entity {int(entities[first])}"
                if kind == "false_merges"
                else f"gold entity {known[first]['gold_entity']}"
            )
            link = None
            if types is not None and model is not None:
                payloads = [known[i]["payload"] or {} for i in members[:LINK_RECORDS]]
                table = FieldTable(types.names)
                table.add(types.normalise(payloads).rows)
                ids = [known[i]["external_id"] for i in members[:LINK_RECORDS]]
                sides = _sides(kind, members[:LINK_RECORDS], known, entities)
                link = deciding_link(model, table, ids, sides, len(leaf_nodes))
                if link is not None:
                    link["meaning"] = LINK_MEANING[kind]
                    link["considered"] = min(len(members), LINK_RECORDS)
            views.append(
                {
                    "kind": kind,
                    "title": title,
                    "size": len(members),
                    "parts": int(err["parts"]),
                    "records": [_record(known[i], int(entities[i]), hidden) for i in members],
                    "link": link,
                    "lineage": _lineage(collection, int(leaf_nodes[first]), as_of),
                }
            )
        out[kind] = views
    return out


def _sides(
    kind: str,
    members: Sequence[int],
    known: Mapping[int, Mapping[str, Any]],
    entities: NDArray[np.int64],
) -> NDArray[np.int64]:
    """(m,) the side each record is on: its gold entity in a false merge, its predicted
    entity in a split (the link crosses two sides)."""
    if kind == "false_merges":
        labels = [str(known[i]["gold_entity"]) for i in members]
        return np.unique(labels, return_inverse=True)[1].astype(np.int64).ravel()
    return np.asarray(entities[list(members)], dtype=np.int64)


def deciding_link(
    model: PairModel,
    table: FieldTable,
    ids: Sequence[str],
    sides: NDArray[np.int64],
    population: int,
) -> dict[str, Any] | None:
    """The pair of records on different sides with the highest match probability, and
    the model's reasons for it (:meth:`PairModel.explain`).

    Parameters
    ----------
    table : FieldTable
        The records' normalised fields, row k the record ``ids[k]``.
    sides : ndarray, shape (m,)
        Each record's side; only pairs across two sides are links.
    population : int
        The collection's size, which the model's prior depends on.

    Returns
    -------
    dict or None
        ``a``, ``b`` (external ids), ``version``, ``population`` and the explain's
        ``fields``, weights and ``probability``; None if every record is on one side.
    """
    left, right = np.triu_indices(len(ids), 1)
    across = sides[left] != sides[right]
    left, right = left[across].astype(np.int64), right[across].astype(np.int64)
    if left.size == 0:
        return None
    best = int(np.argmax(model.probability(table, left, right, population)))
    a, b = int(left[best]), int(right[best])
    reasons = model.explain(table, a, b, population)
    return {
        "a": ids[a],
        "b": ids[b],
        "version": model.version,
        "population": population,
        **reasons,
    }


def _record(row: Mapping[str, Any], entity: int, hidden: set[Any]) -> dict[str, Any]:
    """A record's row in an error's table: ids, entities and its other fields as JSON."""
    fields = {k: v for k, v in (row["payload"] or {}).items() if k not in hidden}
    text = json.dumps(fields, ensure_ascii=False) if fields else "(vector only)"
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1] + "…"
    return {"id": row["external_id"], "gold": row["gold_entity"], "entity": entity, "excerpt": text}


def _lineage(collection: str, node: int, as_of: int) -> str:
    """The ancestors query of a record, with cypher-shell / Neo4j Browser parameters."""
    return (
        f":param collection => {json.dumps(collection)};\n"
        f":param id => {node};\n:param as_of => {as_of};\n" + canned_query("ancestors")
    )
