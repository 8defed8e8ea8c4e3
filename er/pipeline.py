"""Where algorithm cores meet the stores (DESIGN §5): nothing else imports both.

DESIGN §4: **ingest** validates records, upserts the accepted ones as mentions,
stores the rejected ones with a reason and opens a pending batch; **cluster** takes a
collection's pending batches in sequence order under the collection's writer lock,
featurizes them, steps the incremental core (MBSCC by default, GRINCH per
collection), applies the delta to the graph stamped with the batch seq, checkpoints
the core (new vector rows appended, then the rest: write temp, then rename;
er/_checkpoint.py) and marks the batch done with timings per stage;
**evaluate** scores entities against gold labels. Entry points (``run_*``) open the
stores the settings name; Celery tasks and the CLI call them.

Crash safety comes from the order of the cluster steps: the graph write is
idempotent and stamped, the checkpoint records the last applied seq (it is prepared
before the graph write starts, and made current only once that write succeeded), the
SQL "done" comes last; the next batch's write starts only after that (the write runs
beside the next batch's core step: :class:`_Lane`). A worker killed anywhere re-runs
the batch from the previous checkpoint; the core is deterministic, so it computes the
same delta, and applying it again changes nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from billiard.exceptions import SoftTimeLimitExceeded
from numpy.typing import NDArray
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from er._checkpoint import RowLog, attach, commit_temp, detached, dump_temp, save_rows
from er.ann import batch_neighbors, make_index
from er.cluster import MBSCC, Hierarchy, entity_confidence
from er.entities import ArrayLedger, EntityLedger
from er.evaluation import coreference_report, cut_at_score
from er.exceptions import BatchConflictError, ConfigError, ERError, TransientStoreError
from er.featurize import Featurizer, FeaturizerConfig, RecordValidator, infer_config
from er.stores.graph import GraphStore
from er.stores.graph._cypher import canned_query
from er.stores.sql import (
    Batch,
    EvalRun,
    Mention,
    batch_counts,
    batch_mentions,
    eval_runs,
    find_collection,
    finish_batch,
    get_or_create_collection,
    last_done_seq,
    lock_collection,
    mentions_by_node,
    open_batch,
    pending_batches,
    recent_batches,
    record_rejects,
    set_mention_nodes,
    stored_payloads,
    upsert_mentions,
    writer_lock,
)

logger = logging.getLogger(__name__)

__all__ = [
    "cluster_pending",
    "collection_status",
    "entities",
    "evaluate_collection",
    "explain_pair",
    "fit_and_store",
    "has_pending",
    "ingest_records",
    "mention_confidence",
    "mention_entity",
    "mention_history",
    "run_cluster",
    "run_confidence",
    "run_entities",
    "run_ingest",
    "run_lineage",
    "run_status",
]


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
    batch.finished_at = dt.datetime.now(dt.UTC)
    logger.info("batch %d of %s: %s", batch_seq, collection, timings)
    hierarchy: Hierarchy = estimator.hierarchy_
    return hierarchy


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
    hierarchy, node_ids = _hierarchy_from_store(graph.structure(collection, as_of=seq))
    leaf_nodes = node_ids[: hierarchy.n_points]
    known = [mentions.get(v) for v in leaf_nodes]
    keep = np.array([m is not None and m["gold_entity"] is not None for m in known], bool)
    if not keep.all():
        raise ERError(
            f"collection {collection!r}: {int((~keep).sum())} clustered mention(s) have no gold "
            "label; evaluate a collection whose every mention has one."
        )
    # every m is a mention with a gold label (keep.all()): the filter only narrows the type
    labels = [m["gold_entity"] for m in known if m is not None]
    gold = np.array(labels, dtype=object).astype(str)
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
    """Evaluate one collection on the stores ``settings`` name; commit the run.

    The entry point of ``er eval`` and of the ``er.evaluate`` task.

    Returns
    -------
    dict
        ``run_id``, ``as_of_seq``, ``report_path`` and the run's ``metrics``.
    """
    engine, graph = _stores(settings)
    with _transient_sql(), Session(engine) as session, session.begin():
        run = evaluate_collection(
            session, graph, collection=collection, reports_dir=settings.reports_dir, as_of=as_of
        )
        out = {
            "run_id": run.id,
            "as_of_seq": run.as_of_seq,
            "report_path": run.report_path,
            "metrics": run.metrics,
        }
    logger.info("evaluated %s as of batch %s: run %s", collection, out["as_of_seq"], out["run_id"])
    return out


# -- ingest and cluster (DESIGN §4 steps 1-2) ----------------------------------------------
DEFAULT_ALGORITHM = "mbscc"
# Entity cut (merges at linkage >= this score), chosen once on FEBRL3 with the default
# featurizer (bench/RESULTS.md "Entity cut"): pairwise F1 >= 0.998 from 0.40 to 0.50.
DEFAULT_ENTITY_CUT = 0.45
# LLAMA is a batch algorithm: the writer re-runs it over every point per batch (its
# partial_fit), keeping node ids by point set; fine up to some tens of thousands.
PIPELINE_ALGORITHMS = ("mbscc", "grinch", "llama")
CONFIG_KEYS = ("featurizer", "algorithm", "params", "cut_threshold")


def _make_core(algorithm: str, params: dict[str, Any]) -> Any:
    """A fresh incremental core; one clear line for a bad name or parameter."""
    from er.cluster import Grinch, Llama
    from er.cluster._params import validate_params

    if algorithm not in PIPELINE_ALGORITHMS:
        raise ConfigError(
            f"collection config: algorithm must be one of {PIPELINE_ALGORITHMS}. Got {algorithm!r}."
        )
    if not isinstance(params, dict):
        raise ConfigError(f"collection config: params must be an object. Got {params!r}.")
    cls = {"mbscc": MBSCC, "grinch": Grinch, "llama": Llama}[algorithm]
    try:
        core = cls(**params)
    except TypeError as exc:
        raise ConfigError(f"collection config: {algorithm} params: {exc}") from None
    validate_params(core)
    return core


def new_collection_config(
    records: Sequence[Any],
    *,
    id_field: str,
    gold_field: str | None,
    given: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A collection's config: the given keys, the rest defaulted (featurizer inferred).

    Parameters
    ----------
    records : sequence
        The first batch (the featurizer is inferred from its object records).
    given : mapping, optional
        Any of ``featurizer``, ``algorithm``, ``params``, ``cut_threshold``.
    """
    given = dict(given or {})
    unknown = set(given) - set(CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"collection config: unknown key(s) {sorted(unknown)}; known {CONFIG_KEYS}."
        )
    if "featurizer" in given:
        featurizer = FeaturizerConfig.from_json(given["featurizer"])
    else:
        objects = [r for r in records if isinstance(r, Mapping)]
        featurizer = infer_config(objects, id_field=id_field, gold_field=gold_field)
    algorithm = given.get("algorithm", DEFAULT_ALGORITHM)
    params = given.get("params", {})
    _make_core(algorithm, params)
    cut = given.get("cut_threshold", DEFAULT_ENTITY_CUT)
    if isinstance(cut, bool) or not isinstance(cut, int | float):
        raise ConfigError(f"collection config: cut_threshold must be a number. Got {cut!r}.")
    return {
        "id_field": id_field,
        "gold_field": gold_field,
        "featurizer": featurizer.to_json(),
        "algorithm": algorithm,
        "params": params,
        "cut_threshold": float(cut),
    }


