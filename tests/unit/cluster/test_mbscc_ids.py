"""MBSCC's stable cluster ids across mini-batches: continuation instead of re-keying.

Oracle: the hierarchies themselves, read as point sets batch after batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC
from er.cluster._snapshot import _KEY_BASE_MAX


def _sets(m: MBSCC) -> dict[int, frozenset[int]]:
    """Stable id -> the points (global arrival index) under that node."""
    M = m.hierarchy_.leaf_membership()
    return {
        int(m.node_ids_[v]): frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist())
        for v in range(m.hierarchy_.n_nodes)
    }


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_blobs=st.integers(1, 6),
    batches=st.lists(st.integers(1, 12), min_size=2, max_size=7),
    noise=st.floats(0.05, 1.0),
    components=st.booleans(),
)
def test_ids_are_unique_never_reused_and_kept_by_unchanged_clusters(
    seed: int, n_blobs: int, batches: list[int], noise: float, components: bool
) -> None:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_blobs, 5))
    m = (
        MBSCC(k=4, tau_min=0.2, linkage="average", marking="components")
        if components
        else MBSCC(k=4)
    )
    retired: set[int] = set()
    before: dict[int, frozenset[int]] = {}
    for size in batches:
        X = centres[rng.integers(0, n_blobs, size)] + noise * rng.normal(size=(size, 5))
        m.partial_fit(X.astype(np.float32))
        ids = m.node_ids_.tolist()
        assert len(set(ids)) == len(ids)  # one id per node
        now = _sets(m)
        assert not retired & now.keys()  # a retired id never comes back
        assert set(m.delta_.retired.tolist()) == before.keys() - now.keys()
        retired |= set(m.delta_.retired.tolist())
        by_set = {s: i for i, s in before.items()}
        for i, s in now.items():
            if s in by_set:  # the same point set as a node of the last batch: same id
                assert by_set[s] == i
        # a continued id keeps more than half of its old points
        for i in before.keys() & now.keys():
            assert 2 * len(before[i] & now[i]) > len(before[i])
        before = now


def test_a_cluster_that_gains_a_point_keeps_its_id() -> None:
    # three tight pairs far apart; a third point joins the first pair
    base = np.array(
        [[1, 0, 0], [0.99, 0.1, 0], [0, 1, 0], [0.1, 0.99, 0], [0, 0, 1], [0, 0.1, 0.99]]
    )
    m = MBSCC(k=3).partial_fit(base.astype(np.float32))
    first = {s: i for i, s in _sets(m).items()}
    pair = first[frozenset({0, 1})]
    m.partial_fit(np.array([[0.98, 0.05, 0.05]], np.float32))
    now = _sets(m)
    assert now[pair] == frozenset({0, 1, 6})  # same id, one more point
    assert pair not in m.delta_.retired.tolist()
    assert [tuple(e) for e in m.delta_.edges_retired.tolist()] == []  # nothing re-parented


def _expected_ids(
    h: Any,
    point_ids: list[int],
    before: dict[int, frozenset[int]],
    old_parent: dict[int, int],
    next_id: int,
) -> list[int]:
    """The id rule, read plainly with Python sets, one cluster at a time (the oracle).

    Children before parents (by first level, then node); a cluster with an old point
    set takes its id; otherwise the old parent of one of its children that shares the
    most points with it (more than half of that old cluster's, ties to the lower id,
    each old id once); otherwise the next new id.
    """
    M = h.leaf_membership()
    sets = [frozenset(M.indices[M.indptr[v] : M.indptr[v + 1]].tolist()) for v in range(h.n_nodes)]
    ids = point_ids + [-1] * (h.n_nodes - h.n_points)
    by_set = {s: i for i, s in before.items()}
    used = set()
    for v in range(h.n_points, h.n_nodes):
        if sets[v] in by_set:
            ids[v] = by_set[sets[v]]
            used.add(ids[v])
    kids: dict[int, list[int]] = {}
    for c, p in np.asarray(h.edges).tolist():
        kids.setdefault(p, []).append(c)
    todo = [v for v in range(h.n_points, h.n_nodes) if ids[v] < 0]
    for v in sorted(todo, key=lambda v: (int(h.level_lo[v]), v)):
        cands = {old_parent[ids[c]] for c in kids.get(v, []) if ids[c] in old_parent} - used
        best, best_overlap = None, 0
        for q in sorted(cands):
            overlap = len(before[q] & sets[v])
            if 2 * overlap > len(before[q]) and overlap > best_overlap:
                best, best_overlap = q, overlap
        if best is None:
            best, next_id = next_id, next_id + 1
        ids[v] = best
        used.add(best)
    return ids


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_blobs=st.integers(1, 6),
    batches=st.lists(st.integers(1, 15), min_size=2, max_size=8),
    noise=st.floats(0.05, 1.2),
    n_levels=st.integers(2, 40),
    jump=st.sampled_from([0, 2**40, _KEY_BASE_MAX - 20]),
)
def test_ids_follow_the_rule_read_with_python_sets(
    seed: int, n_blobs: int, batches: list[int], noise: float, n_levels: int, jump: int
) -> None:
    """``jump``: after the first batch new ids continue from there, as after a long
    life (ids are never reused), on both sides of the edge-key limit."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_blobs, 5))
    m = MBSCC(k=4, n_levels=n_levels)
    before: dict[int, frozenset[int]] = {}
    old_parent: dict[int, int] = {}
    top = -1
    for b, size in enumerate(batches):
        X = centres[rng.integers(0, n_blobs, size)] + noise * rng.normal(size=(size, 5))
        if b == 1:
            m._next_id = max(m._next_id, jump)
        m.partial_fit(X.astype(np.float32))
        h, got = m.hierarchy_, m.node_ids_.tolist()
        points = got[: h.n_points]
        top = max(top, *points)
        want = _expected_ids(h, points, before, old_parent, top + 1)
        assert got == want
        top = max(top, *got)
        before = _sets(m)
        old_parent = {got[c]: got[p] for c, p in np.asarray(h.edges).tolist()}


