"""Domain type aliases shared across er."""

from __future__ import annotations

from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

FloatMatrix: TypeAlias = NDArray[np.float32]
"""(n, d) float32 matrix of points, one row per point."""
IdArray: TypeAlias = NDArray[np.int64]
"""(m,) int64 node or point ids."""
EdgeArray: TypeAlias = NDArray[np.int64]
"""(e, 2) int64 rows of ``(child, parent)``."""
Labels: TypeAlias = NDArray[np.int64]
"""(n,) int64 cluster labels."""

GraphEngine: TypeAlias = Literal["falkordb", "neo4j"]