def _settle_config(
    coll: Any, records: Sequence[Any], id_field: str, gold_field: str | None, given: Any
) -> dict[str, Any]:
    """The collection's stored config, created from this batch on first ingest."""
    if not coll.config.get("featurizer"):
        coll.config = new_collection_config(
            records, id_field=id_field, gold_field=gold_field, given=given
        )
        created: dict[str, Any] = coll.config
        return created
    stored: dict[str, Any] = coll.config
    if stored.get("id_field") != id_field:
        raise ConfigError(
            f"collection {coll.name!r} takes its ids from field {stored.get('id_field')!r}, "
            f"not {id_field!r}; pass --id-field {stored.get('id_field')}."
        )
    if given:
        fresh = new_collection_config(
            records, id_field=id_field, gold_field=gold_field, given=given
        )
        differs = [k for k in given if fresh[k] != stored.get(k)]
        if differs:
            raise ConfigError(
                f"collection {coll.name!r} already has a config that differs in {differs}; "
                "a collection keeps its config (use a new collection)."
            )
    return stored


def ingest_records(
    session: Session,
    *,
    collection: str,
    records: Sequence[Any],
    rejects: Sequence[Mapping[str, Any]] = (),
    id_field: str = "id",
    gold_field: str | None = None,
    config: Mapping[str, Any] | None = None,
    where: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Validate one batch of records, store mentions and rejects, open a pending batch.

    Runs in the caller's transaction. A record already stored with the same payload
    is a duplicate (one mention); with another payload, or twice in one batch with
    different payloads, it is rejected. Nothing accepted is lost: accepted mentions,
    rejects and the batch row commit together.

    Parameters
    ----------
    records : sequence, length n
        Parsed records (JSON objects; anything else is rejected).
    rejects : sequence of mapping
        Records the reader could not parse (``external_id``, ``payload``, ``reason``).
    where : sequence of str, optional, length n
        Where each record came from (``people.jsonl line 7``), to name a rejected record
        that has no id; by default its position in the batch.

    Returns
    -------
    dict
        ``collection``, ``batch_seq``, ``accepted`` (new mentions), ``duplicates``,
        ``rejected`` and the first ``reasons``.
    """
    coll = get_or_create_collection(session, collection)
    lock_collection(session, coll.id)
    session.refresh(coll)
    cfg = _settle_config(coll, records, id_field, gold_field, config)
    validator = RecordValidator(FeaturizerConfig.from_json(cfg["featurizer"]), cfg["id_field"])
    batch = open_batch(session, coll.id)
    accepted, rejected, duplicates = _screen(validator, records, list(rejects), where)
    stored = stored_payloads(session, coll.id, list(accepted))
    for ext, payload in stored.items():
        if payload != accepted[ext]:
            rejected.append(
                _reject(ext, accepted[ext], "already ingested with a different payload")
            )
        else:
            duplicates += 1
        del accepted[ext]
    gold = cfg.get("gold_field")
    rows = [
        {
            "external_id": ext,
            "payload": rec,
            "gold_entity": None if gold is None or rec.get(gold) in (None, "") else rec[gold],
        }
        for ext, rec in accepted.items()
    ]
    batch.n_accepted = upsert_mentions(session, coll.id, batch.seq, rows)
    batch.n_rejected = record_rejects(session, coll.id, rejected)
    if batch.n_accepted == 0:
        batch.status = "done"  # nothing to cluster
    return {
        "collection": collection,
        "batch_seq": batch.seq,
        "accepted": batch.n_accepted,
        "duplicates": duplicates,
        "rejected": batch.n_rejected,
        "reasons": [r["reason"] for r in rejected[:20]],
    }


def _screen(
    validator: RecordValidator,
    records: Sequence[Any],
    rejected: list[Mapping[str, Any]],
    where: Sequence[str] | None,
) -> tuple[dict[str, Any], list[Mapping[str, Any]], int]:
    """Split a batch into accepted records (by external id, first wins) and rejects."""
    accepted: dict[str, Any] = {}
    duplicates = 0
    for position, rec in enumerate(records):
        ext = validator.external_id(rec)
        why = validator.reason(rec)
        if ext is None:  # no id: the reason names where the record was
            label = where[position] if where is not None else f"record #{position}"
            rejected.append(
                {"external_id": None, "payload": _storable(rec), "reason": f"{label}: {why}"}
            )
            continue
        if why is None and ext in accepted:
            if accepted[ext] == rec:
                duplicates += 1
                continue
            why = "the same id appears twice in this batch with different payloads"
        if why is not None:
            rejected.append(_reject(ext, rec, why))
            continue
        accepted[ext] = rec
    return accepted, rejected, duplicates


def _reject(ext: str, record: Any, why: str) -> dict[str, Any]:
    return {
        "external_id": ext,
        "payload": _storable(record),
        "reason": f"record {ext!r}: {why}",
    }


def _storable(record: Any) -> Any:
    """The record as JSON a database keeps; escaped text when it is not valid JSON text."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        if "\\u0000" not in text:
            return record
    except (TypeError, ValueError, UnicodeEncodeError):
        pass
    return {"unreadable": json.dumps(record, ensure_ascii=True, default=repr)[:4096]}


# A dropped or refused database connection: retried, never a failed batch.
_LOST_DATABASE = (OperationalError, InterfaceError)
# Errors that leave a batch pending for the task's retry instead of failing it: a lost
# store, or a task's soft time limit (celery raises billiard's exception in the task).
_ABANDON: tuple[type[BaseException], ...] = (
    TransientStoreError,
    *_LOST_DATABASE,
    SoftTimeLimitExceeded,
)


# -- the cluster writer --------------------------------------------------------------------
@dataclass
class _State:
    """What a collection's writer checkpoints after every batch."""

    seq: int  # the last batch whose delta reached the graph
    core: Any
    n_points: int = 0
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> point rows
    ledger: ArrayLedger = field(default_factory=ArrayLedger)  # stable entity ids
    index: Any = None  # the k-NN index (er.ann), created with the first batch
    rows_saved: dict[str, int] = field(default_factory=dict)  # rows of each row log


NEAR_K = 3  # NEAR edges written per new mention: the evidence `er query explain` shows
INDEX_BACKEND = "exact"  # see _BatchJob._neighbors: an approximate one needs per-seq saves


def _checkpoint_path(state_dir: Path, collection: str) -> Path:
    return state_dir / "collections" / _safe(collection) / "checkpoint.pkl"


# The append-only matrices of the state, kept out of the pickle (er/_checkpoint.py).
_ROW_LOGS = (
    RowLog("points", ("core", "_knn", "X"), rows_attr="_n"),
    RowLog("vectors", ("index", "_X"), rows_attr="_n"),
)


def _load_state(path: Path, config: Mapping[str, Any]) -> _State:
    """The last checkpoint, or a fresh core. The file is er's own (in the data dir)."""
    if not path.exists():
        return _State(seq=0, core=_make_core(config["algorithm"], dict(config["params"])))
    with path.open("rb") as f:
        state = pickle.load(f)  # er's own file under the data dir, never user input
    if not isinstance(state, _State):
        raise ERError(f"{path}: not an er checkpoint; move it away to rebuild the collection.")
    if not hasattr(state, "ledger"):  # a checkpoint from before stable entity ids
        state.ledger, state.index = ArrayLedger(), None
    if isinstance(state.ledger, EntityLedger):  # from before the array ledger
        state.ledger = ArrayLedger.from_ledger(state.ledger)
    if not hasattr(state, "rows_saved"):  # from before the row logs: rows in the pickle
        state.rows_saved = {}
    for log in _ROW_LOGS:
        if log.name in state.rows_saved:
            attach(state, path, log, state.rows_saved[log.name])
    return state


def _prepare_state(path: Path, state: _State) -> Path:
    """Append the new rows of the big matrices and write the pickle's temporary file;
    return it for :func:`er._checkpoint.commit_temp`. Until then the old checkpoint
    stands (its row counts ignore the rows appended past them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    before = state.rows_saved
    with detached(state, _ROW_LOGS) as rows:
        for log in _ROW_LOGS:
            if log.name in rows:
                save_rows(path, log, rows[log.name], before.get(log.name, 0))
        state.rows_saved = {name: X.shape[0] for name, X in rows.items()}
        try:
            return dump_temp(path, state)
        except BaseException:
            state.rows_saved = before
            raise


_FEATURIZERS: dict[str, Featurizer] = {}


def _featurizer(config: Mapping[str, Any]) -> Featurizer:
    """One featurizer per config per process (its token cache only saves work)."""
    key = json.dumps(config["featurizer"], sort_keys=True)
    if key not in _FEATURIZERS:
        _FEATURIZERS[key] = Featurizer(FeaturizerConfig.from_json(config["featurizer"]))
    return _FEATURIZERS[key]


def cluster_pending(
    engine: Engine,
    graph: GraphStore,
    *,
    collection: str,
    state_dir: Path,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    budget_s: float | None = None,
) -> list[dict[str, Any]]:
    """Cluster a collection's pending batches in sequence order (the one writer).

    Holds the collection's writer lock throughout; each batch commits on its own.
    Running it again, or twice at once, applies nothing twice. A batch's graph write
    runs in the graph database while the core steps on the next batch here
    (:class:`_Lane`); its checkpoint and SQL "done" still come in sequence order,
    after that write succeeded.

    Parameters
    ----------
    budget_s : float, optional
        Take no further batch once this many seconds have passed (the first is always
        taken, and the ones taken finish); the rest stay pending for the next run, so
        a worker's task stays well inside its time limit however long the backlog.

    Returns
    -------
    list of dict
        Per batch: ``batch_seq``, ``n_points``, ``timings`` (seconds per stage).
    """
    with Session(engine) as session:
        coll = find_collection(session, collection)
        if coll is None:
            raise ERError(f"no collection {collection!r}.")
        coll_id, config = coll.id, dict(coll.config)
    if "featurizer" not in config:
        raise ERError(f"collection {collection!r} was not made by er ingest; nothing to cluster.")
    path = _checkpoint_path(state_dir, collection)
    with writer_lock(engine, coll_id, state_dir / "locks"):
        deadline = None if budget_s is None else time.monotonic() + budget_s
        with Session(engine) as session:
            pending = [(b.id, b.seq) for b in pending_batches(session, coll_id)]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="er-graph-write") as pool:
            lane = _Lane(path, config, _take_state(path, config), on_batch, pool)
            for i, (batch_id, seq) in enumerate(pending):
                if i and deadline is not None and time.monotonic() > deadline:
                    break
                lane.take(_BatchJob(engine, graph, collection, coll_id, config, batch_id, seq))
            lane.settle()
        _keep_state(path, lane.state)
    return lane.reports


@dataclass
class _Pending:
    """A stepped batch: its graph write (run by :meth:`_Lane.settle`) and its prepared
    checkpoint, made current once that write succeeded."""

    job: _BatchJob
    rows: list[tuple[str, Any]]
    timings: dict[str, float]
    write: Callable[[], None]
    tmp: Path  # the checkpoint's temporary file
    running: Future[float] | None = None  # the write, once launched: its own seconds


@dataclass
class _Lane:
    """The cluster loop of one collection, each batch's graph write beside the next
    batch's clustering.

    The graph database applies a delta in its own process on about one core, so
    batch b's write runs while the worker steps the core for batch b+1. It starts
    after b+1's index search: the search's BLAS threads and the database on the same
    two cores slowed each other by 1.7-1.8x at 100k (bench/RESULTS.md). The durable
    order is the sequential loop's: b's checkpoint is made current and b marked done
    only after b's write succeeded, and before b+1's write starts; a crash anywhere
    replays b from b-1's checkpoint. A write that fails for good fails its batch, and
    b+1 is stepped again from the checkpoint.
    """

    path: Path
    config: Mapping[str, Any]
    state: _State
    on_batch: Callable[[dict[str, Any]], None] | None
    pool: ThreadPoolExecutor
    reports: list[dict[str, Any]] = field(default_factory=list)
    pending: _Pending | None = None

    def take(self, job: _BatchJob) -> None:
        """Step ``job`` (the previous batch's write launched after its search); settle
        the previous batch; leave this one pending.

        Raises
        ------
        TransientStoreError, OperationalError, InterfaceError, SoftTimeLimitExceeded
            (:data:`_ABANDON`) The batch stays pending; the task retries from the
            checkpoint. Any other error marks the batch failed and the loop goes on.
        """
        timings: dict[str, float] = {}
        outcome = self._step(job, timings)
        if self.settle():  # the previous write failed: the state went back to its checkpoint
            timings = {}
            outcome = self._step(job, timings)
        if isinstance(outcome, Exception):
            if isinstance(outcome, _ABANDON):
                raise outcome
            self._failed(job, outcome)
            return
        rows, write = outcome
        try:
            if write is None:  # the checkpoint already holds it (a crash came before "done")
                self._report(job.finish(self.state, rows, timings))
                return
            with _timed(timings, "checkpoint_s"):
                tmp = _prepare_state(self.path, self.state)
        except _ABANDON:
            raise
        except Exception as exc:  # e.g. a full disk
            self._failed(job, exc)
            return
        self.pending = _Pending(job, rows, timings, write, tmp)

    def _step(
        self, job: _BatchJob, timings: dict[str, float]
    ) -> tuple[list[tuple[str, Any]], Callable[[], None] | None] | Exception:
        """The batch's rows and its graph write (None if already checkpointed), or the
        error, which :meth:`take` handles once the previous batch is settled."""
        try:
            with _timed(timings, "sql_s"):  # reading the batch's mentions
                rows, fresh = job.begin(self.state)
            if not fresh:
                return rows, None
            found = job.search(self.state, rows, timings)
            self._launch()
            return rows, job.cluster(self.state, rows, found, timings)
        except Exception as exc:
            return exc

    def _launch(self) -> None:
        """Start the pending batch's graph write in the background, once."""
        if self.pending is not None and self.pending.running is None:
            self.pending.running = self.pool.submit(_seconds, self.pending.write)

    def settle(self) -> bool:
        """Finish the pending batch: its write, its checkpoint, its "done".

        Returns
        -------
        bool
            True if the batch failed for good (it is marked failed and the state is the
            checkpoint again). :data:`_ABANDON` errors propagate, the batch pending.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return False
        running = pending.running or self.pool.submit(_seconds, pending.write)
        waited = time.perf_counter()
        try:
            spent = _written(running)
            pending.timings["graph_wait_s"] = round(time.perf_counter() - waited, 6)
            pending.timings["graph_s"] = round(spent, 6)
            with _timed(pending.timings, "checkpoint_s"):
                commit_temp(pending.tmp, self.path)
            self._report(pending.job.finish(self.state, pending.rows, pending.timings))
        except _ABANDON:
            raise
        except Exception as exc:
            self._failed(pending.job, exc)
            return True
        return False

    def _failed(self, job: _BatchJob, exc: Exception) -> None:
        """Mark ``job``'s batch failed; the state goes back to the checkpoint."""
        self._report(_fail(job.engine, job.batch_id, job.seq, job.collection, exc))
        self.state = _load_state(self.path, self.config)  # the core may be half-stepped

    def _report(self, report: dict[str, Any]) -> None:
        self.reports.append(report)
        if self.on_batch is not None:
            self.on_batch(report)


def _written(write: Future[float]) -> float:
    """The background write's seconds, or its error. An error raised in this thread
    while it waits (a task's soft time limit) first lets the write end: the batch's
    fate is decided only once the graph holds it or not."""
    try:
        return write.result()
    except BaseException:
        if not write.done():
            with contextlib.suppress(BaseException):
                write.result()
        raise


# The writer's state after its last run, per checkpoint, with the checkpoint file's
# identity then; the next run of the same process starts from it instead of reading
# the checkpoint again (n x d vectors), unless another process wrote a newer one.
_KEPT: dict[Path, tuple[tuple[int, int, int], _State]] = {}
_KEEP_AT_MOST = 4  # collections whose state a worker keeps in memory


def _file_id(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size): every save renames a new file over the old one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _take_state(path: Path, config: Mapping[str, Any]) -> _State:
    """The state this process kept after its last run if the checkpoint is still the
    one it wrote; else the checkpoint. Taken out: an error mid-run leaves nothing kept."""
    kept = _KEPT.pop(path, None)
    if kept is not None and kept[0] == _file_id(path):
        return kept[1]
    return _load_state(path, config)


def _keep_state(path: Path, state: _State) -> None:
    """Keep ``state``, which equals the checkpoint just written, for the next run."""
    file_id = _file_id(path)
    if file_id is None:
        return
    _KEPT[path] = (file_id, state)
    while len(_KEPT) > _KEEP_AT_MOST:
        del _KEPT[next(iter(_KEPT))]


def _fail(
    engine: Engine, batch_id: int, seq: int, collection: str, exc: Exception
) -> dict[str, Any]:
    """Mark a batch failed with a one-line reason; later batches go on."""
    reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    logger.error("batch %d of %s failed: %s", seq, collection, reason, exc_info=exc)
    with Session(engine) as session, session.begin():
        finish_batch(session, batch_id, "failed", {}, reason)
    return {"batch_seq": seq, "n_points": 0, "timings": {}, "error": reason}


@dataclass
class _BatchJob:
    """One batch's steps: :meth:`begin` (its rows), :meth:`search` (featurize, index),
    :meth:`cluster` (core, entities; returns its graph write) and :meth:`finish` (SQL
    "done"); :class:`_Lane` orders them and the writes across batches."""

    engine: Engine
    graph: GraphStore
    collection: str
    coll_id: int
    config: Mapping[str, Any]
    batch_id: int
    seq: int
    nodes: list[int] | None = None  # the batch's mention node ids, once stepped

    def begin(self, state: _State) -> tuple[list[tuple[str, Any]], bool]:
        """The batch's ``(external id, payload)`` rows, and whether ``state`` lacks it
        (else a crash came after its checkpoint, before "done"); marks it running."""
        fresh = self.seq > state.seq
        with Session(self.engine) as session, session.begin():
            rows = batch_mentions(session, self.coll_id, self.seq)
            if fresh:
                session.execute(
                    update(Batch).where(Batch.id == self.batch_id).values(status="running")
                )
        return rows, fresh

    def finish(
        self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]
    ) -> dict[str, Any]:
        """Give the mentions their nodes and mark the batch done (the last step)."""
        nodes = self.nodes
        if nodes is None:  # not stepped here: the checkpoint holds the batch
            first, stop = state.ranges.get(self.seq, (0, 0))
            nodes = _point_nodes(state.core, stop)[first:stop].tolist()
        exts = [ext for ext, _ in rows]
        with Session(self.engine) as session, session.begin():
            # before finish_batch stores the timings: the UPDATE and commit are not in it
            with _timed(timings, "sql_s"):
                set_mention_nodes(session, self.coll_id, dict(zip(exts, nodes, strict=True)))
            finish_batch(session, self.batch_id, "done", timings, None)
        logger.info("batch %d of %s: %d points, %s", self.seq, self.collection, len(nodes), timings)
        return {"batch_seq": self.seq, "n_points": len(nodes), "timings": timings}

    def search(
        self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]
    ) -> tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.float32]]:
        """Featurize the batch and add it to the index (``state.index`` advances).

        Returns
        -------
        X : ndarray of float32, shape (b, dim)
        idx, sim : ndarray, shape (b, k)
            The batch's neighbours among all points (:func:`er.ann.batch_neighbors`).
        """
        with _timed(timings, "featurize_s"):
            X = _featurizer(self.config)([payload for _, payload in rows])
        with _timed(timings, "index_s"):
            idx, sim = self._neighbors(state, X)
        return X, idx, sim

    def cluster(
        self,
        state: _State,
        rows: list[tuple[str, Any]],
        found: tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.float32]],
        timings: dict[str, float],
    ) -> Callable[[], None]:
        """Step the core on what :meth:`search` found and the entity ledger on its
        hierarchy; advance ``state``. Returns the write of the batch's delta to the
        graph, for the caller to run."""
        X, idx, sim = found
        first = state.n_points
        with _timed(timings, "cluster_s"):
            if isinstance(state.core, MBSCC):
                state.core.partial_fit(X, neighbors=(idx, sim))
            else:
                state.core.partial_fit(X)
        stop = first + X.shape[0]
        point_nodes = _point_nodes(state.core, stop)
        nodes = point_nodes[first:stop]
        self.nodes = nodes.tolist()
        with _timed(timings, "entities_s"):
            cut = float(self.config.get("cut_threshold", DEFAULT_CUT))
            label = cut_at_score(state.core.hierarchy_, cut)
            step = state.ledger.step_labels(self.seq, point_nodes, label)
            near = _near_rows(point_nodes, first, idx, sim)
        external = dict(zip(nodes.tolist(), (ext for ext, _ in rows), strict=True))
        delta = state.core.delta_
        state.seq, state.n_points = self.seq, stop
        state.ranges[self.seq] = (first, stop)

        def write() -> None:
            self.graph.apply_delta(
                self.collection, delta, self.seq, external_ids=external, entities=step, near=near
            )

        return write

    def _neighbors(
        self, state: _State, X: NDArray[np.float32]
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Add the batch to the collection's k-NN index; its neighbours among all points.

        The index is exact: it is pickled with the checkpoint, so a replayed batch
        finds the same neighbours. (An approximate backend would have to be saved
        per batch seq beside the checkpoint to replay exactly; at FEBRL sizes
        ``auto`` would pick exact search anyway.) MBSCC takes these lists instead of
        searching itself (``partial_fit(neighbors=)``; with exact lists the result
        is the same), and the top ``NEAR_K`` become the mentions' NEAR edges.
        """
        if state.index is None:
            state.index = make_index(INDEX_BACKEND, dim=X.shape[1])
        k = max(int(getattr(state.core, "k", 0)), NEAR_K)
        return batch_neighbors(state.index, X, k)


def _seconds(call: Callable[[], None]) -> float:
    """Run ``call``; its wall time in seconds."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _near_rows(
    point_nodes: NDArray[np.int64],
    first: int,
    idx: NDArray[np.int64],
    sim: NDArray[np.float32],
) -> list[tuple[int, int, float]]:
    """``(mention, neighbour, cosine)`` of each new point's ``NEAR_K`` nearest neighbours.

    Parameters
    ----------
    idx, sim : ndarray, shape (b, k)
        The batch's neighbours (global point indices, -1 for none) and similarities.
    """
    rows = []
    for r in range(idx.shape[0]):
        for j, s in zip(idx[r, :NEAR_K].tolist(), sim[r, :NEAR_K].tolist(), strict=True):
            if j >= 0:
                rows.append((int(point_nodes[first + r]), int(point_nodes[j]), float(s)))
    return rows


