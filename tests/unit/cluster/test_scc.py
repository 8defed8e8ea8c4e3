"""SCC, Affinity and RecipNN against scipy oracles, and structure properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import linkage as scipy_linkage
from scipy.sparse import csgraph, csr_array

from er.cluster import SCC, Affinity, Hierarchy, RecipNN, knn_graph, normalize_rows
from er.evaluation import dendrogram_purity
from er.exceptions import ConfigError

from .._trees import check_structure, leaves_under


def blobs(n_clusters: int, per: int, dim: int, spread: float, seed: int):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_clusters, dim)) * 10
    y = np.repeat(np.arange(n_clusters), per)
    X = centers[y] + rng.normal(scale=spread, size=(y.size, dim))
    order = rng.permutation(y.size)
    return X[order].astype(np.float32), y[order]


def test_affinity_round_one_is_the_1nn_components_and_last_the_graph_components() -> None:
    X, _ = blobs(6, 15, 5, 1.0, seed=3)
    G = knn_graph(X, 4)
    h = Affinity(k=4).fit(graph=G).hierarchy_
    nn = np.asarray(G.argmax(axis=1)).ravel()  # ties: lowest column, as ours
    one_nn = csr_array((np.ones(len(nn)), (np.arange(len(nn)), nn)), shape=G.shape)
    _, expected = csgraph.connected_components(one_nn, directed=True, connection="weak")
    assert _same_partition(h.cut(1), expected)
    _, final = csgraph.connected_components(G, directed=False)
    assert _same_partition(h.cut(int(h.level_lo.max()) - (len(np.unique(final)) > 1)), final)


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(np.unique(a)) == len(np.unique(b))


@pytest.mark.parametrize("method", ["average", "single"])
def test_recipnn_on_a_complete_graph_equals_scipy_hac(method: str) -> None:
    rng = np.random.default_rng(7)
    X = normalize_rows(rng.normal(size=(40, 6)))
    S = X @ X.T
    n = len(X)
    r, c = np.nonzero(~np.eye(n, dtype=bool))
    h = RecipNN(linkage=method).fit(graph=(r, c, S[r, c])).hierarchy_
    Z = scipy_linkage(X, method=method, metric="cosine")
    ours = {frozenset(s) for s in leaves_under(h)}
    members = [{i} for i in range(n)]
    for a, b, _, _ in Z:
        members.append(members[int(a)] | members[int(b)])
    assert ours == {frozenset(s) for s in members}


@pytest.mark.parametrize("linkage", ["average", "single", "centroid"])
def test_scc_recovers_well_separated_clusters(linkage: str) -> None:
    X, y = blobs(12, 10, 8, 0.5, seed=11)
    h = SCC(n_levels=40, k=8, linkage=linkage).fit(X).hierarchy_
    assert dendrogram_purity(h, y) == 1.0
    check_structure(h)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 60),
    k=st.integers(1, 6),
    levels=st.integers(1, 20),
    schedule=st.sampled_from(["geometric", "linear", "share"]),
    linkage=st.sampled_from(["average", "single", "centroid", "centroid-average"]),
    seed=st.integers(0, 1000),
)
def test_scc_structure_invariants(n, k, levels, schedule, linkage, seed) -> None:
    X = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    est = SCC(n_levels=levels, k=k, schedule=schedule, linkage=linkage)
    h = est.fit(X).hierarchy_
    check_structure(h)
    again = SCC(n_levels=levels, k=k, schedule=schedule, linkage=linkage).fit(X).hierarchy_
    np.testing.assert_array_equal(h.edges, again.edges)  # deterministic, ids included
    # the delta writes this structure: every node once, sizes = leaves counted by hand
    d = est.delta_
    assert sorted(d.node_id.tolist()) == list(range(h.n_nodes))
    kids: dict[int, list[int]] = {}
    for c, p in d.edges_added.tolist():
        kids.setdefault(p, []).append(c)

    def leaves(v: int) -> int:
        return 1 if v < n else sum(leaves(c) for c in kids.get(v, []))

    assert d.size.tolist() == [leaves(v) for v in d.node_id.tolist()]
    assert d.is_leaf.tolist() == [v < n for v in d.node_id.tolist()]


def test_parameters_are_validated_with_a_clear_message() -> None:
    with pytest.raises(
        ConfigError,
        match=r"'n_levels' parameter of SCC must be an int in the range \[1, inf\]\. Got -3",
    ):
        SCC(n_levels=-3).fit(np.eye(3, dtype=np.float32))
    with pytest.raises(ConfigError, match="'linkage' parameter of Affinity must be one of"):
        Affinity(linkage="ward").fit(np.eye(3, dtype=np.float32))


def test_json_round_trip() -> None:
    X, _ = blobs(3, 5, 3, 0.5, seed=1)
    h = SCC(n_levels=10, k=3).fit(X).hierarchy_
    back = Hierarchy.from_json(h.to_json())
    np.testing.assert_array_equal(back.edges, h.edges)
    np.testing.assert_array_equal(back.level_hi[h.n_points :], h.level_hi[h.n_points :])


@pytest.mark.parametrize("seed", [0, 1])
def test_scc_defaults_reach_average_linkage_hac_on_the_hard_mixture(seed: int) -> None:
    # Issue #13: SCC's defaults must reach HAC's dendrogram purity on hard data (many
    # small overlapping clusters). Oracle: scipy's exact average-linkage HAC, cosine.
    from er.cluster._synthetic import hard_mixture

    X, y = hard_mixture(2000, seed=seed)
    hac = dendrogram_purity(Hierarchy.from_linkage(scipy_linkage(X, "average", "cosine")), y)
    assert hac < 0.99  # hard enough for the methods to differ
    assert dendrogram_purity(SCC().fit(X).hierarchy_, y) >= hac


@pytest.mark.parametrize("name", ["iris", "wine", "digits"])
def test_scc_defaults_reach_average_linkage_hac_on_the_standard_sets(name: str) -> None:
    # Issue #30: one set of defaults must hold on the standard sets and the hard
    # mixture at once; digits at 0.85 or more. Oracle: scipy's exact average-linkage
    # HAC, cosine, on the same centred features (as bench/bench_cluster.py loads them).
    from sklearn import datasets

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X = (X - X.mean(axis=0)).astype(np.float32)
    hac = dendrogram_purity(Hierarchy.from_linkage(scipy_linkage(X, "average", "cosine")), y)
    ours = dendrogram_purity(SCC().fit(X).hierarchy_, y)
    assert ours >= hac
    if name == "digits":
        assert ours >= 0.85


def test_share_schedule_thresholds_are_the_links_the_best_share_reach() -> None:
    # Each round's threshold is a linkage some cluster's best link has, at the rank of
    # the (1 - share) quantile: recomputed here from the first round's 1-NN links.
    X, _ = blobs(8, 12, 6, 1.0, seed=5)
    G = knn_graph(normalize_rows(X), 5)
    est = SCC(k=5, linkage="average", share=0.25).fit(X, graph=G)
    first = np.asarray(G.max(axis=1).toarray()).ravel()  # 1-NN linkage of each point
    links = np.sort(first)
    assert est.thresholds_[0] == links[int(np.floor(0.75 * (links.size - 1)))]
    # a round merges at least the clusters whose links reach the threshold, so the
    # rounds are few: the clusters shrink by share / 2 a round or more
    assert len(est.thresholds_) <= np.ceil(np.log(X.shape[0]) / -np.log(1 - 0.25 / 2)) + 1
    # rounds go on until the graph's components are reached
    n_comp = csgraph.connected_components(G, directed=False)[0]
    top = est.hierarchy_.cut(int(est.hierarchy_.level_lo.max()) - (n_comp > 1))
    assert len(np.unique(top)) == n_comp


@pytest.mark.parametrize("seed", [9, 10])
def test_centroid_average_switches_once_clusters_hold_2k_points(seed: int) -> None:
    # A round's merge is scored by its weakest kept link, the linkage of two of its
    # children. Brute force from the definitions: before the clusters are down to
    # n / (2k), some pair of children has that centroid cosine (members' unit
    # vectors summed); after, that sparse average linkage (graph edge sums between
    # the two leaf sets over |A||B|).
    X, _ = blobs(10, 20, 6, 2.0, seed=seed)
    k, n = 4, X.shape[0]
    U = normalize_rows(X)
    G = knn_graph(U, k).toarray()
    h = SCC(k=k).fit(X, graph=G).hierarchy_
    members = [sorted(m) for m in leaves_under(h)]
    kids: dict[int, list[int]] = {}
    for c, p in h.edges.tolist():
        kids.setdefault(p, []).append(c)
    joined = csgraph.connected_components(G, directed=False)[0] > 1  # finish() adds a root
    alive, seen = n, {"centroid": 0, "average": 0}
    for level in range(1, int(h.level_lo.max()) + 1):
        formed = [v for v in range(n, h.n_nodes) if h.level_lo[v] == level]
        linkage = "centroid" if alive > n / (2 * k) else "average"
        for v in formed:
            if joined and v == h.n_nodes - 1:
                continue
            values = []
            for i, a in enumerate(kids[v]):
                for b in kids[v][i + 1 :]:
                    A, B = members[a], members[b]
                    if linkage == "centroid":
                        sa, sb = U[A].sum(axis=0), U[B].sum(axis=0)
                        values.append(sa @ sb / (np.linalg.norm(sa) * np.linalg.norm(sb)))
                    else:
                        values.append(G[np.ix_(A, B)].sum() / (len(A) * len(B)))
            assert np.isclose(values, h.score[v], atol=1e-6).any(), (level, linkage)
            seen[linkage] += 1
        alive -= sum(len(kids[v]) - 1 for v in formed)
    assert seen["centroid"] and seen["average"]  # both phases ran


def test_centroid_average_needs_vectors() -> None:
    X, _ = blobs(3, 5, 3, 0.5, seed=1)
    with pytest.raises(ConfigError, match="linkage='average'"):
        SCC().fit(graph=knn_graph(X, 3))
