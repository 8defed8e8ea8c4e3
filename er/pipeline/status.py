"""``er status``: batches by status, lag, the writer's recent rate and stages, and what
went wrong (failed and stranded batches, failed tasks) with the workers' heartbeats."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from er.exceptions import ERError
from er.pipeline.operations import (
    failed_task_summary,
    last_failed_batch,
    stranded_batches,
    worker_rows,
)
from er.stores.sql import (
    batch_counts,
    find_collection,
    recent_batches,
)


def collection_status(
    session: Session, collection: str, workers: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Batches by status, counts, rejects, lag (seconds the oldest pending batch waits)
    and, over the last done batches, throughput and time per stage (:func:`recent_work`);
    what went wrong: the batch that ``last_failed``, batches ``stranded`` on a worker
    that is gone and ``failed_tasks`` (:mod:`er.pipeline.operations`); and the
    ``workers`` (:func:`er.pipeline.operations.worker_rows`, read here if not given).

    A collection that only failed tasks name (its first ingest failed in a worker)
    gets a row of zeros with them."""
    if workers is None:
        workers = worker_rows(session)
    coll = find_collection(session, collection)
    tasks = failed_task_summary(session, collection)
    if coll is None and not tasks["count"]:
        raise ERError(f"no collection {collection!r}.")
    if coll is None:
        counts: dict[str, Any] = {"batches": {}, "mentions": 0, "rejected": 0, "values": {}}
        return {
            "collection": collection,
            **counts,
            "lag_s": 0.0,
            "recent": recent_work([]),
            "last_failed": None,
            "stranded": [],
            "failed_tasks": tasks,
            "workers": workers,
        }
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
        "last_failed": last_failed_batch(session, coll.id),
        "stranded": stranded_batches(session, coll.id, workers),
        "failed_tasks": tasks,
        "workers": workers,
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
        ``busy_mentions_per_s``: the timed batches' mentions over their writer seconds,
        the rate while the writer works, idle time left out (issue #54: a rate over wall
        time showed 129/s right after a load that ran at 2,637/s);
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
    busy = sum(sum(t.values()) for t in own)
    busy_n = sum(n for n, t, _ in batches if t)
    return {
        "batches": len(batches),
        "span_s": round(span, 3) if span > 0 else None,
        "mentions_per_s": None if rate is None else float(f"{rate:.4g}"),
        "busy_mentions_per_s": float(f"{busy_n / busy:.4g}") if busy > 0 else None,
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
