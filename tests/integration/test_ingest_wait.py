"""``er ingest --wait``: it returns when, and only when, every batch it queued resolved.

Real PostgreSQL: the batches' rows are set done by another connection while the wait
polls, in seq order as the writer resolves them, across several of its windows.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from er.cli.ingest import WAIT_WINDOW, _wait_resolved
from er.exceptions import ERError
from er.stores.sql import Batch, get_or_create_collection, make_engine, open_batch, upgrade

pytestmark = pytest.mark.postgres


def _queued(url: str, name: str, n: int) -> list[int]:
    """A collection with ``n`` pending batches; their seqs."""
    engine = make_engine(url)
    upgrade(engine)
    with Session(engine) as session:
        coll = get_or_create_collection(session, name)
        seqs = [open_batch(session, coll.id).seq for _ in range(n)]
        session.commit()
    engine.dispose()
    return seqs


def _resolve(url: str, name: str, seqs: list[int], last: list[float], pause: float) -> None:
    """Set each batch done (the last one failed), in order, ``pause`` s apart; record
    when the last one's update was sent."""
    engine = make_engine(url)
    with Session(engine) as session:
        coll = get_or_create_collection(session, name)
        for i, seq in enumerate(seqs):
            status = "failed" if i == len(seqs) - 1 else "done"
            where = (Batch.collection_id == coll.id) & (Batch.seq == seq)
            if i == len(seqs) - 1:
                last.append(time.monotonic())
            session.execute(update(Batch).where(where).values(status=status))
            session.commit()
            time.sleep(pause)
    engine.dispose()


def test_wait_returns_after_the_last_batch_across_windows(pg_url: str) -> None:
    n = 2 * WAIT_WINDOW + 7
    seqs = _queued(pg_url, "waited", n)
    last: list[float] = []
    worker = threading.Thread(target=_resolve, args=(pg_url, "waited", seqs, last, 0.005))
    worker.start()
    _wait_resolved(SimpleNamespace(sqlalchemy_url=pg_url), "waited", set(seqs), 60.0)
    returned = time.monotonic()
    worker.join()
    assert last and returned > last[0]  # not before the last batch's update was sent


def test_wait_times_out_on_a_batch_left_pending_past_the_first_window(pg_url: str) -> None:
    seqs = _queued(pg_url, "stuck", WAIT_WINDOW + 3)
    stuck = seqs[WAIT_WINDOW + 1]
    _resolve(pg_url, "stuck", [s for s in seqs if s != stuck], [], 0.0)
    settings = SimpleNamespace(sqlalchemy_url=pg_url)
    with pytest.raises(ERError, match="stuck: batches not resolved after"):
        _wait_resolved(settings, "stuck", set(seqs), 1.0)
    # a seq without a batch row (a batch with nothing accepted) counts as resolved
    _resolve(pg_url, "stuck", [stuck], [], 0.0)
    _wait_resolved(settings, "stuck", {*seqs, max(seqs) + 1000}, 5.0)