class _timed:
    """Add the block's wall time to ``timings[key]``."""

    def __init__(self, timings: dict[str, float], key: str) -> None:
        self.timings, self.key = timings, key

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        spent = time.perf_counter() - self.started
        self.timings[self.key] = round(self.timings.get(self.key, 0.0) + spent, 6)


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
    entity_of = graph.entity_memberships(collection, as_of=as_of)
    if not entity_of:
        cut = float(coll.config.get("cut_threshold", DEFAULT_CUT))
        hierarchy, ids = _hierarchy_from_store(graph.structure(collection, as_of=as_of))
        label = cut_at_score(hierarchy, cut)
        entity_of = {ids[i]: ids[label[i]] for i in range(hierarchy.n_points)}
    rows = session.execute(
        select(Mention.external_id, Mention.node_id)
        .where(Mention.collection_id == coll.id)
        .order_by(Mention.id)
    )
    return [(ext, None if node is None else entity_of.get(int(node))) for ext, node in rows]


CONFIDENCE_LIMIT = 12  # mentions in the trellis (entity plus nearest outsiders): O(3^12)
CONFIDENCE_CONTEXT = 4  # nearest outside mentions that compete for the entity's members
# Inverse temperature of exp(beta * mean cosine): chosen on FEBRL2 by Brier score of the
# pair probabilities (30: 0.0006, 60: 0.0005, 100: 0.0007), reported on FEBRL3; RESULTS.md
CONFIDENCE_BETA = 60.0


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
    X = _featurizer(coll.config)(list(payloads))
    out = entity_confidence(
        X,
        members,
        cut=float(coll.config.get("cut_threshold", DEFAULT_CUT)),
        limit=CONFIDENCE_LIMIT,
        context=CONFIDENCE_CONTEXT,
        beta=CONFIDENCE_BETA,
    )
    assert out is not None
    return {
        "entity": entity,
        "members": [ext[i] for i in out["members"]],
        "context": [ext[i] for i in out["context"]],
        "p_entity": round(out["p_entity"], 6),
        "pairs": [[ext[a], ext[b], round(p, 6)] for a, b, p in out["pairs"]],
        "beta": CONFIDENCE_BETA,
    }


