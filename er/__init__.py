"""er: entity resolution with incremental, non-greedy hierarchical clustering."""

from er.delta import ClusteringDelta
from er.exceptions import ConfigError, ERError, NotFittedError, StoreError

__version__ = "0.1.0"

__all__ = [
    "ClusteringDelta",
    "ConfigError",
    "ERError",
    "NotFittedError",
    "StoreError",
    "__version__",
]
