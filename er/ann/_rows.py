"""The blocking keys' vectors, stored as int8 rows with one scale per row.

A collection whose candidates come from blocking keys (:class:`er.ann.KeyIndex`) keeps
every record's vector only to rank the records sharing a key with a new one by cosine.
Stored as float32 at 1,024 dimensions they were 4 GiB at a million records, the
largest part of the writer's memory. Each row ``x`` is stored instead as
``round(x / s)`` in int8 with ``s = max|x| / 127`` (float32, one per row): a quarter
of the memory, and the gathered rows convert to float32 as fast as float32 rows are
gathered (bench/RESULTS.md, "End to end").

The error is bounded: each stored component is off by at most ``s / 2``, so a
similarity ``q . x`` with a unit query ``q`` is off by at most ``s / 2 * ||q||_1``
(<= ``s / 2 * sqrt(d)``); for the featurizer's unit rows ``s`` is about 0.002, the
bound about 0.03 and the typical error (a sum of independent rounding errors) about
``s / sqrt(12)``, 6e-4. The ranking only chooses which candidates the pair model
scores; it is a function of the stored rows, so a replay ranks alike.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from er._arrays import grown
from er.ann._index import rank

__all__ = ["Int8Rows"]

_LEVELS = 127.0


class Int8Rows:
    """Append-only unit rows in int8, one float32 scale per row.

    Parameters
    ----------
    dim : int
        Row length.

    Attributes
    ----------
    _X : ndarray of int8, shape (capacity, dim)
        The quantized rows; the first ``_n`` are in use (a row log of the writer's
        checkpoint, er/_checkpoint.py).
    _scale : ndarray of float32, shape (capacity, 1)
        Each row's scale (2-D so that it is a row log too).
    """

    def __init__(self, dim: int) -> None:
        self.dim = int(dim)
        self._X: NDArray[np.int8] = np.zeros((0, self.dim), np.int8)
        self._scale: NDArray[np.float32] = np.zeros((0, 1), np.float32)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, X: NDArray[np.float32]) -> NDArray[np.int64]:
        """Store rows ``X`` (shape (b, dim)); return their ids ``len(self)`` .. + b - 1."""
        q, scale = quantize(X)
        n0, n1 = self._n, self._n + q.shape[0]
        if n1 > self._X.shape[0]:
            room = max(n1, 2 * self._X.shape[0], 1024)
            self._X, self._scale = grown(self._X, room), grown(self._scale, room)
        self._X[n0:n1], self._scale[n0:n1] = q, scale
        self._n = n1
        return np.arange(n0, n1, dtype=np.int64)

    def floats(self, stop: int) -> NDArray[np.float32]:
        """(stop, dim) the first ``stop`` rows as stored, in float32."""
        return self._X[:stop].astype(np.float32) * self._scale[:stop]

    def rank(
        self, Q: NDArray[np.float32], cand: NDArray[np.int64], k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """The best k candidates of each query row by cosine, ties to the lower id.

        Parameters
        ----------
        Q : ndarray of float32, shape (b, dim)
            Unit query rows.
        cand : ndarray of int64, shape (b, c)
            Distinct stored ids per row, -1 for none.
        k : int

        Returns
        -------
        idx : ndarray of int64, shape (b, k), -1 padded
        sim : ndarray of float32, shape (b, k), -inf padded
        """
        X, scale = self._X[: self._n], self._scale[: self._n, 0]
        return rank(Q, X, cand, k, np.float32, scale=scale)


def quantize(X: NDArray[np.floating]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Rows as int8 and their scales: ``X ~= q * scale``.

    Parameters
    ----------
    X : ndarray of shape (b, d)

    Returns
    -------
    q : ndarray of int8, shape (b, d)
    scale : ndarray of float32, shape (b, 1)
        ``max|x| / 127`` per row; 0 for a zero row (stored as zeros).
    """
    X = np.asarray(X, np.float32)
    top = np.abs(X).max(axis=1, keepdims=True) if X.shape[1] else np.zeros((len(X), 1))
    scale = (top / _LEVELS).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.clip(np.rint(X / safe), -_LEVELS, _LEVELS).astype(np.int8)
    return q, scale