# -- stable entities: entity, history, explain (DESIGN §3; schema/queries/*.cypher) ---------
EXPLAIN_SIDE_LIMIT = 5_000  # mentions per side searched for NEAR edges between the sides
EXPLAIN_NEAR = 5  # strongest NEAR edges shown


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
        cosine of the two records; ``cut``, ``together`` (both paths reach the LCA
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
        near = graph.near_between(collection, left, right, as_of=as_of, limit=EXPLAIN_NEAR)
        out["lca"] = {"id": lca["id"], "score": lca["score"], "size": lca["size"]}
    out["path_a"], out["path_b"] = path_a, path_b
    scores = [x["score"] for x in path_a + path_b]
    out["together"] = lca is not None and all(s is not None and s >= cut for s in scores)
    out["deciding"] = _deciding_merge(path_a, path_b, cut, out["together"])
    out["near"] = [
        {"a": r["left_external_id"], "b": r["right_external_id"], "sim": round(r["sim"], 6)}
        for r in near
    ]
    payloads: dict[str, Any] = dict(
        session.execute(
            select(Mention.external_id, Mention.payload).where(
                Mention.collection_id == coll.id, Mention.external_id.in_([a, b])
            )
        ).all()
    )
    out["fields"] = _featurizer(coll.config).field_similarities(payloads[a], payloads[b])
    for key, ext in (("entity_a", a), ("entity_b", b)):
        found = graph.entity_of_mention(collection, ext, as_of=as_of)
        out[key] = None if found is None else found["entity"]
    out["confidence"] = _pair_confidence(session, graph, collection, a, b, out, as_of)
    return out


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


def collection_status(session: Session, collection: str) -> dict[str, Any]:
    """Batches by status, counts, rejects, lag (seconds the oldest pending batch waits)
    and, over the last done batches, throughput and time per stage (:func:`recent_work`)."""
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    counts = batch_counts(session, coll.id)
    oldest = counts.pop("oldest_pending")
    if oldest is not None and oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=dt.UTC)
    lag = 0.0 if oldest is None else (dt.datetime.now(dt.UTC) - oldest).total_seconds()
    return {
        "collection": collection,
        **counts,
        "lag_s": round(max(lag, 0.0), 3),
        "recent": recent_work(recent_batches(session, coll.id, RECENT_BATCHES)),
    }


