"""``er init``, ``er demo``, ``er worker`` and ``er beat``: setting up and running services."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
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
    from rich.console import Console

    from er.demo import run_febrl_demo

    figures = run_febrl_demo(settings, batch_size=args.batch_size, out=Console(stderr=args.json))
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    return 0


def _celery(*argv: str) -> int:
    """Run Celery on er's app in this process (``er worker``, ``er beat``)."""
    from workers.app import app

    app.start(list(argv))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """The writer's queues in this process; ``--ingesters`` processes beside it take the
    ingest queue, so a bulk load is stored while the writer clusters what is stored."""
    from workers.app import CLUSTER_QUEUE, INGEST_QUEUE

    settings = _settings()
    _broker(settings)
    if args.ingesters < 0:
        raise ERError(f"--ingesters must be 0 or more, not {args.ingesters}.")
    if args.parent is not None:  # started by _ingesters, which set up the stores
        _die_with_parent(args.parent)
        # the writer is the collection's bottleneck and ingest stays well ahead of it
        # (0.1 s a batch against 0.6-1.2), so on a shared machine the writer comes first
        os.nice(INGEST_NICENESS)
    else:
        cmd_init(args)  # the stores' schemas, before the first task
    if args.ingest_only:
        return _celery(*_SOLO, "-Q", INGEST_QUEUE, "-n", f"ingest-{os.getpid()}@%h")
    queues = [CLUSTER_QUEUE, *(f"er.{c}" for c in args.collection or [])]
    if args.ingesters == 0:  # one process takes both, the ingest queue first (workers.app)
        return _celery(*_SOLO, "-Q", ",".join([INGEST_QUEUE, *queues]))
    with _ingesters(args.ingesters):
        return _celery(*_SOLO, "-Q", ",".join(queues))


_SOLO = ("worker", "--loglevel", "INFO", "--pool", "solo")
INGEST_NICENESS = 5  # added to the niceness of the ingest processes the writer starts


@contextlib.contextmanager
def _ingesters(n: int) -> Iterator[None]:
    """``n`` ``er worker --ingest-only`` processes for as long as the block runs: stopped
    (warm: the task in hand finishes) when it ends; on Linux they are sent SIGTERM when
    this process dies, however it dies (``PR_SET_PDEATHSIG``, set by each child)."""
    argv = [sys.executable, "-m", "er.cli", "worker", "--ingest-only", "--parent", str(os.getpid())]
    procs = [subprocess.Popen(argv) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _die_with_parent(parent: int) -> None:
    """SIGTERM to this process when ``parent`` ends (Linux; elsewhere a no-op); exits at
    once if it has ended already."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the line above
        raise SystemExit(0)


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
