"""Which floor components a batch redoes (issue #56): the old ends of the pairs it
changed that matter (:func:`er.cluster._components.changed_points`).

Oracle: the same core marking every old point of U(0) (the new points' neighbours and
every old list a new point entered), exact by the module's argument too. Stepped side
by side, the marking of changed pairs redoes a subset of U(0)'s points and gives the
same delta after every batch: every cluster U(0) redoes needlessly must come back with
its stable id, size, score and levels. The strategies put pairs exactly at the floor,
just under and over it, pairs under it inside one component, and points that arrive
again (ties); the components' equality with batch SCC is
tests/unit/cluster/test_mbscc_components.py's.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er._state_io import decode, encode
from er.cluster import MBSCC, _components
from er.cluster._knn_lists import _KnnLists
from er.delta import ClusteringDelta
from tests.unit.cluster.test_mbscc_components import _structure

Batches = list[tuple[np.ndarray, Any, Any]]  # (X rows, neighbors or None, pair_scores)


def _all_u0(
    forest: _components.Forest,
    idx: np.ndarray,
    sim: np.ndarray,
    replaced: tuple[np.ndarray, np.ndarray, np.ndarray],
    floor: float,
) -> np.ndarray:
    """The marking before #56: U(0)'s old points (the lists' rewritten rows and the new
    points' neighbours), whatever changed in their pairs."""
    n0 = forest.n_points
    listed = idx[n0:][idx[n0:] >= 0]
    u0 = np.union1d(replaced[0], listed)
    return u0[u0 < n0]


def _rows(d: ClusteringDelta) -> tuple[list[Any], ...]:
    """A delta's nodes, retired ids and edges, each in a canonical order."""
    order = np.argsort(d.node_id, kind="stable")
    nodes = np.stack(
        [d.node_id[order], d.is_leaf[order], d.size[order], d.level_lo[order], d.level_hi[order]],
        axis=1,
    )
    score = np.nan_to_num(np.asarray(d.score, np.float64)[order], nan=-1.0)
    added, retired = (
        np.unique(np.asarray(e).reshape(-1, 2), axis=0) for e in (d.edges_added, d.edges_retired)
    )
    return (
        nodes.tolist(),
        score.tolist(),
        np.sort(d.retired).tolist(),
        added.tolist(),
        retired.tolist(),
    )


def _side_by_side(params: dict[str, Any], batches: Batches) -> None:
    """The product's marking and U(0)'s, batch by batch: a subset of the points, the
    same delta, point ids and hierarchy."""
    new, old = MBSCC(**params), MBSCC(**params)
    changed_points = _components.changed_points
    for X, neighbors, scores in batches:
        new.partial_fit(X, neighbors=neighbors, pair_scores=scores)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_components, "changed_points", _all_u0)
            old.partial_fit(X, neighbors=neighbors, pair_scores=scores)
        assert set(new.touched_.points.tolist()) <= set(old.touched_.points.tolist())
        assert _rows(new.delta_) == _rows(old.delta_)
        np.testing.assert_array_equal(new.point_ids_, old.point_ids_)
        np.testing.assert_array_equal(new.node_ids_, old.node_ids_)
        np.testing.assert_array_equal(new.hierarchy_.edges, old.hierarchy_.edges)
        np.testing.assert_array_equal(new.hierarchy_.score, old.hierarchy_.score)
    assert changed_points is _components.changed_points


def _cuts(draw: st.DrawFn, n: int) -> list[int]:
    """Batch sizes of 1 to 12 covering n points."""
    cuts, at = [], 0
    while at < n:
        cuts.append(min(draw(st.integers(1, 12)), n - at))
        at += cuts[-1]
    return cuts


@st.composite
def scored_streams(draw: st.DrawFn) -> tuple[np.ndarray, float, list[int]]:
    """A symmetric similarity matrix on a grid of 0.05 (ties common): pairs in one group
    at the floor or above, or under it by up to 0.25 (pairs under the floor inside one
    component), pairs of two groups under the floor, or at it (bridges); some points
    repeat an earlier one (similarity 1 to it, its pairs elsewhere)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 45))
    floor = draw(st.sampled_from([0.3, 0.5, 0.7]))
    group = rng.integers(0, draw(st.integers(1, 8)), n)
    grid = np.round(np.arange(21) * 0.05, 2)
    under, over = grid[grid < floor - 1e-9], grid[grid >= floor - 1e-9]
    near = np.r_[over, floor, under[-5:]]  # the floor twice: a pair exactly at it
    inside = rng.choice(near, size=(n, n))
    bridges = draw(st.sampled_from([0.0, 0.03, 0.2]))
    across = np.where(rng.random((n, n)) < bridges, floor, rng.choice(under, size=(n, n)))
    W = np.triu(np.where(group[:, None] == group[None, :], inside, across), 1)
    W = (W + W.T).astype(np.float32)
    repeats = draw(st.sampled_from([0.0, 0.15]))
    for j in range(1, n):
        if rng.random() < repeats:  # j arrives again as an earlier i
            i = int(rng.integers(0, j))
            W[j, :], W[:, j] = W[i, :], W[:, i]
            W[i, j] = W[j, i] = 1.0
            W[j, j] = 0.0
    return W, floor, _cuts(draw, n)


def _given(W: np.ndarray, n0: int, n1: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows n0..n1-1's neighbours among points 0..n1-1: every other one, in a shuffled
    order (the lists keep their best k)."""
    b = n1 - n0
    idx = np.full((b, max(n1 - 1, 1)), -1, np.int64)
    sim = np.zeros(idx.shape, np.float32)
    rng = np.random.default_rng(n1)
    for r in range(b):
        others = rng.permutation(np.setdiff1d(np.arange(n1), [n0 + r]))
        idx[r, : others.size] = others
        sim[r, : others.size] = W[n0 + r, others]
    return idx, sim


