"""What a worker process tells the relational store about itself (thin: each handler
calls one er.pipeline function): its heartbeat, from when Celery is ready until a warm
shutdown, with the task it last started; and each er.ingest or er.cluster task that
fails for good, kept with its reason for ``er status`` and ``er retry``."""

from __future__ import annotations

from typing import Any

from celery import signals

from workers.app import settings

_BEAT: list[Any] = []  # this process's heartbeat (er.pipeline.Heartbeat), once ready
KEPT_WHEN_FAILED = ("er.ingest", "er.cluster")


def worker_id() -> int | None:
    """This worker process's row in ``workers`` (None before it is registered)."""
    return _BEAT[0].worker_id if _BEAT else None


def _ready(sender: Any = None, **_: Any) -> None:
    from er.pipeline import start_heartbeat

    queues = sorted(sender.app.amqp.queues.consume_from) if sender is not None else []
    _BEAT.append(start_heartbeat(settings, name=str(sender.hostname), queues=queues))


def _task_started(task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    if _BEAT and task is not None:
        _BEAT[0].task_started(task.name, (kwargs or {}).get("collection"))


def _shutdown(**_: Any) -> None:
    while _BEAT:
        _BEAT.pop().stop()


def _failed(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> None:
    """A task that failed for good (after its retries; a retry is no failure)."""
    if sender is None or sender.name not in KEPT_WHEN_FAILED or exception is None:
        return
    from er.pipeline import run_task_failed

    run_task_failed(
        settings, task=sender.name, task_id=task_id, kwargs=kwargs or {}, error=exception
    )


signals.worker_ready.connect(_ready)
signals.task_prerun.connect(_task_started)
signals.worker_shutdown.connect(_shutdown)
signals.task_failure.connect(_failed)
