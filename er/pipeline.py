"""Where algorithm cores meet the stores (DESIGN §5): nothing else imports both.

Today: fit a batch core on a collection's points and write the hierarchy, stamped
with a batch sequence number. The queue-driven incremental pipeline builds on it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from er.cluster import Hierarchy
from er.evaluation import coreference_report
from er.exceptions import BatchConflictError, ERError
from er.stores.graph import GraphStore
from er.stores.graph._cypher import canned_query
from er.stores.sql import (
    Batch,
    EvalRun,
    eval_runs,
    find_collection,
    last_done_seq,
    mentions_by_node,
    set_mention_nodes,
)

logger = logging.getLogger(__name__)

__all__ = ["evaluate_collection", "fit_and_store"]


def fit_and_store(
    session: Session,
    graph: GraphStore,
    *,
    collection_id: int,
    collection: str,
    X: NDArray[np.float32],
    estimator: Any,
    batch_seq: int,
    external_ids: Sequence[str] | None = None,
) -> Hierarchy:
    """Fit ``estimator`` on ``X`` and apply its delta to the graph as batch ``batch_seq``.

    The batch row records status, timings and the input's fingerprint in the caller's
    transaction; the graph write is idempotent, so running the same batch again
    changes nothing.

    Raises
    ------
    BatchConflictError
        If batch ``batch_seq`` of the collection was already run on other input:
        merging two hierarchies into one batch would corrupt its lineage.
    """
    timings: dict[str, float] = {}
    fingerprint = _fingerprint(X, estimator)
    batch = session.query(Batch).filter_by(collection_id=collection_id, seq=batch_seq).one_or_none()
    if batch is None:
        batch = Batch(
            collection_id=collection_id,
            seq=batch_seq,
            status="running",
            n_accepted=int(X.shape[0]),
            n_rejected=0,
            timings={},
            fingerprint=fingerprint,
        )
        session.add(batch)
        session.flush()
    elif batch.fingerprint not in (None, fingerprint):
        raise BatchConflictError(
            f"batch {batch_seq} of collection {collection!r} was already resolved from other "
            "input; nothing was written. Use a new collection or data dir for new input."
        )
    started = time.perf_counter()
    estimator.fit(X)
    timings["fit_s"] = time.perf_counter() - started
    started = time.perf_counter()
    nodes = _point_nodes(estimator, X.shape[0])
    by_node = None
    if external_ids is not None:
        by_node = dict(zip(nodes.tolist(), map(str, external_ids), strict=True))
        set_mention_nodes(session, collection_id, {e: n for n, e in by_node.items()})
    graph.apply_delta(collection, estimator.delta_, batch_seq, external_ids=by_node)
    timings["graph_s"] = time.perf_counter() - started
    batch.status, batch.timings = "done", timings
    logger.info("batch %d of %s: %s", batch_seq, collection, timings)
    return estimator.hierarchy_


def _point_nodes(estimator: Any, n: int) -> NDArray[np.int64]:
    """(n,) the delta's node id of each input point.

    Batch cores number points ``0..n-1``; MBSCC keeps stable ids (``node_ids_``) and
    GRINCH its own leaf ids (``leaf_ids_``).
    """
    for name in ("leaf_ids_", "node_ids_"):
        ids = getattr(estimator, name, None)
        if ids is not None:
            return np.asarray(ids, dtype=np.int64)[:n]
    return np.arange(n, dtype=np.int64)


def _fingerprint(X: NDArray[np.float32], estimator: Any) -> str:
    """sha256 of the points (shape, dtype, bytes) and the estimator's parameters."""
    digest = hashlib.sha256(repr((X.shape, str(X.dtype))).encode())
    digest.update(np.ascontiguousarray(X).tobytes())
    params = {k: v for k, v in vars(estimator).items() if not k.startswith("_") and k[-1] != "_"}
    digest.update(repr(sorted(params.items())).encode())
    return digest.hexdigest()


# -- evaluation (DESIGN §4 step 3) ---------------------------------------------------------
DEFAULT_CUT = 0.5  # entity cut for collections whose config names none


