"""GRINCH, LLAMA and MBSCC: the papers' guarantees, oracles and structure invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import linkage as scipy_linkage

from er.cluster import MBSCC, SCC, Grinch, Hierarchy, Llama
from er.cluster._synthetic import grinch_synthetic
from er.evaluation import dendrogram_purity, jaccard_metrics

from .._trees import leaves_under
from .test_scc import check_structure


def separated(n_clusters: int, per: int, seed: int, dim: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Clique-separated data (Example 4): each cluster in its own block of coordinates.

    Within a cluster every cosine is >= 0.8; across clusters it is 0, so average,
    single and centroid linkage all separate the clusters (Assumption 1).
    """
    rng = np.random.default_rng(seed)
    block = dim // n_clusters
    y = np.repeat(np.arange(n_clusters), per)
    X = np.zeros((y.size, n_clusters * block), np.float32)
    for i, c in enumerate(y):
        X[i, c * block : (c + 1) * block] = 1.0 + 0.2 * rng.random(block)
    order = rng.permutation(y.size)
    return X[order], y[order]


def check_dag(h: Hierarchy) -> None:
    """A DAG child is a strict subset of each of its parents; one root holds all."""
    h.topological_levels()
    sets = leaves_under(h)
    for c, p in h.edges.tolist():
        assert sets[c] < sets[p]
    roots = h.roots()
    assert len(roots) == 1 and sets[roots[0]] == set(range(h.n_points))


orders = st.integers(0, 10_000)


# -- must show 1: theorem tests on separated data, any order and batch size ------------
@settings(max_examples=25, deadline=None)
@given(
    seed=orders,
    mode=st.sampled_from(["grinch", "rotate"]),
    batch=st.integers(1, 20),
    graft_from=st.sampled_from(["leaf", "ancestors"]),
    size_cap=st.sampled_from([None, 100]),  # 100: the default, never binding at 24 points
)
def test_grinch_and_rotate_reach_purity_one_on_separated_data(
    seed: int, mode: str, batch: int, graft_from: str, size_cap: int | None
) -> None:
    X, y = separated(4, 6, seed)
    g = Grinch(mode=mode, graft_from=graft_from, size_cap=size_cap)
    for s in range(0, len(X), batch):
        g.partial_fit(X[s : s + batch])
        seen = s + min(batch, len(X) - s)
        # Theorems 1 and 7: purity 1.0 after every insertion step
        assert dendrogram_purity(g.hierarchy_, y[:seen]) == 1.0
    check_structure(g.hierarchy_)


@settings(max_examples=25, deadline=None)
@given(seed=orders, batch=st.integers(1, 24))
def test_mbscc_and_scc_reach_purity_one_on_separated_data(seed: int, batch: int) -> None:
    X, y = separated(4, 6, seed)
    m = MBSCC(k=5)
    for s in range(0, len(X), batch):
        m.partial_fit(X[s : s + batch])
    assert dendrogram_purity(m.hierarchy_, y) == 1.0
    assert dendrogram_purity(SCC(k=5).fit(X).hierarchy_, y) == 1.0


@settings(max_examples=25, deadline=None)
@given(seed=orders)
def test_llama_contains_every_gold_cluster_on_separated_data(seed: int) -> None:
    X, y = separated(4, 6, seed)
    # Theorem 8 is about LLAMA without the parent cap (p >= n), on the complete graph.
    h = Llama(p=len(X), k=len(X) - 1).fit(X).hierarchy_
    assert jaccard_metrics(h, y)["jacc_lbl"] == 1.0  # Theorem 8
    check_dag(h)


# -- must show 2: the GRINCH synthetic data of §3.5.1 --------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"graft_from": "ancestors", "size_cap": None},
        {
            "graft_from": "ancestors",
            "size_cap": None,
            "rotate_cap": 100,
            "graft_cap": 100,
            "restruct_cap": 100,
            "single_elimination": True,
            "graft_candidates": 50,
        },
    ],
    ids=["default", "exact", "approximations"],
)
def test_grinch_synthetic_purity(params: dict) -> None:
    X, y = grinch_synthetic()
    assert dendrogram_purity(Grinch(**params).fit(X).hierarchy_, y) >= 0.99


