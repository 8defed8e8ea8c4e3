"""The Celery app's settings that the queue's behaviour rests on (workers/app.py)."""

from __future__ import annotations


def test_the_ingest_queue_is_polled_before_every_writer_queue() -> None:
    """Redis polls a worker's queues in name order ("sorted"), so the name of the
    ingest queue must sort before the cluster queue and every per-collection queue
    (``er.<collection>``): a backlog is ingested first and clustered as one run."""
    from workers.app import CLUSTER_QUEUE, app

    assert app.conf.broker_transport_options["queue_order_strategy"] == "sorted"
    ingest = app.conf.task_default_queue
    for writer in (CLUSTER_QUEUE, "er.", "er.0", "er.A", "er.a", "er.~"):
        assert sorted([writer, ingest])[0] == ingest


def test_json_only_late_acks_one_task_at_a_time() -> None:
    from workers.app import CLUSTER_BUDGET_S, TIME_LIMIT, app

    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_acks_late and conf.worker_prefetch_multiplier == 1
    assert CLUSTER_BUDGET_S < conf.task_soft_time_limit < TIME_LIMIT
    assert conf.broker_transport_options["visibility_timeout"] > TIME_LIMIT
