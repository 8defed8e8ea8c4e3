"""Entry points (``run_*``) that open the stores the settings name: the Celery tasks and
the CLI call these, each one pipeline function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from er.exceptions import ERError
from er.pipeline.agreement import model_agreement
from er.pipeline.confidence import mention_confidence
from er.pipeline.cut import change_cut, cut_from_gold
from er.pipeline.evaluate import evaluate_collection, score_collection
from er.pipeline.ingest import ingest_records
from er.pipeline.operations import keep_failed_task, plan_retry, reason_of, rejects, worker_rows
from er.pipeline.partition import entities
from er.pipeline.queries import explain_pair, mention_entity, mention_history
from er.pipeline.status import collection_status
from er.pipeline.stores import _engine, _stores, _transient_sql
from er.pipeline.train import retrain
from er.pipeline.writer import cluster_pending
from er.stores.graph import GraphStore
from er.stores.sql import Mention, any_pending, find_collection, mark_tasks_retried

logger = logging.getLogger(__name__)


# -- entry points (CLI and Celery tasks) ---------------------------------------------------
def run_evaluation(
    settings: Any, collection: str, as_of: int | None = None, threshold: float | None = None
) -> dict[str, Any]:
    """Evaluate one collection on the stores ``settings`` name; commit the run.

    The entry point of ``er eval`` and of the ``er.evaluate`` task. With ``threshold``
    it previews another cut of the same hierarchy and stores nothing (``run_id`` and
    ``report_path`` are None).

    Returns
    -------
    dict
        ``run_id``, ``as_of_seq``, ``report_path`` and the run's ``metrics``.
    """
    engine, graph = _stores(settings)
    if threshold is not None:
        with _transient_sql(), Session(engine) as session:
            scored = score_collection(
                session, graph, collection=collection, as_of=as_of, threshold=threshold
            )
        return {
            "run_id": None,
            "as_of_seq": scored.seq,
            "report_path": None,
            "metrics": scored.metrics,
        }
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


def run_cut(settings: Any, collection: str, threshold: float | None) -> dict[str, Any]:
    """Record a new entity cut for ``collection`` and queue the batch that applies it
    (:func:`er.pipeline.cut.change_cut`); commits. ``threshold`` None: the cut the gold
    labels choose (:func:`er.pipeline.cut.cut_from_gold`)."""
    engine, graph = _stores(settings)
    with _transient_sql(), Session(engine) as session, session.begin():
        if threshold is None:
            return cut_from_gold(session, graph, collection=collection)
        return change_cut(session, collection=collection, threshold=threshold)


def run_train(settings: Any, collection: str, from_gold: bool = False) -> dict[str, Any]:
    """Train and store a new version of a collection's pair model
    (:func:`er.pipeline.train.retrain`); commits."""
    engine, _ = _stores(settings)
    with _transient_sql(), Session(engine) as session, session.begin():
        return retrain(session, collection=collection, from_gold=from_gold)


def run_ingest(settings: Any, **kwargs: Any) -> dict[str, Any]:
    """Ingest one batch (``ingest_records``'s keyword arguments) and commit it."""
    with _transient_sql(), Session(_engine(settings)) as session, session.begin():
        return ingest_records(session, **kwargs)


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


def run_status(
    settings: Any, collection: str | None = None, agreement: bool = True
) -> list[dict[str, Any]]:
    """``collection_status`` of one collection, or of every collection and every name
    that failed tasks give (``er status``), each with its ``model_agreement`` (the
    gold-free signal; ``agreement`` False leaves it out, and the graph unopened)."""
    from er.stores.sql import Collection, failed_task_names

    engine = _engine(settings)
    with _transient_sql(), Session(engine) as session:
        if collection is not None:
            names = [collection]
        else:
            names = list(session.scalars(select(Collection.name).order_by(Collection.id)))
            names += [n for n in failed_task_names(session) if n not in names]
        workers = worker_rows(session)
        rows = [collection_status(session, name, workers) for name in names]
        if agreement:
            _with_agreement(settings, session, rows)
        return rows


def run_workers(settings: Any) -> list[dict[str, Any]]:
    """The workers ``er status`` shows (:func:`er.pipeline.operations.worker_rows`)."""
    with _transient_sql(), Session(_engine(settings)) as session:
        return worker_rows(session)


def _with_agreement(settings: Any, session: Session, rows: list[dict[str, Any]]) -> None:
    """Each status row with its ``model_agreement``; a graph that cannot be read leaves
    it None and says why in one logged line (the rest of the status stands)."""
    try:
        _, graph = _stores(settings)
        for row in rows:
            if not row["batches"]:  # named only by failed tasks: nothing to read
                row["model_agreement"] = None
                continue
            row["model_agreement"] = model_agreement(session, graph, row["collection"])
    except ERError as exc:
        logger.warning("entities against the pair model not shown: %s", exc)
        for row in rows:
            row.setdefault("model_agreement", None)


def run_cluster(
    settings: Any,
    collection: str,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    budget_s: float | None = None,
    flush: bool = True,
    worker: int | None = None,
) -> list[dict[str, Any]]:
    """Cluster a collection's pending batches on the stores ``settings`` name
    (:func:`cluster_pending`; ``worker``: the worker process's id, see there)."""
    engine, graph = _stores(settings)
    with _transient_sql():
        return cluster_pending(
            engine,
            graph,
            collection=collection,
            state_dir=settings.data_dir,
            on_batch=on_batch,
            budget_s=budget_s,
            flush=flush,
            worker=worker,
        )


def run_retry(settings: Any, collection: str, batch: int | None = None) -> dict[str, Any]:
    """Put a collection's failed batches back to pending and commit; what to queue
    again (:func:`er.pipeline.operations.plan_retry`, ``er retry``). The caller queues
    the writer's run and the failed tasks, then calls :func:`run_tasks_retried`."""
    with _transient_sql(), Session(_engine(settings)) as session, session.begin():
        plan = plan_retry(session, collection, batch)
    for b in plan["batches"]:
        moved = "" if b["now"] == b["batch_seq"] else f" as batch {b['now']}"
        logger.info("batch %d of %s queued again%s", b["batch_seq"], collection, moved)
    return plan


def run_tasks_retried(settings: Any, ids: Sequence[int]) -> None:
    """Record that these failed tasks were queued (or run) again."""
    with _transient_sql(), Session(_engine(settings)) as session, session.begin():
        mark_tasks_retried(session, ids)


def run_task_failed(
    settings: Any,
    *,
    task: str,
    task_id: str | None,
    kwargs: Mapping[str, Any],
    error: BaseException,
) -> None:
    """Keep a task that failed for good in a worker (its reason and arguments), for
    ``er status`` and ``er retry``. Never raises: the store may be what failed (the
    worker's log then holds the task's error and this one)."""
    try:
        with Session(_engine(settings)) as session, session.begin():
            keep_failed_task(
                session, task=task, task_id=task_id, kwargs=kwargs, error=reason_of(error)
            )
    except Exception as exc:
        logger.error("task %s (%s) failed and could not be recorded: %s", task_id, task, exc)


def run_rejects(settings: Any, collection: str) -> list[dict[str, Any]]:
    """A collection's rejected records (``er rejects``;
    :func:`er.pipeline.operations.rejects`)."""
    with _transient_sql(), Session(_engine(settings)) as session:
        return rejects(session, collection)


def has_pending(settings: Any, collection: str) -> bool:
    """Whether the collection has batches not yet clustered (after a budgeted run)."""
    engine, _ = _stores(settings)
    with _transient_sql(), Session(engine) as session:
        coll = find_collection(session, collection)
        return coll is not None and any_pending(session, coll.id)
