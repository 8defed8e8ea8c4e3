"""The one type that algorithm cores emit and stores apply.

A :class:`ClusteringDelta` describes how one step (a batch, a mini-batch, a
``fit``) changed a hierarchy: which nodes were added or had their attributes
changed, which were retired, which parent edges appeared and which ended. Cores
build it from numpy arrays; stores apply it idempotently, stamped with the batch
sequence number, so that replaying a batch changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from er.exceptions import ConfigError

__all__ = ["ClusteringDelta"]


def _frozen(values: ArrayLike, dtype: type, name: str, ndim: int) -> NDArray[Any]:
    arr: NDArray[Any] = np.array(values, dtype=dtype, copy=True)
    if arr.size == 0:
        arr = arr.reshape((0,) if ndim == 1 else (0, 2))
    if arr.ndim != ndim or (ndim == 2 and arr.shape[1] != 2):
        shape = "(m,)" if ndim == 1 else "(m, 2)"
        raise ConfigError(f"ClusteringDelta.{name} must have shape {shape}. Got {arr.shape}.")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class ClusteringDelta:
    """Nodes and parent edges added or retired by one clustering step.

    Parameters
    ----------
    node_id : array-like of int, shape (m,)
        Nodes added, or existing nodes whose attributes changed (upserted).
        Leaves (mentions) and clusters share one id space.
    is_leaf : array-like of bool, shape (m,)
        True for mentions (leaves), False for clusters.
    size : array-like of int, shape (m,)
        Number of leaves under each node.
    score : array-like of float, shape (m,)
        Linkage value at which the cluster formed; NaN for leaves.
    level_lo, level_hi : array-like of int, shape (m,)
        First and last SCC/MBSCC level the node spans; for trees without levels,
        its height above the leaves (both equal).
    retired : array-like of int, shape (r,)
        Nodes that stopped being part of the current structure. They are kept,
        stamped, for lineage.
    edges_added : array-like of int, shape (e, 2)
        New ``(child, parent)`` edges.
    edges_retired : array-like of int, shape (q, 2)
        ``(child, parent)`` edges that ended. Retiring happens before adding.
    algorithm : str
        Name of the algorithm that produced the step.

    Notes
    -----
    All arrays are copied and made read-only. The same delta applied twice leaves a
    store unchanged; see :meth:`er.stores.graph.GraphStore.apply_delta`.
    """

    node_id: NDArray[np.int64]
    is_leaf: NDArray[np.bool_]
    size: NDArray[np.int64]
    score: NDArray[np.float64]
    level_lo: NDArray[np.int32]
    level_hi: NDArray[np.int32]
    retired: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    edges_added: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    edges_retired: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    algorithm: str = ""

    def __post_init__(self) -> None:
        specs = {
            "node_id": (np.int64, 1),
            "is_leaf": (np.bool_, 1),
            "size": (np.int64, 1),
            "score": (np.float64, 1),
            "level_lo": (np.int32, 1),
            "level_hi": (np.int32, 1),
            "retired": (np.int64, 1),
            "edges_added": (np.int64, 2),
            "edges_retired": (np.int64, 2),
        }
        for name, (dtype, ndim) in specs.items():
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype, name, ndim))
        self._validate()

    def _validate(self) -> None:
        m = self.node_id.shape[0]
        for name in ("is_leaf", "size", "score", "level_lo", "level_hi"):
            if getattr(self, name).shape[0] != m:
                raise ConfigError(
                    f"ClusteringDelta.{name} must have one entry per node ({m}). "
                    f"Got {getattr(self, name).shape[0]}."
                )
        for name in ("node_id", "retired", "edges_added", "edges_retired"):
            if np.any(getattr(self, name) < 0):
                raise ConfigError(f"ClusteringDelta.{name} must hold ids >= 0.")
        if np.unique(self.node_id).shape[0] != m:
            raise ConfigError("ClusteringDelta.node_id must not repeat a node.")
        if np.any(self.level_lo > self.level_hi):
            raise ConfigError("ClusteringDelta.level_lo must be <= level_hi for every node.")
        if np.any(self.edges_added[:, 0] == self.edges_added[:, 1]):
            raise ConfigError("ClusteringDelta.edges_added must not hold self-loops.")

    @classmethod
    def empty(cls, algorithm: str = "") -> ClusteringDelta:
        """A delta that changes nothing."""
        return cls(
            node_id=np.zeros(0, np.int64),
            is_leaf=np.zeros(0, bool),
            size=np.zeros(0, np.int64),
            score=np.zeros(0),
            level_lo=np.zeros(0, np.int32),
            level_hi=np.zeros(0, np.int32),
            algorithm=algorithm,
        )

    @property
    def n_elements(self) -> int:
        """Nodes plus edges touched: the unit of store throughput."""
        return int(
            self.node_id.shape[0]
            + self.retired.shape[0]
            + self.edges_added.shape[0]
            + self.edges_retired.shape[0]
        )

    def __len__(self) -> int:
        return self.n_elements
