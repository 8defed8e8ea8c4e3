"""A collection's hierarchy as columns, read from the graph in windows of node ids.

At a million mentions the structure is about 1.6 million nodes and as many edges. Read
as one reply of row maps it held several hundred bytes per node in the driver's rows
and ours at once; read window by window into numpy columns it holds 41 bytes per node
and a window's rows at a time (``er eval``'s memory, issue #31).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er._arrays import find_sorted

__all__ = ["WINDOW", "Memberships", "Structure"]

# Node ids per read: bounds one reply (the driver's rows and ours) to this many nodes.
WINDOW = 100_000


@dataclass(frozen=True)
class Structure:
    """A collection's hierarchy as of one batch: one row per node alive then, by id.

    Attributes
    ----------
    ids : ndarray of int64, shape (v,)
        Node ids, ascending.
    leaf : ndarray of bool, shape (v,)
        Whether each node is a mention.
    size, level_lo, level_hi : ndarray of int64, shape (v,)
        The attributes as of the same batch.
    score : ndarray of float64, shape (v,)
        Linkage score as of the batch; NaN where there is none (mentions).
    edges : ndarray of int64, shape (e, 2)
        ``(child, parent)`` node ids of the parent edges then, sorted by child, then
        parent.
    """

    ids: NDArray[np.int64]
    leaf: NDArray[np.bool_]
    size: NDArray[np.int64]
    score: NDArray[np.float64]
    level_lo: NDArray[np.int64]
    level_hi: NDArray[np.int64]
    edges: NDArray[np.int64]

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """The rows as maps (``id``, ``leaf``, ``size``, ``score`` (None for NaN),
        ``level_lo``, ``level_hi``): for small structures and tests."""
        score = [None if s != s else s for s in self.score.tolist()]
        return [
            {"id": i, "leaf": f, "size": z, "score": s, "level_lo": lo, "level_hi": hi}
            for i, f, z, s, lo, hi in zip(
                self.ids.tolist(),
                self.leaf.tolist(),
                self.size.tolist(),
                score,
                self.level_lo.tolist(),
                self.level_hi.tolist(),
                strict=True,
            )
        ]

    @classmethod
    def from_windows(
        cls, nodes: Sequence[dict[str, NDArray[Any]]], edges: Sequence[NDArray[np.int64]]
    ) -> Structure:
        """Join the windows' columns (:func:`node_columns`, :func:`id_pairs`), read in
        ascending id order."""
        cols: dict[str, NDArray[Any]] = {
            k: np.concatenate([np.zeros(0, dt), *(w[k] for w in nodes)])
            for k, dt in _NODE_COLUMNS.items()
        }
        return cls(**cols, edges=np.concatenate([np.zeros((0, 2), np.int64), *edges]))


@dataclass(frozen=True)
class Memberships:
    """Each mention's stable entity as of one batch, as two columns.

    Attributes
    ----------
    mentions : ndarray of int64, shape (m,)
        Mention node ids, ascending.
    entities : ndarray of int64, shape (m,)
        The entity of each.
    """

    mentions: NDArray[np.int64]
    entities: NDArray[np.int64]

    def of(self, nodes: NDArray[np.int64]) -> NDArray[np.int64]:
        """(k,) the entity of each of ``nodes``; -1 for a node with none."""
        at = find_sorted(self.mentions, nodes)
        return np.where(at >= 0, self.entities[at], -1) if len(self.mentions) else at

    def as_dict(self) -> dict[int, int]:
        """Mention node id -> entity id."""
        return dict(zip(self.mentions.tolist(), self.entities.tolist(), strict=True))


_NODE_COLUMNS: dict[str, type[np.generic]] = {
    "ids": np.int64,
    "leaf": np.bool_,
    "size": np.int64,
    "score": np.float64,
    "level_lo": np.int64,
    "level_hi": np.int64,
}


def node_columns(rows: list[dict[str, Any]]) -> dict[str, NDArray[Any]]:
    """One window of ``structure_nodes`` rows as columns (a missing value: 0; a missing
    score: NaN)."""
    n = len(rows)
    out: dict[str, NDArray[Any]] = {
        "ids": np.fromiter((r["id"] for r in rows), np.int64, n),
        "leaf": np.fromiter((bool(r["leaf"]) for r in rows), np.bool_, n),
        "score": np.fromiter(
            (np.nan if r["score"] is None else r["score"] for r in rows), np.float64, n
        ),
    }
    for k in ("size", "level_lo", "level_hi"):
        out[k] = np.fromiter((r[k] or 0 for r in rows), np.int64, n)
    return out


def id_pairs(rows: list[dict[str, Any]], left: str, right: str) -> NDArray[np.int64]:
    """(e, 2) one window's rows as ``(left, right)`` id pairs (edges, memberships)."""
    flat = np.fromiter((v for r in rows for v in (r[left], r[right])), np.int64, 2 * len(rows))
    return flat.reshape(-1, 2)
