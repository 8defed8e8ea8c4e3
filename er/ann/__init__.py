"""Approximate nearest neighbours: the incremental k-NN index and annoy's one-shot graph.

:func:`make_index` builds a :class:`NeighborIndex` (exact, hnswlib, annoy segments, or
``auto``); :func:`batch_neighbors` adds a mini-batch and returns its k-NN among all
points, the form :meth:`er.cluster.MBSCC.partial_fit` takes as ``neighbors=``;
:func:`neighbors_before_add` finds the same lists before the batch is added.
:class:`KeyIndex` proposes candidates by blocking keys instead, at a cost per record
that does not grow with the collection (:func:`record_keys`), ranked by the vectors
of :class:`Int8Rows`.
"""

from er.ann._annoy_index import annoy_knn_graph
from er.ann._index import BACKENDS, NeighborIndex, VectorIndex, load_index, make_index
from er.ann._keys import KeyIndex, n_keys, n_text_keys, record_keys, text_keys
from er.ann._knn import batch_neighbors, index_knn_graph, neighbors_before_add
from er.ann._rows import Int8Rows

__all__ = [
    "BACKENDS",
    "Int8Rows",
    "KeyIndex",
    "NeighborIndex",
    "VectorIndex",
    "annoy_knn_graph",
    "batch_neighbors",
    "index_knn_graph",
    "load_index",
    "make_index",
    "n_keys",
    "n_text_keys",
    "neighbors_before_add",
    "record_keys",
    "text_keys",
]
