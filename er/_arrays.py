"""Small array helpers shared by the cores and the stores (which must not import each
other, DESIGN §5)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["find_sorted", "grown"]


def grown(a: NDArray[Any], rows: int, fill: Any = 0) -> NDArray[Any]:
    """A copy of ``a`` (shape (m, ...)) with room for ``rows`` >= m rows, the new ones
    ``fill``: the doubling room of the append-only arrays."""
    out = np.full((rows, *a.shape[1:]), fill, a.dtype)
    out[: a.shape[0]] = a
    return out


def find_sorted(keys: NDArray[Any], at: ArrayLike) -> NDArray[np.int64]:
    """Position of each value of ``at`` (any shape) in the sorted ``keys`` (shape (k,),
    any comparable dtype, structured ones included), -1 where absent; same shape as
    ``at``."""
    at = np.asarray(at)
    if keys.size == 0:
        return np.full(at.shape, -1, np.int64)
    pos = np.minimum(np.searchsorted(keys, at), keys.size - 1)
    return np.where(keys[pos] == at, pos, -1)
