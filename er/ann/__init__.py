"""Approximate nearest neighbours (annoy) feeding the clustering cores' graph input."""

from er.ann._annoy_index import annoy_knn_graph

__all__ = ["annoy_knn_graph"]
