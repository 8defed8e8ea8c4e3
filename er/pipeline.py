"""Where algorithm cores meet the stores (DESIGN §5): nothing else imports both.

Today: fit a batch core on a collection's points and write the hierarchy, stamped
with a batch sequence number. The queue-driven incremental pipeline builds on it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from er.cluster import Hierarchy
from er.stores.graph import GraphStore
from er.stores.sql import Batch

logger = logging.getLogger(__name__)

__all__ = ["fit_and_store"]


def fit_and_store(
    session: Session,
    graph: GraphStore,
    *,
    collection_id: int,
    collection: str,
    X: NDArray[np.float32],
    estimator: Any,
    batch_seq: int,
) -> Hierarchy:
    """Fit ``estimator`` on ``X`` and apply its delta to the graph as batch ``batch_seq``.

    The batch row records status and timings in the caller's transaction; the graph
    write is idempotent, so running the same batch again changes nothing.
    """
    timings: dict[str, float] = {}
    batch = session.query(Batch).filter_by(collection_id=collection_id, seq=batch_seq).one_or_none()
    if batch is None:
        batch = Batch(
            collection_id=collection_id,
            seq=batch_seq,
            status="running",
            n_accepted=int(X.shape[0]),
            n_rejected=0,
            timings={},
        )
        session.add(batch)
        session.flush()
    started = time.perf_counter()
    estimator.fit(X)
    timings["fit_s"] = time.perf_counter() - started
    started = time.perf_counter()
    graph.apply_delta(collection, estimator.delta_, batch_seq)
    timings["graph_s"] = time.perf_counter() - started
    batch.status, batch.timings = "done", timings
    logger.info("batch %d of %s: %s", batch_seq, collection, timings)
    return estimator.hierarchy_