# -- must show 3: noisy model-based separation (Prop. 3-4) -----------------------------------
def noisy_motifs(copies: int) -> tuple[np.ndarray, np.ndarray]:
    """Prop. 4's three points, repeated in orthogonal planes.

    a, b, c at angles 0, 50, 80 degrees: f(b, c) > f(a, b) > f(a, c); gold {a, b}, {c}.
    b's nearest neighbour c lies outside its cluster, but a's nearest neighbour is b.
    """
    ang = np.deg2rad([0.0, 50.0, 80.0])
    X = np.zeros((3 * copies, 2 * copies), np.float32)
    y = np.zeros(3 * copies, np.int64)
    for i in range(copies):
        X[3 * i : 3 * i + 3, 2 * i] = np.cos(ang)
        X[3 * i : 3 * i + 3, 2 * i + 1] = np.sin(ang)
        y[3 * i : 3 * i + 3] = [2 * i, 2 * i, 2 * i + 1]
    return X, y


def test_llama_recovers_noisy_separated_data_and_trees_do_not() -> None:
    X, y = noisy_motifs(4)
    dag = Llama(k=2).fit(X).hierarchy_
    assert jaccard_metrics(dag, y)["jacc_lbl"] == 1.0
    check_dag(dag)
    n = len(X)
    members = [{i} for i in range(n)]
    for a, b, _, _ in scipy_linkage(X, method="average", metric="cosine"):
        members.append(members[int(a)] | members[int(b)])
    gold = [set(np.flatnonzero(y == c).tolist()) for c in np.unique(y)]
    assert not all(g in members for g in gold)  # HAC misses {a, b}
    for order in (np.arange(n), np.arange(n)[::-1]):
        tree = Grinch().fit(X[order]).hierarchy_
        assert dendrogram_purity(tree, y[order]) < 1.0  # GRINCH misses {a, b} too


# -- must show 4: MBSCC exact == SCC for any batch size and order -----------------------------
@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 60),
    batch=st.integers(1, 60),
    k=st.integers(1, 8),
    linkage=st.sampled_from(["average", "single", "centroid"]),
    schedule=st.sampled_from(["geometric", "linear"]),
    seed=orders,
)
def test_mbscc_exact_equals_scc(
    n: int, batch: int, k: int, linkage: str, schedule: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(8, 5))[rng.integers(0, 8, n)] + rng.normal(size=(n, 5)) * 0.3
    X = X.astype(np.float32)
    # every parameter explicit: SCC's and MBSCC's defaults differ (issue #13)
    same = {"k": k, "linkage": linkage, "schedule": schedule, "n_levels": 15}
    m = MBSCC(**same, marking="exact")
    for s in range(0, n, batch):
        m.partial_fit(X[s : s + batch])
    ref = SCC(**same, tau_max=1.0, tau_min=0.0).fit(X).hierarchy_
    np.testing.assert_array_equal(m.hierarchy_.edges, ref.edges)
    np.testing.assert_array_equal(m.hierarchy_.level_lo, ref.level_lo)
    np.testing.assert_array_equal(m.hierarchy_.level_hi, ref.level_hi)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 60), batch=st.integers(1, 60), k=st.integers(1, 8), seed=orders)
def test_mbscc_paper_marking_keeps_a_valid_tree(n: int, batch: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(6, 5))[rng.integers(0, 6, n)] + rng.normal(size=(n, 5)) * 0.3
    same = {"k": k, "n_levels": 15, "linkage": "average", "schedule": "geometric"}
    m = MBSCC(**same)  # marking="paper"
    for s in range(0, n, batch):
        m.partial_fit(X[s : s + batch].astype(np.float32))
    check_structure(m.hierarchy_)
    # one batch marks every point: the paper's marking then equals SCC
    one = MBSCC(**same).fit(X.astype(np.float32)).hierarchy_
    ref = SCC(**same, tau_max=1.0, tau_min=0.0).fit(X.astype(np.float32)).hierarchy_
    np.testing.assert_array_equal(one.edges, ref.edges)


