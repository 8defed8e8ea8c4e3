"""hnswlib candidates for :class:`er.ann.VectorIndex`.

Inserts run on one thread with a fixed ``random_seed``: hnswlib draws each point's
level from a generator seeded once, so the same inserts in the same order build the
same graph. Queries only read the graph and run on every core: a row's search is the
same whatever thread runs it. A reloaded index draws later levels from a freshly
seeded generator (hnswlib does not save its state), so after a restart the graph is
deterministic but not the one an uninterrupted run would have built; answers keep
their recall.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, cast

import hnswlib
import numpy as np
from numpy.typing import NDArray

__all__ = ["HnswGraph"]


class HnswGraph:
    """hnswlib inner-product graph over unit rows (cosine = 1 - distance)."""

    kind = "hnsw"

    def __init__(self, dim: int, seed: int, params: dict[str, Any]) -> None:
        self.dim, self.seed = dim, seed
        self.M, self.ef_construction, self.ef = params["M"], params["ef_construction"], params["ef"]
        self._index = hnswlib.Index(space="ip", dim=dim)
        self._index.init_index(
            max_elements=1024, ef_construction=self.ef_construction, M=self.M, random_seed=seed
        )

    def insert(self, X: NDArray[np.float32], first_id: int) -> None:
        """Add the rows ``X[first_id:]`` (X: all n points) on one thread: deterministic."""
        V = X[first_id:]
        need = X.shape[0]
        capacity = self._index.get_max_elements()
        if need > capacity:
            self._index.resize_index(max(need, 2 * capacity))
        ids = np.arange(first_id, need, dtype=np.int64)
        self._index.add_items(V, ids, num_threads=1)

    def candidates(
        self, Q: NDArray[np.float32], k: int, X: NDArray[np.float32]
    ) -> NDArray[np.int64]:
        """(b, min(k, n)) candidate ids (re-scored exactly by the caller), -1 where a row
        reaches fewer points (:meth:`_padded`)."""
        n = self._index.get_current_count()
        kk = min(k, n)
        if kk == 0:
            return np.full((Q.shape[0], 0), -1, np.int64)
        ef = max(self.ef, kk)
        while True:
            self._index.set_ef(ef)
            try:
                # queries only read the graph: every core, the same answers
                labels, _ = self._index.knn_query(Q, k=kk, num_threads=-1)
                return cast("NDArray[np.int64]", labels.astype(np.int64))
            except RuntimeError:  # fewer than kk found for some row: widen the search
                if ef >= n:  # a sparse graph (tiny M) cannot reach kk points from some rows
                    return self._padded(Q, kk)
                ef = min(2 * ef, n)

    def _padded(self, Q: NDArray[np.float32], kk: int) -> NDArray[np.int64]:
        """(b, kk) ids: each row's search at the most results it reaches, -1 padded.

        hnswlib refuses a whole query when one row finds fewer than k points; row by
        row, the k that succeeds is searched for, down to none.
        """
        out = np.full((Q.shape[0], kk), -1, np.int64)
        for r in range(Q.shape[0]):
            found = self._reachable(Q[r : r + 1], kk)
            out[r, : found.size] = found
        return out

    def _reachable(self, q: NDArray[np.float32], kk: int) -> NDArray[np.uint64]:
        """Ids of the most (at most kk) points one row's search reaches, shape (<= kk,)."""
        for want in range(kk, 0, -1):
            with contextlib.suppress(RuntimeError):
                found = self._index.knn_query(q, k=want, num_threads=1)[0][0]
                return cast("NDArray[np.uint64]", found)
        return np.zeros(0, np.uint64)

    def save(self, gen: Path) -> dict[str, Any]:
        self._index.save_index(str(gen / "hnsw.bin"))
        return {"file": "hnsw.bin"}

    def load(self, gen: Path, state: dict[str, Any], X: NDArray[np.float32]) -> None:
        self._index = hnswlib.Index(space="ip", dim=self.dim)
        self._index.load_index(str(gen / state["file"]), max_elements=max(X.shape[0], 1024))
