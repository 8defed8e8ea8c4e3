"""The k-nearest-neighbour lists MBSCC maintains across mini-batches (dissertation §4.2).

U(0) of each mini-batch comes from here: the new points, their neighbours, and the old
points whose lists a new point entered. Each ``add`` also keeps the lists it rewrote as
they were before (``replaced_``): MBSCC's floor components read what changed in them
(er.cluster._components.changed_points).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.cluster._graph import (
    _slot_in_row,
    best_per_row,
    knn_lists_graph,
    pair_similarities,
    score_in_chunks,
    screen_slack,
    screened_top_k,
)

# rows (r,) and their lists: idx (r, k), sim (r, k)
_Lists = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]


class _KnnLists:
    """Exact k-NN lists of every point so far; ties go to the lower point index.

    ``keep_points=False`` keeps the lists alone: every batch must then bring its
    neighbours (a caller's index, which holds the points already: 4 GB saved at a
    million points of 1,024 dimensions).

    Attributes
    ----------
    replaced_ : tuple (rows, idx, sim)
        The old lists the last :meth:`add` rewrote, as they were before it: ``rows``
        (r,) int64 ascending, ``idx`` (r, k) int64 and ``sim`` (r, k) float32. Every
        other old list is as it was. Not saved with the lists (it describes one call).
    """

    def __init__(self, k: int, dim: int, keep_points: bool = True) -> None:
        self.k = k
        self.dim, self.keep_points = dim, keep_points
        # rows 0.._n-1 of X are the points; the rest is room to grow, so that a batch
        # does not copy every earlier row (400 MB per batch at 100k x 1,024-d)
        self.X = np.zeros((0, dim), np.float32)
        self._n = 0
        # rows 0.._n-1 are the lists; the rest is room, as for X
        self._idx = np.zeros((0, k), np.int64)
        self._sim = np.zeros((0, k), np.float32)
        self.replaced_ = _no_rows(k)
        self._replaced: list[_Lists] = []  # the rewrites of an add, while it runs

    @property
    def idx(self) -> NDArray[np.int64]:
        """(n, k) each point's neighbours, -1 for none (a view)."""
        return self._idx[: self._n]

    @property
    def sim(self) -> NDArray[np.float32]:
        """(n, k) their similarities, -inf for none (a view)."""
        return self._sim[: self._n]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if "_n" in state:  # without the spare room
            state["_idx"], state["_sim"] = self.idx, self.sim
        for name in ("replaced_", "_replaced"):  # one call's, rebuilt by the next add
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_n", state["X"].shape[0])  # pickles from before the spare room
        state.setdefault("dim", state["X"].shape[1])
        state.setdefault("keep_points", True)
        if "idx" in state:  # pickles from before the lists' spare room
            state["_idx"], state["_sim"] = state.pop("idx"), state.pop("sim")
        state.pop("_touched", None)  # the rows of the last add, kept before replaced_
        state["replaced_"], state["_replaced"] = _no_rows(state["k"]), []
        self.__dict__.update(state)

    @property
    def points(self) -> NDArray[np.float32]:
        """(n, d) the points so far, in arrival order (a view)."""
        return self.X[: self._n]

    def _grow(self, rows: NDArray[np.float32]) -> None:
        """Append rows (count them only, without ``keep_points``), doubling the room
        when it runs out."""
        n1 = self._n + rows.shape[0]
        if not self.keep_points:
            self._n = n1
            return
        if n1 > self.X.shape[0]:
            room = np.empty((max(n1, 2 * self.X.shape[0]), self.X.shape[1]), np.float32)
            room[: self._n] = self.X[: self._n]
            self.X = room
        self.X[self._n : n1] = rows
        self._n = n1

    def add(
        self,
        rows: NDArray[np.float32],
        neighbors: tuple[NDArray[np.int64], NDArray[np.float32]] | None = None,
        block: int = 1024,
    ) -> NDArray[np.bool_]:
        """Add points; return (n,) True for U(0): new points, their neighbours, and old
        points whose neighbour lists took a new point (§4.2).

        ``neighbors`` = (idx, sim), each (b, w): the new rows' neighbours among all
        points so far, from the caller's index; without it the lists are exact.
        """
        n0 = self._n
        self._replaced = []
        self._grow(rows)
        n1 = self._n
        if neighbors is not None:
            new_idx, new_sim = self._take_given(*neighbors, n0)
            return self._append(new_idx, new_sim, n0)
        new_idx = np.full((n1 - n0, self.k), -1, np.int64)
        new_sim = np.full((n1 - n0, self.k), -np.inf, np.float32)
        k = min(self.k, n1 - 1)
        for start in range(n0, n1, block):
            stop = min(start + block, n1)
            top, top_sim = self._search(start, stop, n0, k)
            new_idx[start - n0 : stop - n0, :k] = top
            new_sim[start - n0 : stop - n0, :k] = top_sim
        return self._append(new_idx, new_sim, n0)

    def _keep_replaced(self) -> None:
        """``replaced_`` from the rewrites of this add: each row's list before its first
        (a row a later block rewrites again keeps the one from before the batch)."""
        if not self._replaced:
            self.replaced_ = _no_rows(self.k)
            return
        rows = np.concatenate([r for r, _, _ in self._replaced])
        idx = np.concatenate([i for _, i, _ in self._replaced])
        sim = np.concatenate([v for _, _, v in self._replaced])
        rows, first = np.unique(rows, return_index=True)  # the first of each row
        self.replaced_ = (rows, idx[first], sim[first])
        self._replaced = []

    def _search(
        self, start: int, stop: int, n0: int, k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Exact top k of rows start..stop-1 among all points; old lists take them in.

        A float32 product screens the candidates; the exact values (float64 products
        rounded to float32, :func:`similarities`) are computed for those alone, with
        a margin above float32's rounding error, so the result is the exact one.

        Returns
        -------
        idx : ndarray of int64, shape (stop - start, k)
        sim : ndarray of float32, shape (stop - start, k)
        """
        X = self.points
        Q = X[start:stop]
        d = Q.shape[1]
        S = Q @ X.T  # (b, n1) screen; the rows' own columns are all >= n0
        self._merge_old(S[:, :n0], Q, start, screen_slack(d))
        return screened_top_k(S, Q, X, k, exclude=np.arange(start, stop))

    def _append(
        self, new_idx: NDArray[np.int64], new_sim: NDArray[np.float32], n0: int
    ) -> NDArray[np.bool_]:
        """Store the new rows' lists; U(0) as in :meth:`add`."""
        n1 = n0 + new_idx.shape[0]
        if n1 > self._idx.shape[0]:  # double the room: a batch copies only its own rows
            room = max(n1, 2 * self._idx.shape[0])
            self._idx = _with_room(self._idx[:n0], room, -1)
            self._sim = _with_room(self._sim[:n0], room, -np.inf)
        self._idx[n0:n1], self._sim[n0:n1] = new_idx, new_sim
        self._keep_replaced()
        marked = np.zeros(self._n, bool)
        marked[n0:] = True
        marked[new_idx[new_idx >= 0]] = True
        marked[self.replaced_[0]] = True
        return marked

    def _take_given(
        self, idx: NDArray[np.int64], sim: NDArray[np.float32], n0: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """New rows' top k from the supplied lists; old lists take the reverse edges.

        An old point j takes new point i when sim(i, j) reaches j's k-th similarity
        (§4.2: old points whose top k a new point enters); the pairs known are those
        in the supplied lists, so with complete lists this equals the exact update.
        """
        b, w = idx.shape
        new_idx, new_sim = best_per_row(idx, sim.astype(np.float32, copy=False), self.k)
        old = (idx >= 0) & (idx < n0)
        rows = np.repeat(np.arange(n0, n0 + b), w).reshape(b, w)[old]
        self._merge_pairs(idx[old], rows, sim[old])
        return new_idx, new_sim

    def _merge_pairs(
        self, old: NDArray[np.int64], new: NDArray[np.int64], s: NDArray[np.float32]
    ) -> None:
        """Let new point new[e] into old point old[e]'s list at similarity s[e].

        Parameters
        ----------
        old, new : ndarray of int64, shape (p,)
        s : ndarray of float32, shape (p,)
        """
        beats = s >= self.sim[old].min(axis=1)  # -inf while a list is not full
        old, new, s = old[beats], new[beats], s[beats]
        if old.size == 0:
            return
        k = self.k
        # per list, its candidates best first (ties to the lower point index); only
        # its best k can enter it, so a list that many new points reach stays k wide
        order = np.lexsort((new, -s, old))
        old, new, s = old[order], new[order], s[order]
        first = np.flatnonzero(np.r_[True, old[1:] != old[:-1]])
        rows, count = old[first], np.diff(np.r_[first, old.size])
        rank = _slot_in_row(count)
        top = rank < k
        self._replaced.append((rows, self.idx[rows], self.sim[rows]))  # fancy: copies
        # one row per touched list: its k entries, then its candidates (-1 / -inf
        # pads), each row sorted on its own: small sorts instead of one over all lists
        c = np.full((rows.size, k + int(min(count.max(), k))), -1, np.int64)
        v = np.full(c.shape, -np.inf, np.float32)
        c[:, :k], v[:, :k] = self.idx[rows], self.sim[rows]
        row = np.repeat(np.arange(rows.size), count)[top]
        c[row, k + rank[top]], v[row, k + rank[top]] = new[top], s[top]
        self.idx[rows], self.sim[rows] = best_per_row(c, v, k)

    def _merge_old(
        self, S_old: NDArray[np.float32], Q: NDArray[np.float32], first_new: int, slack: float
    ) -> None:
        """Let new points (rows of S_old, the screen) into the old lists they beat.

        Only columns whose best new value reaches the list's k-th similarity (less
        the screen's slack) can change; their exact values decide.
        """
        if S_old.shape[1] == 0:
            return
        kth = self._sim[: S_old.shape[1]].min(axis=1)  # -inf while a list is not full
        cols = np.flatnonzero(S_old.max(axis=0) >= kth - slack)
        if cols.size == 0:
            return
        new, at = np.nonzero(S_old[:, cols] >= kth[cols] - slack)
        old = cols[at]
        exact = pair_similarities(Q[new], self.X[old])  # old < n0 <= _n
        beats = exact >= kth[old]
        self._merge_pairs(old[beats], first_new + new[beats], exact[beats])

    def rescore(self, scores: Callable[[NDArray[np.int64], NDArray[np.int64]], Any]) -> None:
        """Score every list's pairs again (a new pair model) and re-sort each list, best
        first; the pairs stay the ones the lists hold.

        Every pair of a large collection's lists at once would not fit in memory (a
        million mentions' lists hold tens of millions): they are scored in chunks
        (:func:`score_in_chunks`).

        Parameters
        ----------
        scores : callable (left (p,), right (p,)) -> (p,) similarities
        """
        rows, cols = np.nonzero(self.idx >= 0)
        if rows.size == 0:
            return
        sim = np.full(self.sim.shape, -np.inf, np.float32)
        sim[rows, cols] = score_in_chunks(scores, rows.astype(np.int64), self.idx[rows, cols])
        self._idx[: self._n], self._sim[: self._n] = best_per_row(self.idx.copy(), sim, self.k)

    def graph(self) -> Any:
        """The symmetric k-NN graph of the lists (:func:`knn_lists_graph`)."""
        return knn_lists_graph(self.idx, self.sim)


def _no_rows(k: int) -> _Lists:
    """An empty ``replaced_``: no row rewritten."""
    return np.zeros(0, np.int64), np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)


def _with_room(a: NDArray[Any], rows: int, fill: float) -> NDArray[Any]:
    """``a`` (r, k) copied into an array of ``rows`` rows, the rest ``fill``."""
    out = np.full((rows, a.shape[1]), fill, a.dtype)
    out[: a.shape[0]] = a
    return out
