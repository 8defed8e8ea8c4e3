"""Clustering cores: pure numpy/scipy, no I/O.

Batch: :class:`SCC`, :class:`Affinity`, :class:`RecipNN`; gradient-based: :class:`GHHC`.
Every estimator returns a
:class:`Hierarchy` (``hierarchy_``) and the :class:`~er.delta.ClusteringDelta`
(``delta_``) that writes it to a store.
"""

from er.cluster._complete import PairScores
from er.cluster._ghhc import GHHC
from er.cluster._graph import as_graph, knn_graph, normalize_rows
from er.cluster._grinch import Grinch
from er.cluster._hierarchy import Hierarchy
from er.cluster._llama import Llama
from er.cluster._mbscc import MBSCC
from er.cluster._scc import SCC, Affinity, RecipNN, thresholds
from er.cluster._trellis import Trellis, TrellisMAP, build_trellis, entity_confidence

__all__ = [
    "GHHC",
    "MBSCC",
    "SCC",
    "Affinity",
    "Grinch",
    "Hierarchy",
    "Llama",
    "PairScores",
    "RecipNN",
    "Trellis",
    "TrellisMAP",
    "as_graph",
    "build_trellis",
    "entity_confidence",
    "knn_graph",
    "normalize_rows",
    "thresholds",
]
