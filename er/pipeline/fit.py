"""One batch fit at once and stored (``er demo --synthetic``): the batch cores' path."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from er.cluster import Hierarchy
from er.exceptions import BatchConflictError
from er.pipeline.state import _point_nodes
from er.stores.graph import GraphStore
from er.stores.sql import (
    Batch,
    set_mention_nodes,
)

logger = logging.getLogger(__name__)


def fit_and_store(
    session: Session,
    graph: GraphStore,
    *,
    collection_id: int,
    collection: str,
    X: NDArray[np.float32],
    estimator: Any,
    batch_seq: int,
    external_ids: Sequence[str] | None = None,
) -> Hierarchy:
    """Fit ``estimator`` on ``X`` and apply its delta to the graph as batch ``batch_seq``.

    The batch row records status, timings and the input's fingerprint in the caller's
    transaction; the graph write is idempotent, so running the same batch again
    changes nothing.

    Raises
    ------
    BatchConflictError
        If batch ``batch_seq`` of the collection was already run on other input:
        merging two hierarchies into one batch would corrupt its lineage.
    """
    timings: dict[str, float] = {}
    fingerprint = _fingerprint(X, estimator)
    batch = session.query(Batch).filter_by(collection_id=collection_id, seq=batch_seq).one_or_none()
    if batch is None:
        batch = Batch(
            collection_id=collection_id,
            seq=batch_seq,
            status="running",
            n_accepted=int(X.shape[0]),
            n_rejected=0,
            timings={},
            fingerprint=fingerprint,
        )
        session.add(batch)
        session.flush()
    elif batch.fingerprint not in (None, fingerprint):
        raise BatchConflictError(
            f"batch {batch_seq} of collection {collection!r} was already resolved from other "
            "input; nothing was written. Use a new collection or data dir for new input."
        )
    started = time.perf_counter()
    estimator.fit(X)
    timings["fit_s"] = time.perf_counter() - started
    started = time.perf_counter()
    nodes = _point_nodes(estimator, X.shape[0])
    by_node = None
    if external_ids is not None:
        by_node = dict(zip(nodes.tolist(), map(str, external_ids), strict=True))
        set_mention_nodes(session, collection_id, {e: n for n, e in by_node.items()})
    graph.apply_delta(collection, estimator.delta_, batch_seq, external_ids=by_node)
    timings["graph_s"] = time.perf_counter() - started
    batch.status, batch.timings = "done", timings
    batch.finished_at = dt.datetime.now(dt.UTC)
    logger.info("batch %d of %s: %s", batch_seq, collection, timings)
    hierarchy: Hierarchy = estimator.hierarchy_
    return hierarchy


def _fingerprint(X: NDArray[np.float32], estimator: Any) -> str:
    """sha256 of the points (shape, dtype, bytes) and the estimator's parameters."""
    digest = hashlib.sha256(repr((X.shape, str(X.dtype))).encode())
    digest.update(np.ascontiguousarray(X).tobytes())
    params = {k: v for k, v in vars(estimator).items() if not k.startswith("_") and k[-1] != "_"}
    digest.update(repr(sorted(params.items())).encode())
    return digest.hexdigest()