def _params(draw: st.DrawFn, floor: float) -> dict[str, Any]:
    linkage = draw(st.sampled_from(["average", "single", "mean"]))
    params: dict[str, Any] = {
        "k": draw(st.integers(1, 5)),
        "linkage": linkage,
        "tau_min": floor,
        "n_levels": draw(st.sampled_from([1, 3, 12])),
        "schedule": draw(st.sampled_from(["geometric", "linear"])),
        "marking": "components",
    }
    if linkage != "mean" and draw(st.booleans()):
        params["exact_levels"] = True
    return params


@settings(max_examples=150, deadline=None)
@given(data=scored_streams(), choice=st.data())
def test_changed_pairs_redo_a_subset_with_the_same_deltas(
    data: tuple[np.ndarray, float, list[int]], choice: st.DataObject
) -> None:
    """Lists given by the caller (the pipeline's way), pairs at the floor exactly."""
    W, floor, cuts = data
    params = _params(choice.draw, floor)
    scores = None
    if choice.draw(st.booleans()):  # every pair of small components scored (by W)
        params["complete_max"] = choice.draw(st.sampled_from([2, 4, 1000]))

        def scores(left: np.ndarray, right: np.ndarray) -> np.ndarray:
            return W[left, right].astype(np.float64)

    batches: Batches = []
    at = 0
    for c in cuts:
        batches.append((np.ones((c, 3), np.float32), _given(W, at, at + c), scores))
        at += c
    _side_by_side(params, batches)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), choice=st.data())
def test_changed_pairs_redo_a_subset_with_the_same_deltas_on_vectors(
    seed: int, choice: st.DataObject
) -> None:
    """Exact lists searched by the core itself, points in tight or loose groups (some
    arriving twice)."""
    rng = np.random.default_rng(seed)
    n = choice.draw(st.integers(2, 60))
    centres = rng.normal(size=(choice.draw(st.integers(1, 6)), 4))
    noise = choice.draw(st.sampled_from([0.05, 0.3, 1.0]))
    X = np.abs(centres[rng.integers(0, centres.shape[0], n)] + noise * rng.normal(size=(n, 4)))
    again = rng.random(n) < 0.1
    X[again] = X[rng.integers(0, n, n)][again]
    params = _params(choice.draw, choice.draw(st.sampled_from([0.3, 0.6, 0.85, 0.95])))
    batches: Batches = []
    at = 0
    for c in _cuts(choice.draw, n):
        batches.append((X[at : at + c].astype(np.float32), None, None))
        at += c
    _side_by_side(params, batches)


def _forest(comp: list[int]) -> _components.Forest:
    forest = _components.Forest(3)
    points = np.arange(len(comp), dtype=np.int64)
    forest.set_components(points, np.asarray(comp, np.int64), len(comp))
    return forest


def test_a_pair_under_the_floor_from_a_new_point_redoes_nothing() -> None:
    """Old points 0-1 (one component, joined at 0.9) and 2-3 (another); floor 0.5. New
    point 4 lists 2 at exactly 0.5 (at the floor: 2's component is redone) and 1 at 0.2
    (under it: nothing); 1's list takes 4 in place of 3 at 0.1, a pair 3 still holds
    in its own list: it did not change."""
    forest = _forest([0, 0, 1, 1])
    idx = np.array([[1, -1], [0, 4], [3, -1], [2, 1], [2, 1]])
    sim = np.array([[0.9, -np.inf], [0.9, 0.2], [0.8, -np.inf], [0.8, 0.1], [0.5, 0.2]])
    sim = sim.astype(np.float32)
    replaced = (np.array([1]), np.array([[0, 3]]), np.array([[0.9, 0.1]], np.float32))
    got = _components.changed_points(forest, idx, sim, replaced, 0.5)
    assert got.tolist() == [2]
    # 3 not holding the pair: it fell from 0.1 to none, under the floor across two
    # components, and still redoes nothing
    idx[3, 1], sim[3, 1] = -1, -np.inf
    assert _components.changed_points(forest, idx, sim, replaced, 0.5).tolist() == [2]


