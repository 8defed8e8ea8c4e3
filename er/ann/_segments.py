"""annoy segments plus an exact buffer: candidates for :class:`er.ann.VectorIndex`.

annoy indexes are immutable once built (annoy README), so the newest points live in
an exact buffer: ids ``[buffer_start, n)`` are searched by brute force. When the
buffer reaches ``buffer_size`` points it is built into a segment, a seeded annoy
index over a contiguous id range. Segments merge geometrically, like a binary
counter: while the newest segment is at least as large as the one before it, the two
are rebuilt as one, so there are O(log n) segments and each point is rebuilt
O(log n) times. A query asks every segment and the buffer and the caller re-scores
the union exactly.

Each segment's annoy seed derives from the index seed and its id range, so the same
inserts give the same segments whether or not the index was saved and reloaded in
between. Saved segments are memory-mapped (annoy's ``save`` re-opens the file with
mmap); a save hard-links unchanged segment files into the new generation and writes
only new or merged ones, and the generation swap (``os.replace`` of ``CURRENT``)
makes merges atomic on disk.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from annoy import AnnoyIndex
from numpy.typing import NDArray

from er.cluster._graph import similarities, top_k

__all__ = ["AnnoySegments"]


@dataclass
class _Segment:
    start: int
    stop: int
    index: AnnoyIndex
    path: Path | None = None  # file it is memory-mapped from, once saved

    @property
    def name(self) -> str:
        return f"seg-{self.start:012d}-{self.stop:012d}.ann"


class AnnoySegments:
    """Seeded annoy segments over id ranges ``[0, buffer_start)`` plus an exact buffer."""

    kind = "annoy"

    def __init__(self, dim: int, seed: int, params: dict[str, Any]) -> None:
        self.dim, self.seed = dim, seed
        self.n_trees, self.search_k = params["n_trees"], params["search_k"]
        self.buffer_size = params["buffer_size"]
        self.segments: list[_Segment] = []
        self.buffer_start = 0

    def insert(self, X: NDArray[np.float32], first_id: int) -> None:
        """Note the rows ``X[first_id:]`` (X: all n points); flush a full buffer."""
        n = X.shape[0]
        if n - self.buffer_start >= self.buffer_size:
            self._flush(X)

    def _flush(self, X: NDArray[np.float32]) -> None:
        n = X.shape[0]
        self.segments.append(self._build(X, self.buffer_start, n))
        self.buffer_start = n
        while len(self.segments) >= 2 and self._size(-1) >= self._size(-2):
            b = self.segments.pop()
            a = self.segments.pop()
            self.segments.append(self._build(X, a.start, b.stop))

    def _size(self, i: int) -> int:
        return self.segments[i].stop - self.segments[i].start

    def _build(self, X: NDArray[np.float32], start: int, stop: int) -> _Segment:
        index = AnnoyIndex(self.dim, "angular")
        index.set_seed((self.seed * 1_000_003 + start * 7_919 + stop) % (2**31 - 1))
        for local, row in enumerate(X[start:stop]):
            index.add_item(local, row)
        index.build(self.n_trees, n_jobs=1)  # one job: deterministic for the seed
        return _Segment(start, stop, index)

    def candidates(
        self, Q: NDArray[np.float32], k: int, X: NDArray[np.float32]
    ) -> NDArray[np.int64]:
        """(b, c) distinct candidate ids: each segment's top k and the buffer's exact top k."""
        parts = [self._segment_candidates(s, Q, k) for s in self.segments]
        parts.append(self._buffer_candidates(Q, k, X))
        return np.hstack(parts)

    def _segment_candidates(
        self, seg: _Segment, Q: NDArray[np.float32], k: int
    ) -> NDArray[np.int64]:
        kk = min(k, seg.stop - seg.start)
        out = np.full((Q.shape[0], kk), -1, np.int64)
        for r, q in enumerate(Q):
            local = seg.index.get_nns_by_vector(q, kk, search_k=self.search_k)
            out[r, : len(local)] = np.asarray(local, np.int64) + seg.start
        return out

    def _buffer_candidates(
        self, Q: NDArray[np.float32], k: int, X: NDArray[np.float32]
    ) -> NDArray[np.int64]:
        B = X[self.buffer_start :]
        kk = min(k, B.shape[0])
        if kk == 0:
            return np.full((Q.shape[0], 0), -1, np.int64)
        return top_k(similarities(Q, B), kk) + self.buffer_start

    def save(self, gen: Path) -> dict[str, Any]:
        for seg in self.segments:
            target = gen / seg.name
            if seg.path is not None and seg.path.exists():
                _link_or_copy(seg.path, target)
            else:
                seg.index.save(str(target))  # annoy re-opens the saved file with mmap
            seg.path = target
        return {
            "segments": [[s.start, s.stop, s.name] for s in self.segments],
            "buffer_start": self.buffer_start,
        }

    def load(self, gen: Path, state: dict[str, Any], X: NDArray[np.float32]) -> None:
        self.segments = []
        for start, stop, name in state["segments"]:
            index = AnnoyIndex(self.dim, "angular")
            index.load(str(gen / name))  # memory-mapped
            self.segments.append(_Segment(int(start), int(stop), index, gen / name))
        self.buffer_start = int(state["buffer_start"])


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
