"""Celery tasks (thin: parse ids, call one er.pipeline function, declare retries)."""

from __future__ import annotations

from typing import Any

from er.exceptions import TransientStoreError
from workers.app import CLUSTER_BUDGET_S, CLUSTER_QUEUE, app, settings
from workers.signals import worker_id

_RETRY: dict[str, Any] = {
    "autoretry_for": (TransientStoreError,),
    "retry_backoff": True,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 20,
}


@app.task(name="er.ping")
def ping() -> str:
    """Liveness probe used by the compose health check and the beat heartbeat."""
    return "pong"


@app.task(name="er.ingest", **_RETRY)
def ingest(
    collection: str,
    records: list[Any],
    rejects: list[dict[str, Any]] | None = None,
    id_field: str = "id",
    gold_field: str | None = None,
    config: dict[str, Any] | None = None,
    where: list[str] | None = None,
) -> dict[str, Any]:
    """Store one batch of records (mentions, rejects, a pending batch) and the features
    the writer would make of them (er.pipeline.features); queue clustering."""
    from er.pipeline import run_ingest

    out = run_ingest(
        settings,
        collection=collection,
        records=records,
        rejects=rejects or [],
        id_field=id_field,
        gold_field=gold_field,
        config=config,
        where=where,
        features=True,
    )
    cluster.apply_async(kwargs={"collection": collection}, queue=CLUSTER_QUEUE)
    return out


@app.task(name="er.cluster", **_RETRY)
def cluster(collection: str) -> list[dict[str, Any]]:
    """Cluster the collection's pending batches in order (a redelivery finds none left).

    A long backlog is taken ``CLUSTER_BUDGET_S`` at a time: the task then queues its
    successor, so queued ingests run in between and no task nears its time limit.
    """
    from er.pipeline import has_pending, run_cluster

    # each ingested batch queues one of these after its commit, and a run takes every
    # batch pending when it starts: most of a bulk load's messages find nothing left
    if not has_pending(settings, collection):
        return []
    reports = run_cluster(
        settings, collection, budget_s=CLUSTER_BUDGET_S, flush=False, worker=worker_id()
    )
    if reports and has_pending(settings, collection):
        cluster.apply_async(kwargs={"collection": collection}, queue=CLUSTER_QUEUE)
    return reports


@app.task(
    name="er.evaluate",
    autoretry_for=(TransientStoreError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def evaluate(collection: str, as_of: int | None = None) -> dict[str, Any]:
    """Evaluate a collection against its gold labels; store the run and its report."""
    from er.pipeline import run_evaluation

    out = run_evaluation(settings, collection, as_of=as_of)
    return {k: out[k] for k in ("run_id", "as_of_seq", "report_path")}