def evaluate_collection(
    session: Session,
    graph: GraphStore,
    *,
    collection: str,
    reports_dir: Path,
    as_of: int | None = None,
    threshold: float | None = None,
) -> EvalRun:
    """Score a collection's entities against its gold labels; store the run and its report.

    The structure is read as of one batch (``as_of``, default the newest batch marked
    done), so an evaluation running while batches are applied sees one consistent
    snapshot of the tree. The report is written as ``run-<id>.html`` and ``.json``
    under ``reports_dir/<collection>/`` (temporary file, then rename).

    Raises
    ------
    ERError
        If the collection does not exist, has nothing clustered yet, or has no gold
        labels (no figures are made up then).
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    seq = as_of if as_of is not None else last_done_seq(session, coll.id)
    mentions = mentions_by_node(session, coll.id)
    if seq is None or not mentions:
        raise ERError(f"collection {collection!r} has no resolved batch to evaluate yet.")
    if all(m["gold_entity"] is None for m in mentions.values()):
        raise ERError(
            f"collection {collection!r} has no gold labels (ingest them with --gold-field); "
            "nothing to evaluate against."
        )
    hierarchy, leaf_nodes = _hierarchy_from_store(graph.structure(collection, as_of=seq))
    known = [mentions.get(v) for v in leaf_nodes]
    keep = np.array([m is not None and m["gold_entity"] is not None for m in known], bool)
    if not keep.all():
        raise ERError(
            f"collection {collection!r}: {int((~keep).sum())} clustered mention(s) have no gold "
            "label; evaluate a collection whose every mention has one."
        )
    gold = np.array([m["gold_entity"] for m in known], dtype=object).astype(str)  # type: ignore[index]
    cut = threshold if threshold is not None else coll.config.get("cut_threshold", DEFAULT_CUT)
    metrics = coreference_report(hierarchy, gold, threshold=float(cut))
    run = EvalRun(
        collection_id=coll.id,
        algorithm=str(coll.config.get("algorithm", "")),
        params={"threshold": float(cut)},
        as_of_seq=int(seq),
        metrics=metrics,
    )
    session.add(run)
    session.flush()
    run.report_path = str(
        _write_report(session, run, coll.id, collection, (known, leaf_nodes), reports_dir)
    )
    return run


def _hierarchy_from_store(structure: Any) -> tuple[Hierarchy, list[int]]:
    """The stored structure as a Hierarchy (leaves first); also the leaves' node ids."""
    nodes = sorted(structure.nodes, key=lambda n: (not n["leaf"], n["id"]))
    index = {n["id"]: k for k, n in enumerate(nodes)}
    leaves = [n["id"] for n in nodes if n["leaf"]]
    edges = [(index[c], index[p]) for c, p in structure.edges.tolist() if c in index and p in index]
    score = [np.nan if n["score"] is None else float(n["score"]) for n in nodes]
    lo = [int(n["level_lo"] or 0) for n in nodes]
    hi = [int(n["level_hi"] or 0) for n in nodes]
    return Hierarchy(len(leaves), np.array(edges, np.int64), score, lo, hi), leaves


def _excerpt(payload: Any, limit: int = 90) -> str:
    fields = {k: v for k, v in (payload or {}).items() if k != "vector"}
    text = json.dumps(fields, ensure_ascii=False) if fields else "(vector only)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _write_report(
    session: Session,
    run: EvalRun,
    collection_id: int,
    collection: str,
    leaves: tuple[list[Any], list[int]],
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
            f":param id => {nodes[first]};\n:param as_of => {run.as_of_seq};\n"
            + canned_query("ancestors")
        )
    page = render_report(history[-1], history, excerpts=excerpts, lineage=lineage)
    out = reports_dir / _safe(collection)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / f"run-{run.id}.html"
    _write_atomic(html_path, page)
    _write_atomic(out / f"run-{run.id}.json", json.dumps(history[-1], default=str, indent=1))
    return html_path


def _safe(name: str) -> str:
    """A collection name as a folder name (hex-escaped beyond [A-Za-z0-9._-])."""
    return "".join(c if c.isalnum() or c in "._-" else f"%{ord(c):02x}" for c in name)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_evaluation(settings: Any, collection: str, as_of: int | None = None) -> dict[str, Any]:
    """Open the stores ``settings`` name, evaluate one collection, commit the run.

    The entry point of ``er eval`` and of the ``er.evaluate`` task.

    Returns
    -------
    dict
        ``run_id``, ``as_of_seq``, ``report_path`` and the run's ``metrics``.
    """
    from er.stores.graph import open_graph_store
    from er.stores.sql import make_engine

    engine = make_engine(settings.sqlalchemy_url)
    try:
        with (
            open_graph_store(
                settings.graph_url,
                data_dir=settings.data_dir,
                graph_name=settings.graph_name,
                user=settings.graph_user,
                password=settings.graph_password,
            ) as graph,
            Session(engine) as session,
            session.begin(),
        ):
            run = evaluate_collection(
                session, graph, collection=collection, reports_dir=settings.reports_dir, as_of=as_of
            )
            out = {
                "run_id": run.id,
                "as_of_seq": run.as_of_seq,
                "report_path": run.report_path,
                "metrics": run.metrics,
            }
    finally:
        engine.dispose()
    logger.info("evaluated %s as of batch %s: run %s", collection, out["as_of_seq"], out["run_id"])
    return out