RECENT_BATCHES = 20  # done batches `er status` sums its throughput and stages over


def writer_stages(timings: Mapping[str, float]) -> dict[str, float]:
    """A batch's stages as they held the writer: without the graph write when that ran
    beside the next batch (``graph_wait_s`` present: only the wait held the writer)."""
    overlapped = "graph_wait_s" in timings
    return {k: float(v) for k, v in timings.items() if k != "graph_s" or not overlapped}


def writer_seconds(timings: Mapping[str, float]) -> float:
    """A batch's seconds on the writer: the sum of :func:`writer_stages`."""
    return sum(writer_stages(timings).values())


def recent_work(batches: Sequence[tuple[int, Mapping[str, float], Any]]) -> dict[str, Any]:
    """Finishing rate and time per stage over done batches, oldest first.

    Parameters
    ----------
    batches : sequence of (n_accepted, timings, finished_at)
        As :func:`er.stores.sql.recent_batches` returns them.

    Returns
    -------
    dict
        ``batches``; ``span_s`` and ``mentions_per_s``: the time from the first finish
        to the last, and the mentions of all but the first batch over it (None for
        fewer than two finishes at distinct times: it is the rate batches were finished
        at, which is the arrival rate when the writer keeps up, not its capacity);
        ``timed_batches``: those that stored timings (older releases stored none), over
        which the rest are means (None when there are none): ``writer_s_per_batch``
        (:func:`writer_seconds`), ``stages_s`` (every stage; one a batch lacks counts
        0) and ``writer_stages_s`` (:func:`writer_stages`).
    """
    finished = [(n, at) for n, _, at in batches if at is not None]
    span = (finished[-1][1] - finished[0][1]).total_seconds() if len(finished) > 1 else 0.0
    rate = sum(n for n, _ in finished[1:]) / span if span > 0 else None
    timed = [dict(t) for _, t, _ in batches if t]
    own = [writer_stages(t) for t in timed]
    return {
        "batches": len(batches),
        "span_s": round(span, 3) if span > 0 else None,
        "mentions_per_s": None if rate is None else float(f"{rate:.4g}"),
        "timed_batches": len(timed),
        "writer_s_per_batch": _mean_of(sum(t.values()) for t in own) if timed else None,
        "stages_s": _stage_means(timed),
        "writer_stages_s": _stage_means(own),
    }


