"""Evaluation runs (DESIGN §4 step 3): entities against gold labels, stored with a report."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from er._arrays import find_sorted
from er.evaluation import bcubed, coreference_report, cut_at_score, pairwise_prf
from er.exceptions import ERError
from er.pipeline.agreement import model_agreement
from er.pipeline.config import DEFAULT_CUT, _safe
from er.pipeline.partition import _hierarchy_from_store
from er.pipeline.worst import error_views
from er.stores.graph import GraphStore
from er.stores.sql import (
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
    run.report_path = str(_write_report(session, run, scored, collection, reports_dir))
    return run


@dataclass
class Scored:
    """One scoring of a collection: its row, the batch, the figures, each leaf's node
    id (shape (n_points,), in the hierarchy's leaf order) and, once read for the report
    (:func:`_read_shown`), the mention rows of the leaves it shows, by leaf index.
    ``entities`` are the stored stable entity ids, or the cut's cluster labels where
    the collection stores none or a preview cut was scored."""

    coll: Any
    seq: int
    metrics: dict[str, Any]
    leaf_nodes: NDArray[np.int64]
    entities: NDArray[np.int64]  # (n_points,) each leaf's predicted entity, as scored
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
    entities = cut_at_score(hierarchy, cut) if pred is None else pred
    metrics["entities_scored"] = "stored" if threshold is None else f"preview of cut {cut}"
    metrics.update(_refused_figures(session, coll, gold, pred, hierarchy, cut))
    if threshold is None:  # the same signal a collection without labels gets (er status)
        metrics["model_agreement"] = model_agreement(session, graph, collection, as_of=seq)
    return Scored(coll, int(seq), metrics, leaf_nodes, np.asarray(entities, dtype=np.int64))


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


def _write_report(
    session: Session, run: EvalRun, scored: Scored, collection: str, reports_dir: Path
) -> Path:
    """Render the run's HTML (with the collection's earlier runs and its worst errors,
    :func:`er.pipeline.worst.error_views`) and its JSON."""
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
        for r in eval_runs(session, scored.coll.id)
    ]
    config = dict(scored.coll.config)
    model = config.get("pair_model") if config.get("scoring") == "pair_model" else None
    errors = error_views(
        run.metrics,
        scored.known,
        scored.entities,
        scored.leaf_nodes,
        config,
        collection=collection,
        as_of=scored.seq,
    )
    page = render_report(history[-1], history, errors=errors, model=model)
    out = reports_dir / _safe(collection)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    html_path = out / f"run-{run.id}.html"
    _write_atomic(html_path, page)
    _write_atomic(out / f"run-{run.id}.json", json.dumps(history[-1], default=str, indent=1))
    return html_path


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, readable by its owner alone
    (a report quotes records, issue #54)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
