"""``er init``, ``er demo``, ``er worker`` and ``er beat``: setting up and running services."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from er.cli._common import _database, _graph, _settings
from er.exceptions import ERError

logger = logging.getLogger("er")


def cmd_init(args: argparse.Namespace) -> int:
    from er.stores.sql import upgrade

    settings = _settings()
    engine = _database(settings)
    upgrade(engine)
    engine.dispose()
    with _graph(settings) as graph:
        graph.init_schema()
    logger.info(
        "stores ready: %s, %s", engine.url.render_as_string(hide_password=True), settings.graph_url
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    settings = _settings()
    _database(settings).dispose()
    if args.synthetic:
        from er.demo import run_demo

        if args.entities < 1:
            raise ERError(f"--entities must be at least 1. Got {args.entities}.")
        with _graph(settings) as graph:
            run_demo(settings, graph, n_entities=args.entities, seed=args.seed)
        return 0
    from er.demo import run_febrl_demo

    figures = run_febrl_demo(settings, batch_size=args.batch_size)
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    return 0


def _celery(*argv: str) -> int:
    """Run Celery on er's app in this process (``er worker``, ``er beat``)."""
    from workers.app import app

    app.start(list(argv))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.app import CLUSTER_QUEUE

    settings = _settings()
    _broker(settings)
    cmd_init(args)  # the stores' schemas, before the first task
    queues = ["celery", CLUSTER_QUEUE, *(f"er.{c}" for c in args.collection or [])]
    return _celery("worker", "--loglevel", "INFO", "--pool", "solo", "-Q", ",".join(queues))


def _broker(settings: Any) -> str:
    if not settings.broker_url:
        raise ERError(
            "ER_BROKER_URL is not set: a worker needs a broker, e.g. "
            "ER_BROKER_URL=redis://127.0.0.1:6379/0 (er ingest without one runs in process)."
        )
    return str(settings.broker_url)


def cmd_beat(args: argparse.Namespace) -> int:
    settings = _settings()
    _broker(settings)
    schedule = str(settings.data_dir / "celerybeat-schedule")
    return _celery("beat", "--loglevel", "INFO", "--schedule", schedule)
