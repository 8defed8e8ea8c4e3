"""Evaluation runs (DESIGN §4 step 3): entities against gold labels, stored with a report."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from er._arrays import find_sorted
from er.evaluation import bcubed, coreference_report, cut_at_score, pairwise_prf
from er.exceptions import ERError
from er.match import FieldTable
from er.pipeline.agreement import model_agreement
from er.pipeline.config import DEFAULT_CUT, _safe, field_types, stored_model
from er.pipeline.partition import _hierarchy_from_store
from er.stores.graph import GraphStore
from er.stores.graph._cypher import canned_query
from er.stores.sql import (
    Collection,
    EvalRun,
    eval_runs,
    find_collection,
    gold_labels,
    last_done_seq,
    mentions_of_nodes,
    refused_records,
)


# -- evaluation (DESIGN §4 step 3) ---------------------------------------------------------
def evaluate_collection(
    session: Session,
    graph: GraphStore,
    *,
    collection: str,
    reports_dir: Path,
    as_of: int | None = None,
) -> EvalRun:
    """Score a collection's entities against its gold labels; store the run and its report.

    The entities scored are the ones users receive: each mention's stored stable
    entity as of one batch (``as_of``, default the newest batch marked done), the
    partition ``er export entities`` gives, read as one consistent snapshot even while
    batches are applied. Records refused at ingest are counted, and scored as their own
    entities where the gold labels cover them (``*_all_records``). The report is written
    as ``run-<id>.html`` and ``.json`` under ``reports_dir/<collection>/`` (temporary
    file, then rename).

    Raises
    ------
    ERError
        If the collection does not exist, has nothing clustered yet, or has no gold
        labels (no figures are made up then).
    """
    scored = score_collection(session, graph, collection=collection, as_of=as_of)
    run = EvalRun(
        collection_id=scored.coll.id,
        algorithm=str(scored.coll.config.get("algorithm", "")),
        params={"threshold": scored.metrics["threshold"]},
        as_of_seq=int(scored.seq),
        metrics=scored.metrics,
    )
    session.add(run)
    session.flush()
    _read_shown(session, scored)
    leaves = (scored.known, scored.leaf_nodes)
    run.report_path = str(
        _write_report(session, run, scored.coll.id, collection, leaves, reports_dir)
    )
    return run


@dataclass
class Scored:
    """One scoring of a collection: its row, the batch, the figures, each leaf's node
    id (shape (n_points,), in the hierarchy's leaf order) and, once read for the report
    (:func:`_read_shown`), the mention rows of the leaves it shows, by leaf index."""

    coll: Any
    seq: int
    metrics: dict[str, Any]
    leaf_nodes: NDArray[np.int64]
    known: dict[int, dict[str, Any]] = field(default_factory=dict)


def score_collection(
    session: Session,
    graph: GraphStore,
    *,
    collection: str,
    as_of: int | None = None,
    threshold: float | None = None,
) -> Scored:
    """Every figure of a collection against its gold labels, stored nowhere.

    Parameters
    ----------
    threshold : float, optional
        Score the hierarchy cut at this threshold instead of the stored entities: a
        preview of another cut (``er eval --threshold``); nothing changes.
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    seq = as_of if as_of is not None else last_done_seq(session, coll.id)
    labelled, labels = gold_labels(session, coll.id)
    if seq is None or not labels:
        raise ERError(f"collection {collection!r} has no resolved batch to evaluate yet.")
    if all(g is None for g in labels):
        raise ERError(
            f"collection {collection!r} has no gold labels (ingest them with --gold-field); "
            "nothing to evaluate against."
        )
    hierarchy, node_ids = _hierarchy_from_store(graph.structure(collection, as_of=seq))
    leaf_nodes = node_ids[: hierarchy.n_points]
    gold = _gold_of_leaves(collection, leaf_nodes, labelled, labels)
    if threshold is None:  # score what users receive: the stored stable entities
        pred = _stored_entities(graph, collection, seq, leaf_nodes)
        cut = float(coll.config.get("cut_threshold", DEFAULT_CUT))
    else:  # a preview of another cut of the same hierarchy; nothing changes
        pred, cut = None, float(threshold)
    metrics = coreference_report(hierarchy, gold, threshold=cut, pred=pred)
    metrics["entities_scored"] = "stored" if threshold is None else f"preview of cut {cut}"
    metrics.update(_refused_figures(session, coll, gold, pred, hierarchy, cut))
    if threshold is None:  # the same signal a collection without labels gets (er status)
        metrics["model_agreement"] = model_agreement(session, graph, collection, as_of=seq)
    return Scored(coll, int(seq), metrics, leaf_nodes)


def _gold_of_leaves(
    collection: str, leaf_nodes: NDArray[np.int64], labelled: NDArray[np.int64], labels: list[Any]
) -> NDArray[np.str_]:
    """(n_points,) the gold label of each leaf; every leaf must have one."""
    at = find_sorted(labelled, leaf_nodes)
    unlabelled = np.fromiter((g is None for g in labels), bool, len(labels))[at]
    missing = int(((at < 0) | unlabelled).sum())
    if missing:
        raise ERError(
            f"collection {collection!r}: {missing} clustered mention(s) have no gold "
            "label; evaluate a collection whose every mention has one."
        )
    return np.array(labels, dtype=object)[at].astype(str)


def _read_shown(session: Session, scored: Scored) -> None:
    """Read the mention rows (external id, gold label, payload) of the leaves the
    report shows (its worst errors) into ``scored.known``; scoring read none."""
    errors = scored.metrics["false_merges"] + scored.metrics["splits"]
    shown = sorted({i for err in errors for i in err["mentions"]})
    rows = mentions_of_nodes(session, scored.coll.id, scored.leaf_nodes[shown].tolist())
    scored.known = {i: rows[int(scored.leaf_nodes[i])] for i in shown}


def _stored_entities(
    graph: GraphStore, collection: str, seq: int, leaf_nodes: NDArray[np.int64]
) -> NDArray[np.int64] | None:
    """(n_leaves,) the entity of each leaf as of ``seq``: the partition ``er export
    entities`` gives (:func:`er.pipeline.partition.entity_map`). None for a collection
    stored without stable entities, whose export cuts the hierarchy at its cut as the
    report then does."""
    stored = graph.memberships(collection, as_of=seq)
    if not len(stored.mentions):
        return None
    pred = stored.of(leaf_nodes)
    missing = int((pred < 0).sum())
    if missing:
        raise ERError(
            f"collection {collection!r}: {missing} clustered mention(s) have no stored "
            f"entity as of batch {seq}; evaluate a later batch."
        )
    return pred


def _refused_figures(
    session: Session,
    coll: Any,
    gold: NDArray[Any],
    pred: NDArray[np.int64] | None,
    hierarchy: Any,
    cut: float,
) -> dict[str, Any]:
    """Records refused at ingest: how many, and the figures over every record when the
    gold labels cover them (each refused record its own entity: er resolved nothing for
    it). ``pairwise_prf_at_cut`` and ``bcubed_at_cut`` stay over accepted mentions."""
    gold_field = coll.config.get("gold_field")
    refused = refused_records(session, coll.id)
    labels = [
        str(r[gold_field])
        for r in refused
        if gold_field and isinstance(r, dict) and r.get(gold_field) not in (None, "")
    ]
    out: dict[str, Any] = {"refused": len(refused), "refused_with_gold": len(labels)}
    if not labels:
        return out
    base = cut_at_score(hierarchy, cut) if pred is None else pred
    pred_all = np.r_[np.unique(base, return_inverse=True)[1].ravel(), -1 - np.arange(len(labels))]
    gold_all = np.r_[gold, np.array(labels, dtype=object).astype(str)]
    out["pairwise_prf_all_records"] = list(pairwise_prf(gold_all, pred_all))
    out["bcubed_all_records"] = list(bcubed(gold_all, pred_all))
    return out


def _excerpt(payload: Any, limit: int = 90) -> str:
    fields = {k: v for k, v in (payload or {}).items() if k != "vector"}
    text = json.dumps(fields, ensure_ascii=False) if fields else "(vector only)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _write_report(
    session: Session,
    run: EvalRun,
    collection_id: int,
    collection: str,
    leaves: tuple[dict[int, dict[str, Any]], NDArray[np.int64]],
    reports_dir: Path,
) -> Path:
    """Render the run's HTML (with the collection's earlier runs) and its JSON."""
    from er.reports import render_report

    history = [
        {
            "id": r.id,
            "collection": collection,
            "created_at": r.created_at,
            "as_of_seq": r.as_of_seq,
            "algorithm": r.algorithm,
            "metrics": r.metrics,
        }
        for r in eval_runs(session, collection_id)
    ]
    known, nodes = leaves
    excerpts, lineage = {}, {}
    for err in run.metrics["false_merges"] + run.metrics["splits"]:
        for i in err["mentions"]:
            excerpts[i] = (known[i]["external_id"], _excerpt(known[i]["payload"]))
        first = err["mentions"][0]
        lineage[first] = (  # cypher-shell / Neo4j Browser parameters, then the query
            f":param collection => {json.dumps(collection)};\n"
            f":param id => {int(nodes[first])};\n:param as_of => {run.as_of_seq};\n"
            + canned_query("ancestors")
        )
    coll = session.get(Collection, collection_id)
    config = dict(coll.config) if coll is not None else {}
    model = config.get("pair_model") if config.get("scoring") == "pair_model" else None
    details = _error_details(run.metrics, known, config, len(nodes)) if model is not None else {}
    page = render_report(
        history[-1], history, excerpts=excerpts, lineage=lineage, model=model, details=details
    )
    out = reports_dir / _safe(collection)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / f"run-{run.id}.html"
    _write_atomic(html_path, page)
    _write_atomic(out / f"run-{run.id}.json", json.dumps(history[-1], default=str, indent=1))
    return html_path