def test_a_changed_pair_under_the_floor_inside_one_component_redoes_it() -> None:
    """Old 0-1-2 one component (0-1 and 1-2 at 0.9); 0's list drops 2 (at 0.1, under
    the floor, 2 not listing 0) for the new point 3 at 0.2: the mean linkage inside
    the component read the pair 0-2, so its component is redone; 3's own pair (under
    the floor, to 0) adds nothing more."""
    forest = _forest([0, 0, 0])
    idx = np.array([[1, 3], [0, 2], [1, -1], [0, -1]])
    sim = np.array([[0.9, 0.2], [0.9, 0.9], [0.9, -np.inf], [0.2, -np.inf]], np.float32)
    replaced = (np.array([0]), np.array([[1, 2]]), np.array([[0.9, 0.1]], np.float32))
    got = _components.changed_points(forest, idx, sim, replaced, 0.5)
    assert got.tolist() == [0, 2]
    # the same change across two components (0 alone, 1-2) is under the floor: nothing
    assert _components.changed_points(_forest([0, 1, 1]), idx, sim, replaced, 0.5).size == 0


def test_replaced_holds_each_rewritten_list_as_before_the_add() -> None:
    """Over several blocks (a row rewritten twice keeps its list from before the add):
    the rows are exactly those whose lists differ or took a tie, the rest unchanged."""
    rng = np.random.default_rng(1)
    X = np.abs(rng.normal(size=(80, 4))).astype(np.float32)
    lists = _KnnLists(3, 4)
    lists.add(X[:40])
    idx0, sim0 = lists.idx.copy(), lists.sim.copy()
    lists.add(X[40:], block=7)
    rows, idx_before, sim_before = lists.replaced_
    assert rows.size and np.all(np.diff(rows) > 0) and rows.max() < 40
    np.testing.assert_array_equal(idx_before, idx0[rows])
    np.testing.assert_array_equal(sim_before, sim0[rows])
    differ = np.flatnonzero((lists.idx[:40] != idx0).any(axis=1))
    assert set(differ.tolist()) <= set(rows.tolist())
    assert (lists.idx[rows] >= 40).any(axis=1).all()  # each took a new point


def test_replaced_is_not_saved_and_old_states_load() -> None:
    """``replaced_`` describes one add: neither pickles nor checkpoints carry it, and a
    state saved before it (with the rows of the last add, ``_touched``) loads."""
    X = np.abs(np.random.default_rng(2).normal(size=(30, 4))).astype(np.float32)
    lists = _KnnLists(3, 4)
    lists.add(X[:20])
    lists.add(X[20:])
    assert lists.replaced_[0].size
    tree, arrays = encode(lists)
    assert "replaced_" not in tree["attrs"] and "_replaced" not in tree["attrs"]
    back = decode(tree, arrays.__getitem__)
    assert back.replaced_[0].size == 0
    np.testing.assert_array_equal(back.idx, lists.idx)
    state = lists.__getstate__()
    state["_touched"] = [np.array([1, 2])]  # as saved before replaced_
    older = _KnnLists.__new__(_KnnLists)
    older.__setstate__(state)
    assert not hasattr(older, "_touched")
    again = pickle.loads(pickle.dumps(older))
    for each in (lists, again):
        each.add(X[:5] + 0.01)
    np.testing.assert_array_equal(again.idx, lists.idx)
    np.testing.assert_array_equal(again.replaced_[0], lists.replaced_[0])


def test_a_pair_under_the_floor_dropped_inside_a_component_redoes_it_end_to_end() -> None:
    """Mean linkage, floor 0.3, lists of 2: r=0, y=1, x=2, z=3 one floor component
    (r-y and x-y 0.8, x-z 0.9, y-z 0.7), r listing x at 0.25, x not listing r. {r, y}
    and {x, z} link at (0.25 + 0.8 + 0.7) / 4 = 0.4375. The new point 4 enters r's list
    at 0.28, under the floor, and drops x: the pair r-x is gone and the link falls to
    0.375, a level lower. Only the pair inside the component says so."""
    W = np.zeros((5, 5), np.float32)
    for a, b, w in [(0, 1, 0.8), (1, 2, 0.8), (2, 3, 0.9), (1, 3, 0.7), (0, 2, 0.25), (0, 4, 0.28)]:
        W[a, b] = W[b, a] = w
    first = (
        np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]),
        W[:4, :4][~np.eye(4, dtype=bool)].reshape(4, 3),
    )
    params: dict[str, Any] = {"k": 2, "linkage": "mean", "tau_min": 0.3, "n_levels": 15}
    stepped, whole = MBSCC(**params, marking="components"), MBSCC(**params, marking="exact")
    second = (np.array([[0, -1]]), np.array([[0.28, 0.0]], np.float32))
    for m in (stepped, whole):
        m.partial_fit(np.ones((4, 2), np.float32), neighbors=first)
        m.partial_fit(np.ones((1, 2), np.float32), neighbors=second)
    assert stepped._knn.idx[0].tolist() == [1, 4] and 0 not in stepped._knn.idx[2]
    assert stepped.touched_.points.tolist() == [0, 1, 2, 3, 4]
    assert _structure(stepped.hierarchy_) == _structure(whole.hierarchy_)