def test_mbscc_paper_marking_reuses_decisions_of_unmarked_clusters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch landing in one of two far-apart groups leaves the other group unmarked."""
    from er.cluster import _mbscc

    X, y = separated(2, 10, seed=2)
    first = X[y == 0][:6].tolist() + X[y == 1].tolist()
    second = X[y == 0][6:]
    stale_counts: list[int] = []
    real = _mbscc._reused

    def spy(old, key, fresh, pc):  # type: ignore[no-untyped-def]
        stale_counts.append(int((~fresh).sum()))
        return real(old, key, fresh, pc)

    monkeypatch.setattr(_mbscc, "_reused", spy)
    m = MBSCC(k=3).partial_fit(np.asarray(first, np.float32))
    assert stale_counts == []  # first batch: everything is new
    m.partial_fit(second)
    assert stale_counts and stale_counts[0] >= 10  # group 1's points kept their decisions
    labels = np.r_[np.zeros(6), np.ones(10), np.zeros(len(second))]
    assert dendrogram_purity(m.hierarchy_, labels) == 1.0


def test_mbscc_deltas_replay_to_the_final_structure() -> None:
    """Applying every partial_fit delta in order rebuilds the final structure (stable ids)."""
    X, _ = separated(3, 8, seed=5)
    m = MBSCC(k=4)
    edges: set[tuple[int, int]] = set()
    alive: set[int] = set()
    for s in range(0, len(X), 5):
        d = m.partial_fit(X[s : s + 5]).delta_
        edges -= {tuple(e) for e in d.edges_retired.tolist()}
        edges |= {tuple(e) for e in d.edges_added.tolist()}
        alive = (alive | set(d.node_id.tolist())) - set(d.retired.tolist())
    ids = m.node_ids_
    assert edges == {(int(ids[c]), int(ids[p])) for c, p in m.hierarchy_.edges}
    assert alive == set(ids.tolist())


def test_grinch_deltas_replay_to_the_final_structure() -> None:
    X, _ = separated(3, 8, seed=6)
    g = Grinch()
    edges: set[tuple[int, int]] = set()
    for s in range(0, len(X), 4):
        d = g.partial_fit(X[s : s + 4]).delta_
        edges -= {tuple(e) for e in d.edges_retired.tolist()}
        edges |= {tuple(e) for e in d.edges_added.tolist()}
    t = g._tree
    live = np.flatnonzero(t.alive[: t.n_nodes] & (t.parent[: t.n_nodes] >= 0))
    assert edges == {(int(v), int(t.parent[v])) for v in live}


# -- must show 6: structure invariants as property tests --------------------------------------
@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 40),
    seed=orders,
    mode=st.sampled_from(["grinch", "rotate", "greedy"]),
    approx=st.booleans(),
)
def test_grinch_structure_invariants(n: int, seed: int, mode: str, approx: bool) -> None:
    X = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    params = (
        {
            "rotate_cap": 3,
            "graft_cap": 3,
            "restruct_cap": 3,
            "single_elimination": True,
            "graft_candidates": 5,
        }
        if approx
        else {}
    )
    g = Grinch(mode=mode, **params).fit(X)
    h = g.hierarchy_
    assert h.n_points == n
    if n > 1:
        check_structure_binary(h)
    t = g._tree
    live = np.flatnonzero(t.alive[: t.n_nodes])
    for v in live:  # aggregates consistent with leaves
        kids = t.kids[v]
        if kids[0] >= 0:
            np.testing.assert_allclose(t.sums[v], t.sums[kids[0]] + t.sums[kids[1]], atol=1e-9)
            assert t.count[v] == t.count[kids[0]] + t.count[kids[1]]


def check_structure_binary(h: Hierarchy) -> None:
    assert h.is_tree and len(h.roots()) == 1
    assert np.all(np.bincount(h.edges[:, 1])[h.n_points :] == 2)  # binary
    sets = leaves_under(h)
    np.testing.assert_array_equal(h.sizes(), [len(s) for s in sets])


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 60),
    seed=orders,
    p=st.integers(1, 5),
    k=st.integers(1, 8),
    rounds=st.one_of(st.none(), st.integers(1, 6)),
)
@example(n=21, seed=22, p=2, k=3, rounds=None)  # a rebuilt set once took a third parent
def test_llama_dag_invariants(n: int, seed: int, p: int, k: int, rounds: int | None) -> None:
    X = np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)
    h = Llama(p=p, k=k, n_rounds=rounds).fit(X).hierarchy_
    check_dag(h)
    assert np.bincount(h.edges[:, 0], minlength=h.n_nodes).max() <= p  # top-p, Eq. 5.3-5.4