def test_continuing_ids_past_a_trillion_takes_memory_for_live_clusters_only() -> None:
    """Which old ids a batch has continued is kept per live cluster: a collection whose
    ids have grown to 2^40 over its life needs no array indexed by id (1 TiB)."""
    import tracemalloc

    rng = np.random.default_rng(5)
    X = rng.normal(size=(5, 8))[rng.integers(0, 5, 450)] + 0.4 * rng.normal(size=(450, 8))
    m = MBSCC(k=5).partial_fit(X[:200].astype(np.float32))
    m._next_id = 2**40
    m.partial_fit(X[200:400].astype(np.float32))  # its clusters take ids past 2^40
    tracemalloc.start()
    try:
        m.partial_fit(X[400:].astype(np.float32))  # continues them
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert np.count_nonzero(m.node_ids_ >= 2**40) >= 250  # two batches' points at least
    assert len(set(m.node_ids_.tolist())) == m.node_ids_.size


def test_a_checkpoint_from_before_member_lists_continues_the_same_ids() -> None:
    import copy

    rng = np.random.default_rng(3)
    X = (rng.normal(size=(4, 5))[rng.integers(0, 4, 60)] + 0.3 * rng.normal(size=(60, 5))).astype(
        np.float32
    )
    m = MBSCC(k=4).partial_fit(X[:30])
    old = copy.deepcopy(m)  # the state as the former release pickled it
    prev = old.__dict__.pop("_prev")
    old._ids = {
        prev.indices[prev.indptr[r] : prev.indptr[r + 1]].tobytes(): int(i)
        for r, i in enumerate(prev.ids.tolist())
    }
    old._key_format = "int64-live"
    m.partial_fit(X[30:])
    old.partial_fit(X[30:])
    assert np.array_equal(m.node_ids_, old.node_ids_)
    assert np.array_equal(m.delta_.retired, old.delta_.retired)


@settings(max_examples=200, deadline=None)
@given(
    sets=st.lists(
        st.frozensets(st.integers(0, 12), min_size=1, max_size=5), min_size=1, max_size=30
    ),
    split=st.integers(0, 30),
    heads=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_same_sets_pairs_equal_sets_even_when_first_hashes_collide(
    sets: list[frozenset[int]], split: int, heads: int, seed: int
) -> None:
    """_Members.same_sets sorts on the first hash and sorts on every column only when
    two different sets share it. Here the first hashes are forced into a few values,
    so they collide all the time; the pairs must still be exactly the equal sets."""
    from er.cluster._mbscc import _Members

    mine = list(dict.fromkeys(sets[: split % (len(sets) + 1)]))  # distinct per side
    theirs = list(dict.fromkeys(sets[split % (len(sets) + 1) :]))
    rng = np.random.default_rng(seed)

    def members(group: list[frozenset[int]]) -> _Members:
        m = _Members.from_sets({i: np.array(sorted(s), np.int64) for i, s in enumerate(group)})
        m.hashes[:, 0] = rng.integers(0, heads, len(group)).astype(np.uint64)
        return m

    a, b = members(mine), members(theirs)
    # equal sets must share every hash column: copy the forced one across
    for i, s in enumerate(mine):
        for j, t in enumerate(theirs):
            if s == t:
                b.hashes[j, 0] = a.hashes[i, 0]
    got = set(zip(*(x.tolist() for x in a.same_sets(b)), strict=True))
    want = {(i, j) for i, s in enumerate(mine) for j, t in enumerate(theirs) if s == t}
    assert got == want


# ids on both sides of the one-int64-key limit (child * base + parent would wrap past it)
_EDGE_IDS = st.one_of(st.integers(0, 40), st.integers(3_037_000_400, 3_037_000_600))


@settings(max_examples=200, deadline=None)
@given(
    a=st.sets(st.tuples(_EDGE_IDS, _EDGE_IDS), max_size=30),
    b=st.sets(st.tuples(_EDGE_IDS, _EDGE_IDS), max_size=30),
    shared=st.sets(st.tuples(_EDGE_IDS, _EDGE_IDS), max_size=10),
)
def test_edge_difference_is_the_set_difference_below_and_past_the_key_limit(
    a: set[tuple[int, int]], b: set[tuple[int, int]], shared: set[tuple[int, int]]
) -> None:
    """The delta's added and retired edges, read with Python sets, whatever the ids
    (the keyed path would wrap past 3e9 ids and pair unequal edges)."""
    from er.cluster._snapshot import _edge_difference, _edge_keys

    def rows(edges: set[tuple[int, int]]) -> np.ndarray:
        arr = np.array(sorted(edges), np.int64).reshape(-1, 2)
        base = int(arr.max(initial=0)) + 1
        return arr[np.argsort(_edge_keys(arr, base), kind="stable")]  # as snapshots sort

    A, B = rows(a | shared), rows(b | shared)
    assert [tuple(r) for r in A.tolist()] == sorted(a | shared)  # the key orders as the rows
    got = _edge_difference(A, B)
    assert [tuple(r) for r in got.tolist()] == sorted((a | shared) - (b | shared))