def _error_details(
    metrics: Mapping[str, Any],
    known: Mapping[int, dict[str, Any]],
    config: Mapping[str, Any],
    population: int,
) -> dict[int, dict[str, Any]]:
    """Per worst error: up to four of its records by normalised field, led by the pair
    that shows the error (a false merge: two records of different gold entities; a
    split: the two records the model found least alike), and the pair model's reasons
    for that pair (what the report shows as a table)."""
    types, model = field_types(config), stored_model(config)
    if types is None or model is None:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for kind in ("false_merges", "splits"):
        for err in metrics[kind]:
            members = err["mentions"][:50]
            batch = types.normalise([known[i]["payload"] or {} for i in members])
            table = FieldTable(types.names)
            table.add(batch.rows)
            a, b = _telling_pair(kind, members, known, model, table, population)
            shown = [a, b, *[k for k in range(len(members)) if k not in (a, b)][:2]]
            reasons = model.explain(table, a, b, population)
            out[err["mentions"][0]] = {
                "fields": list(types.names),
                "records": [
                    {"id": known[members[k]]["external_id"], "values": table.values(k)}
                    for k in shown
                ],
                "reasons": reasons["fields"],
                "probability": reasons["probability"],
            }
    return out


def _telling_pair(
    kind: str,
    members: list[int],
    known: Mapping[int, dict[str, Any]],
    model: Any,
    table: FieldTable,
    population: int,
) -> tuple[int, int]:
    """Rows (into ``members``) of the pair that shows a false merge or a split."""
    if len(members) < 2:
        return 0, 0
    if kind == "false_merges":
        gold = [known[i]["gold_entity"] for i in members]
        other = next((k for k, g in enumerate(gold) if g != gold[0]), 1)
        return 0, other
    left, right = np.triu_indices(len(members), 1)
    weakest = int(np.argmin(model.probability(table, left, right, population)))
    return int(left[weakest]), int(right[weakest])


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
