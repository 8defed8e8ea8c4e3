"""The Celery application (entry point: reads er's settings from the environment)."""

from __future__ import annotations

from celery import Celery

from er.config import get_settings
from workers.schedule import beat_schedule

settings = get_settings()
app = Celery("er", broker=settings.broker_url, include=["workers.tasks"])
app.conf.update(
    # https://docs.celeryq.dev/en/stable/userguide/security.html#serializers - JSON only
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # https://docs.celeryq.dev/en/stable/userguide/optimizing.html#reserve-one-task-at-a-time
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    # https://docs.celeryq.dev/en/stable/userguide/workers.html#time-limits
    task_time_limit=3600,
    task_soft_time_limit=3300,
    # keep the application's logging configuration
    worker_hijack_root_logger=False,
    beat_schedule=beat_schedule(settings.eval_schedule),
)
