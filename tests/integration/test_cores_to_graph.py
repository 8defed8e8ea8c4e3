"""Cores to FalkorDB: every delta of MBSCC and GRINCH, applied batch after batch.

After each ``partial_fit`` the delta goes to the embedded FalkorDB and to the plain
Python oracle (which un-retires ids that come back and keeps attribute history).
Every as-of structure so far must equal the oracle's, node attributes included, and
must equal the in-memory hierarchy the estimator had after that batch: the same
clusters (by the points they hold) with the same size, score and levels.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC, Grinch
from er.stores.graph import FalkorDBStore

from ..unit.cluster.test_delta_replay import _clusters, batches
from ._graph_oracle import HistoryOracle

pytestmark = pytest.mark.graph

ESTIMATORS = {
    "mbscc-paper": lambda: MBSCC(k=3, n_levels=8),
    "mbscc-exact": lambda: MBSCC(k=3, n_levels=8, marking="exact"),
    "grinch": lambda: Grinch(mode="grinch"),
    "rotate": lambda: Grinch(mode="rotate"),
}


@pytest.fixture(scope="module")
def graph_store(falkordb_server: Any) -> Any:

    graph = falkordb_server.client().select_graph("cores_to_graph")
    store = FalkorDBStore(graph)
    store.init_schema()
    yield store
    graph.delete()


def _point_of(est: Any) -> dict[int, int]:
    if isinstance(est, Grinch):
        return {leaf: i for i, leaf in enumerate(est._leaf_of)}
    return {int(est.node_ids_[i]): i for i in range(est.hierarchy_.n_points)}


def _same(a: Any, b: float) -> bool:
    if a is None or b != b:
        return a is None and b != b
    return abs(float(a) - b) <= 1e-9


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(xs=batches(), name=st.sampled_from(sorted(ESTIMATORS)))
def test_every_batch_lands_exactly(graph_store: Any, xs: list[np.ndarray], name: str) -> None:
    collection = f"{name}-{uuid.uuid4().hex[:8]}"
    est, oracle = ESTIMATORS[name](), HistoryOracle()
    snapshots = []  # (hierarchy, point of leaf id) after each batch
    try:
        for seq, X in enumerate(xs, start=1):
            est.partial_fit(X)
            snapshots.append((copy.deepcopy(est.hierarchy_), _point_of(est)))
            graph_store.apply_delta(collection, est.delta_, seq)
            oracle.apply(est.delta_, seq)
            for b in range(1, seq + 1):
                got = graph_store.structure(collection, as_of=b)
                assert sorted(n["id"] for n in got.nodes) == oracle.nodes_at(b)
                np.testing.assert_array_equal(got.edges, oracle.edges_at(b))
                for node in got.nodes:
                    expected = oracle.attrs_at(node["id"], b)
                    assert expected is not None, (b, node)
                    assert {k: node[k] for k in ("size", "level_lo", "level_hi")} == {
                        k: expected[k] for k in ("size", "level_lo", "level_hi")
                    }, (b, node, expected)
                    assert _same(node["score"], _nan(expected["score"])), (b, node, expected)
                _matches_hierarchy(got, *snapshots[b - 1])
    finally:
        graph_store.delete_collection(collection)


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _matches_hierarchy(structure: Any, h: Any, point_of: dict[int, int]) -> None:
    stored = _clusters({tuple(e) for e in structure.edges.tolist()}, point_of)
    expected = _clusters({tuple(e) for e in h.edges.tolist()}, {i: i for i in range(h.n_points)})
    by_points = {s: v for v, s in expected.items()}
    nodes = {n["id"]: n for n in structure.nodes}
    assert sorted(map(sorted, (stored[v] for v in nodes))) == sorted(map(sorted, expected.values()))
    sizes = h.sizes()
    for v, node in nodes.items():
        w = by_points[stored[v]]
        assert (node["size"], node["level_lo"], node["level_hi"]) == (
            int(sizes[w]),
            int(h.level_lo[w]),
            int(h.level_hi[w]),
        )
        assert _same(node["score"], float(h.score[w])), (v, node["score"], h.score[w])