def _mean_of(values: Iterable[float]) -> float:
    return round(float(np.mean(list(values))), 4)


def _stage_means(timings: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean seconds of every stage over ``timings``; a stage one lacks counts 0."""
    stages = sorted({k for t in timings for k in t})
    return {k: _mean_of(float(t.get(k, 0.0)) for t in timings) for k in stages}


# -- entry points (CLI and Celery tasks) ---------------------------------------------------
_STORES: dict[tuple[str, str, str], tuple[Engine, GraphStore, contextlib.ExitStack]] = {}


def _stores(settings: Any) -> tuple[Engine, GraphStore]:
    """The process's engine and graph store for these settings, opened once.

    A worker keeps its stores for its whole life (an embedded FalkorDB starts once,
    the graph's indexes are ensured once); they close when the process exits.
    """
    from er.stores.graph import open_graph_store
    from er.stores.sql import make_engine

    key = (settings.sqlalchemy_url, settings.graph_url, str(settings.data_dir.resolve()))
    if key not in _STORES:
        stack = contextlib.ExitStack()
        graph = stack.enter_context(
            open_graph_store(
                settings.graph_url,
                data_dir=settings.data_dir,
                graph_name=settings.graph_name,
                user=settings.graph_user,
                password=settings.graph_password,
            )
        )
        graph.init_schema()  # idempotent; without the key index every write scans
        engine = make_engine(settings.sqlalchemy_url)
        stack.callback(engine.dispose)
        atexit.register(stack.close)
        _STORES[key] = (engine, graph, stack)
    engine, graph, _ = _STORES[key]
    return engine, graph


def close_stores() -> None:
    """Close the cached stores now (benchmarks, tests); the process exit does it anyway."""
    while _STORES:
        _, (_, _, stack) = _STORES.popitem()
        stack.close()


@contextlib.contextmanager
def _transient_sql() -> Iterator[None]:
    """A lost database connection is transient: the task retries it."""
    try:
        yield
    except _LOST_DATABASE as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TransientStoreError(f"database unavailable: {first}") from exc


def run_ingest(settings: Any, **kwargs: Any) -> dict[str, Any]:
    """Ingest one batch (``ingest_records``'s keyword arguments) and commit it."""
    from er.stores.sql import make_engine

    engine = make_engine(settings.sqlalchemy_url)
    try:
        with _transient_sql(), Session(engine) as session, session.begin():
            return ingest_records(session, **kwargs)
    finally:
        engine.dispose()


def run_entities(
    settings: Any, collection: str, as_of: int | None = None
) -> list[tuple[str, int | None]]:
    """``entities`` on the stores ``settings`` name (``er export entities``, ``er demo``)."""
    engine, graph = _stores(settings)
    with _transient_sql(), Session(engine) as session:
        return entities(session, graph, collection, as_of=as_of)


def run_confidence(
    settings: Any, collection: str, mention: str | None = None, entity: int | None = None
) -> dict[str, Any]:
    """``mention_confidence`` on the stores ``settings`` name (``er query confidence``),
    for the entity holding ``mention``, or for the stable entity id ``entity``."""
    engine, graph = _stores(settings)
    with _transient_sql(), Session(engine) as session:
        if mention is None:
            # exactly one of mention and entity is given (er query checks): entity is an int
            mention = _member_of(session, graph, collection, int(entity))  # type: ignore[arg-type]
        return mention_confidence(session, graph, collection, mention)


def _member_of(session: Session, graph: GraphStore, collection: str, entity: int) -> str:
    """External id of one current member of the stable entity ``entity``."""
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    nodes = [m for m, e in graph.entity_memberships(collection).items() if e == entity]
    if not nodes:
        raise ERError(f"collection {collection!r} has no current entity {entity}.")
    ext = session.scalars(
        select(Mention.external_id)
        .where(Mention.collection_id == coll.id, Mention.node_id.in_(nodes))
        .order_by(Mention.external_id)
        .limit(1)
    ).first()
    if ext is None:
        raise ERError(f"entity {entity} of {collection!r} has no stored mention yet.")
    return str(ext)


def run_lineage(
    settings: Any,
    what: str,
    collection: str,
    mentions: Sequence[str],
    as_of: int | None = None,
) -> dict[str, Any]:
    """``er query entity|history|explain`` on the stores ``settings`` name."""
    engine, graph = _stores(settings)
    with _transient_sql():
        if what == "entity":
            return mention_entity(graph, collection, mentions[0], as_of=as_of)
        if what == "history":
            return mention_history(graph, collection, mentions[0])
        with Session(engine) as session:
            return explain_pair(session, graph, collection, mentions[0], mentions[1], as_of=as_of)


def run_status(settings: Any, collection: str | None = None) -> list[dict[str, Any]]:
    """``collection_status`` of one collection, or of every collection (``er status``)."""
    from er.stores.sql import Collection, make_engine

    engine = make_engine(settings.sqlalchemy_url)
    try:
        with _transient_sql(), Session(engine) as session:
            names = (
                [collection]
                if collection is not None
                else list(session.scalars(select(Collection.name).order_by(Collection.id)))
            )
            return [collection_status(session, name) for name in names]
    finally:
        engine.dispose()


def run_cluster(
    settings: Any,
    collection: str,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    budget_s: float | None = None,
) -> list[dict[str, Any]]:
    """Cluster a collection's pending batches on the stores ``settings`` name
    (:func:`cluster_pending`)."""
    engine, graph = _stores(settings)
    with _transient_sql():
        return cluster_pending(
            engine,
            graph,
            collection=collection,
            state_dir=settings.data_dir,
            on_batch=on_batch,
            budget_s=budget_s,
        )


def has_pending(settings: Any, collection: str) -> bool:
    """Whether the collection has batches not yet clustered (after a budgeted run)."""
    engine, _ = _stores(settings)
    with _transient_sql(), Session(engine) as session:
        coll = find_collection(session, collection)
        return coll is not None and bool(pending_batches(session, coll.id))
