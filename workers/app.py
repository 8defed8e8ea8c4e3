"""The Celery application (entry point: reads er's settings from the environment)."""

from __future__ import annotations

from celery import Celery

from er.config import get_settings
from workers.schedule import beat_schedule

settings = get_settings()
INGEST_QUEUE = "celery"  # Celery's default queue: er.ingest and er.evaluate
CLUSTER_QUEUE = "er.cluster"  # the writers' queue; the collection lock makes one writer each
TIME_LIMIT = 3600
CLUSTER_BUDGET_S = TIME_LIMIT / 6  # a cluster task takes no new batch past this


def _result_backend(broker: str | None) -> str | None:
    """Results (``er ingest --wait`` reads them) ride on the broker: Redis, or AMQP's rpc."""
    if broker is None:
        return None
    return broker if broker.startswith(("redis://", "rediss://")) else "rpc://"


app = Celery(
    "er",
    broker=settings.broker_url,
    backend=_result_backend(settings.broker_url),
    include=["workers.tasks"],
)
app.conf.update(
    # https://docs.celeryq.dev/en/stable/userguide/security.html#serializers - JSON only
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # https://docs.celeryq.dev/en/stable/userguide/optimizing.html#reserve-one-task-at-a-time
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    # https://docs.celeryq.dev/en/stable/userguide/workers.html#time-limits
    task_time_limit=TIME_LIMIT,
    task_soft_time_limit=TIME_LIMIT - 300,
    broker_transport_options={
        # an unacknowledged task returns to the queue after this long: longer than any batch
        "visibility_timeout": 2 * TIME_LIMIT,
        # Redis: poll the queues in name order, so where one process takes both
        # (`er worker --ingesters 0`) "celery" (ingest) drains before the "er.*" writers'
        # queues and a cluster task finds a backlog pending, to step in groups and to
        # overlap each step's graph write with the next (er.pipeline.lane._Lane).
        # Round-robin polling alternated one ingest with one cluster task, so a cluster
        # task never saw two pending batches. By default ingest has processes of its own.
        "queue_order_strategy": "sorted",
    },
    result_expires=24 * 3600,
    task_routes={"er.cluster": {"queue": CLUSTER_QUEUE}},
    # keep the application's logging configuration
    worker_hijack_root_logger=False,
    beat_schedule=beat_schedule(settings.eval_schedule),
)
