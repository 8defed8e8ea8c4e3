"""A worker process's heartbeat: its row in ``workers``, stamped at a fixed interval.

Each ``er worker`` process (the writer, and each ingest process beside it) registers a
row of its own when Celery is ready (name, host, pid, queues, the interval it promises)
and a daemon thread stamps it with the database's clock every ``interval_s`` seconds,
and as each task starts, with the task the process last started. A warm shutdown marks
the row stopped; a process killed outright just falls silent, and ``er status`` calls it
gone once it has missed :data:`MISSED_BEATS` beats (:mod:`er.pipeline.operations`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from er.pipeline.stores import _engine
from er.stores.sql import beat_worker, register_worker, stop_worker

logger = logging.getLogger(__name__)

# A worker silent for more than this many of its intervals is gone (er status): one
# late beat (a slow database, a long pause of the process) is not yet a death.
MISSED_BEATS = 2.0


class Heartbeat:
    """The heartbeat of one worker process.

    Parameters
    ----------
    engine : Engine
        The relational store holding ``workers``.
    name : str
        The worker's name (Celery's node name, ``celery@host``).
    queues : sequence of str
        The queues the process consumes.
    interval_s : float
        Seconds between beats (``ER_HEARTBEAT_S``).
    """

    def __init__(
        self, engine: Engine, *, name: str, queues: Sequence[str], interval_s: float
    ) -> None:
        self.engine, self.name, self.queues = engine, name, tuple(queues)
        self.interval_s = float(interval_s)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.worker_id: int | None = None  # the row, once registered
        self._task: tuple[str | None, dt.datetime | None] = (None, None)
        self._wake = threading.Event()  # a beat now: a task started, or the process stops
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="er-heartbeat", daemon=True)
        self._failing = False

    def start(self) -> Heartbeat:
        """Register the row (now, so the first task already names it) and start beating."""
        self.beat()
        self._thread.start()
        return self

    def task_started(self, task: str, collection: str | None) -> None:
        """Note the task the process starts; the thread stamps it at once (a write of
        a few milliseconds on its own connection, off the task's way)."""
        label = task if collection is None else f"{task} {collection}"
        self._task = (label[:500], dt.datetime.now(dt.UTC))
        self._wake.set()

    def beat(self) -> None:
        """Stamp the row now (register it first, or again if it was dropped). A store
        that cannot be reached is logged once per outage; the thread goes on."""
        try:
            with Session(self.engine) as session, session.begin():
                if self.worker_id is None or not beat_worker(session, self.worker_id, *self._task):
                    self.worker_id = register_worker(
                        session,
                        name=self.name,
                        host=self.host,
                        pid=self.pid,
                        queues=self.queues,
                        interval_s=self.interval_s,
                    )
        except Exception as exc:  # the thread must outlive any outage of the store
            if not self._failing:
                logger.warning("heartbeat of %s not recorded: %s", self.name, exc)
            self._failing = True
            return
        if self._failing:
            logger.info("heartbeat of %s recorded again", self.name)
        self._failing = False

    def stop(self) -> None:
        """Stop beating and mark the row stopped (a warm shutdown)."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval_s + 5)
        if self.worker_id is None:
            return
        try:
            with Session(self.engine) as session, session.begin():
                stop_worker(session, self.worker_id)
        except Exception as exc:  # a stop must not fail on the way out
            logger.warning("worker %s not marked stopped: %s", self.name, exc)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stopping:
                return
            self.beat()


def start_heartbeat(settings: Any, *, name: str, queues: Sequence[str]) -> Heartbeat:
    """The heartbeat of this worker process on the stores ``settings`` name, started
    (every ``settings.heartbeat_s`` seconds)."""
    return Heartbeat(
        _engine(settings), name=name, queues=queues, interval_s=settings.heartbeat_s
    ).start()
