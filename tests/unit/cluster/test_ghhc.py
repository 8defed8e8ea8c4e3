"""gHHC: gradients against finite differences, geometry against Möbius addition, the
decoded tree against a brute-force decoding, structure invariants, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import linkage, to_tree

from er.cluster import GHHC
from er.cluster._ghhc import sample_triplets
from er.cluster._ghhc_tree import decode, leaf_subtree, point_parents
from er.cluster._poincare import (
    TripletBatch,
    cp_dissimilarity,
    parent_loss,
    poincare_distance,
    poincare_norm,
    rsgd_step,
    triplet_loss,
)
from er.evaluation import dendrogram_purity
from er.exceptions import ConfigError

from .._trees import check_structure, leaves_under

RIMS = st.sampled_from([0.3, 0.9, 0.99, 0.999])  # largest norm drawn: up to 1e-3 from the rim


def in_ball(rng: np.random.Generator, n: int, d: int, rim: float) -> np.ndarray:
    """n points of norm uniform in [0.05, rim], directions uniform."""
    V = rng.normal(size=(n, d))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    return V * rng.uniform(0.05, rim, size=(n, 1))


def numeric_grad(f, Z: np.ndarray, scale: float = 1e-5) -> np.ndarray:
    """Fourth-order central differences, step scaled to the distance from the rim.

    (8 (f(z+h) - f(z-h)) - (f(z+2h) - f(z-2h))) / 12h: truncation error O(h^4), so the
    step can be large enough (1e-5 of the distance to the rim) that rounding in f,
    a sum over a whole batch, stays far below the 1e-6 relative tolerance; plain
    central differences at 1e-6 failed on a batch whose gradient was 1e-3 of f.
    """
    G = np.zeros_like(Z)
    for idx in np.ndindex(Z.shape):
        h = scale * (1.0 - np.linalg.norm(Z[idx[0]]))

        def at(step: float, idx: tuple[int, ...] = idx) -> float:
            moved = Z.copy()
            moved[idx] += step
            return float(f(moved))

        G[idx] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)
    return G


def rel_error(analytic: np.ndarray, numeric: np.ndarray) -> float:
    return float(np.abs(analytic - numeric).max() / max(np.abs(numeric).max(), 1e-12))


def assert_rel_close(analytic: np.ndarray, numeric: np.ndarray) -> None:
    assert rel_error(analytic, numeric) < 1e-6


def combine(W: np.ndarray, cz: np.ndarray, cx: np.ndarray, Z: np.ndarray, X: np.ndarray):
    """Gradient of sum W * f(x_a, z_n) from the (cz, cx) coefficient form."""
    return (W * cz).sum(axis=0)[:, None] * Z + (W * cx).T @ X


# -- 1. gradients --------------------------------------------------------------------------
SHAPES = dict(
    a=st.integers(1, 5),
    m=st.integers(1, 6),
    d=st.integers(1, 5),
    rim=RIMS,
    seed=st.integers(0, 2**32 - 1),
)


@settings(max_examples=40, deadline=None)
@given(**SHAPES, gamma=st.sampled_from([0.0, 0.25, 1.0]))
def test_distance_and_dcp_gradients_match_finite_differences(a, m, d, rim, seed, gamma) -> None:
    rng = np.random.default_rng(seed)
    X, Z, W = in_ball(rng, a, d, rim), in_ball(rng, m, d, rim), rng.normal(size=(a, m))
    _, cz, cx = poincare_distance(X, Z, grad=True)
    num = numeric_grad(lambda Z_: (poincare_distance(X, Z_)[0] * W).sum(), Z)
    assert_rel_close(combine(W, cz, cx, Z, X), num)
    # d_cp has a kink where |z|_D - |x|_D + gamma = 0 (Eq. 16's max): a finite
    # difference across it sees both pieces (an excess of 1.9e-5 gave 1.3% off)
    excess = poincare_norm(Z)[0][None, :] - poincare_norm(X)[0][:, None] + gamma
    if np.abs(excess).min() < 1e-3:
        return
    _, cz, cx = cp_dissimilarity(X, Z, gamma, grad=True)
    num = numeric_grad(lambda Z_: (cp_dissimilarity(X, Z_, gamma)[0] * W).sum(), Z)
    assert_rel_close(combine(W, cz, cx, Z, X), num)


@settings(max_examples=40, deadline=None)
@given(**SHAPES, loss=st.sampled_from(["softplus", "sigmoid"]), noise=st.booleans())
def test_triplet_loss_gradient_matches_finite_differences(a, m, d, rim, seed, loss, noise) -> None:
    rng = np.random.default_rng(seed)
    Z = in_ball(rng, max(m, 2), d, rim)
    g = (lambda: rng.gumbel(size=(a, Z.shape[0]))) if noise else (lambda: np.zeros((a, Z.shape[0])))
    batch = TripletBatch(*(in_ball(rng, a, d, rim) for _ in range(3)), g(), g())
    assume(_smooth_here(Z, batch))
    f = lambda Z_: triplet_loss(Z_, batch, 0.5, loss)[0]  # noqa: E731
    assume(_one_piece(f, Z))
    _, analytic = triplet_loss(Z, batch, 0.5, loss)
    num = numeric_grad(f, Z)
    # a piece switch inside the stencil whose slope change is too small for _one_piece
    # (seed 58586: 4.64306 on one side, the stencil 4.64401 across it) shows as two
    # step sizes disagreeing; on one smooth piece they agree far inside the tolerance
    assume(rel_error(num, numeric_grad(f, Z, scale=1e-6)) < 1e-7)
    assert_rel_close(analytic, num)


def _one_piece(f, Z: np.ndarray) -> bool:
    """Whether ``numeric_grad``'s stencil stays on one smooth piece: each coordinate's
    forward and backward differences over its widest step agree. The dissimilarity's
    own piece switches are not all ties of D (seed 1247: a slope change 8e-7 away from
    the point, 45.23 on one side, 54.54 on the other, the analytic gradient right on
    both)."""
    f0 = float(f(Z))
    for idx in np.ndindex(Z.shape):
        h = 2e-5 * (1.0 - np.linalg.norm(Z[idx[0]]))
        up, down = Z.copy(), Z.copy()
        up[idx] += h
        down[idx] -= h
        forward, backward = (float(f(up)) - f0) / h, (f0 - float(f(down))) / h
        if abs(forward - backward) > 1e-2 * max(abs(forward), abs(backward), 1e-9):
            return False
    return True


def _smooth_here(Z: np.ndarray, batch: TripletBatch, gap: float = 1e-3) -> bool:
    """The triplet objective is piecewise smooth: max(D_i, D_j), max(M_ij, D_k) (Eq. 12-13)
    and the argmin that removes the most likely LCA (Eq. 13) switch pieces where their
    arguments tie; away from ties by ``gap`` a finite difference sees one piece (a tie
    within 1e-5 made the argmin flip inside the step: 391 vs 0.43)."""
    Di, Dj, Dk = (cp_dissimilarity(X, Z, 0.5)[0] for X in (batch.Xi, batch.Xj, batch.Xk))
    Mij = np.maximum(Di, Dj)
    two = np.sort(Mij, axis=1)[:, :2]
    return bool(
        (np.abs(Di - Dj) > gap).all()
        and (np.abs(Dk - Mij) > gap).all()
        and (two[:, 1] - two[:, 0] > gap).all()
    )


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 7), d=st.integers(1, 5), rim=RIMS, seed=st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("kind", ["paper", "norms"])
def test_parent_loss_gradient_matches_finite_differences(kind, m, d, rim, seed) -> None:
    rng = np.random.default_rng(seed)
    Z = in_ball(rng, m, d, rim)
    child = np.arange(1, m)
    pairs = np.stack([child, rng.integers(0, child)], axis=1)  # a random tree, node 0 root
    _, analytic = parent_loss(Z, pairs, 0.5, kind)
    assert_rel_close(analytic, numeric_grad(lambda Z_: parent_loss(Z_, pairs, 0.5, kind)[0], Z))


def mobius_distance(x: np.ndarray, y: np.ndarray) -> float:
    """2 artanh |(-x) (+) y| with Möbius addition: an independent form of Eq. 1."""
    u = -x
    uv, u2, v2 = u @ y, u @ u, y @ y
    s = ((1 + 2 * uv + v2) * u + (1 - u2) * y) / (1 + 2 * uv + u2 * v2)
    return 2 * math.atanh(float(np.linalg.norm(s)))


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 6), rim=RIMS, seed=st.integers(0, 2**32 - 1))
def test_distance_equals_the_mobius_form(d, rim, seed) -> None:
    rng = np.random.default_rng(seed)
    X, Z = in_ball(rng, 3, d, rim), in_ball(rng, 4, d, rim)
    D = poincare_distance(X, Z)[0]
    oracle = [[mobius_distance(x, z) for z in Z] for x in X]
    np.testing.assert_allclose(D, oracle, rtol=1e-7, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 8), d=st.integers(1, 5), rim=RIMS, seed=st.integers(0, 2**32 - 1))
def test_rsgd_step_stays_in_the_ball_and_descends(m, d, rim, seed) -> None:
    rng = np.random.default_rng(seed)
    Z, X = in_ball(rng, m, d, rim * 0.8), in_ball(rng, 4, d, rim)
    big = rsgd_step(Z, rng.normal(size=Z.shape) * 1e6, 1.0, 0.8)
    assert np.all(np.linalg.norm(big, axis=1) <= 0.8 + 1e-12)
    f = lambda Z_: cp_dissimilarity(X, Z_, 0.0)[0].sum()  # noqa: E731
    _, cz, cx = cp_dissimilarity(X, Z, 0.0, grad=True)
    grad = combine(np.ones((4, m)), cz, cx, Z, X)
    step = rsgd_step(Z, grad, 1e-4, 0.99)
    assert f(step) <= f(Z) + 1e-12


# -- 2. decoding and structure -------------------------------------------------------------
def brute_force_leaf_sets(X: np.ndarray, Z: np.ndarray, gamma: float) -> set[frozenset[int]]:
    """Leaf sets (size >= 2) of the raw decoded tree, from scalar Möbius distances (Eq. 4)."""
    norm = lambda v: 2 * math.atanh(float(np.linalg.norm(v)))  # noqa: E731

    def dcp(c, p):
        return mobius_distance(c, p) * (1 + max(norm(p) - norm(c) + gamma, 0.0))

    m = len(Z)
    rank = sorted(range(m), key=lambda c: (-np.linalg.norm(Z[c]), c))
    position = {c: r for r, c in enumerate(rank)}
    node_parent = {
        c: min((p for p in range(m) if position[p] > position[c]), key=lambda p: dcp(Z[c], Z[p]))
        for c in range(m)
        if position[c] < m - 1
    }
    sets: dict[int, set[int]] = {c: set() for c in range(m)}
    direct: dict[int, set[int]] = {c: set() for c in range(m)}  # §4.2: the points' own child
    for i, x in enumerate(X):
        v = min(range(m), key=lambda p: dcp(x, Z[p]))
        direct[v].add(i)
        while True:
            sets[v].add(i)
            if v not in node_parent:
                break
            v = node_parent[v]
    return {frozenset(s) for s in [*sets.values(), *direct.values()] if len(s) >= 2}


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 25), m=st.integers(1, 10), d=st.integers(1, 4), seed=st.integers(0, 2**32 - 1)
)
def test_decode_equals_the_brute_force_decoding(n, m, d, seed) -> None:
    rng = np.random.default_rng(seed)
    X = in_ball(rng, n, d, 0.9)
    X *= 0.9 / np.linalg.norm(X, axis=1, keepdims=True)
    Z = in_ball(rng, m, d, 0.8)
    h = decode(X, Z, 0.5, {})
    check_structure(h)
    sets = leaves_under(h)
    got = {frozenset(sets[v]) for v in range(n, h.n_nodes)}
    assert got == brute_force_leaf_sets(X, Z, 0.5)
    children = np.bincount(h.edges[:, 1], minlength=h.n_nodes)[n:]
    assert np.all(children >= 2)  # pruned: no empty or single-child clusters


def scipy_leaf_sets(P: np.ndarray, rows: np.ndarray) -> set[frozenset[int]]:
    """Leaf sets (size >= 2) of scipy's average-linkage tree over P, named by ``rows``."""
    found: set[frozenset[int]] = set()

    def walk(node) -> frozenset[int]:
        if node.is_leaf():
            return frozenset([int(rows[node.id])])
        s = walk(node.left) | walk(node.right)
        found.add(s)
        return s

    walk(to_tree(linkage(P, method="average")))
    return found


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 40), m=st.integers(1, 6), d=st.integers(1, 4), seed=st.integers(0, 2**32 - 1)
)
def test_hac_leaf_tree_refines_the_paper_decoding_by_average_linkage(n, m, d, seed) -> None:
    """leaf_tree="hac": the paper's clusters all survive, and below each node the points
    that chose it form exactly scipy's average-linkage tree over them."""
    rng = np.random.default_rng(seed)
    X = in_ball(rng, n, d, 0.9)
    X *= 0.9 / np.linalg.norm(X, axis=1, keepdims=True)
    Z = in_ball(rng, m, d, 0.8)
    h = decode(X, Z, 0.5, {}, leaf_tree="hac")
    check_structure(h)
    sets = leaves_under(h)
    got = {frozenset(sets[v]) for v in range(n, h.n_nodes)}
    star = brute_force_leaf_sets(X, Z, 0.5)
    chosen = point_parents(X, Z, 0.5)
    below = set()
    for c in range(m):
        rows = np.flatnonzero(chosen == c)
        if rows.size >= 2:
            below |= scipy_leaf_sets(X[rows], rows)
    assert got == star | below
    children = np.bincount(h.edges[:, 1], minlength=h.n_nodes)[n:]
    assert np.all(children >= 2)


@settings(max_examples=40, deadline=None)
@given(s=st.integers(2, 60), cap=st.integers(2, 70), d=st.integers(1, 3), seed=st.integers(0, 999))
def test_leaf_subtree_is_a_binary_tree_and_average_linkage_below_the_cap(s, cap, d, seed) -> None:
    # few distinct values: ties and identical rows are common
    P = np.random.default_rng(seed).integers(0, 3, size=(s, d)).astype(float)
    parent = leaf_subtree(P, cap=cap)
    assert parent.size == 2 * s - 1 and parent[-1] == -1
    assert np.all(parent[:-1] > np.arange(2 * s - 2))  # children before parents
    assert np.all(np.bincount(parent[:-1], minlength=2 * s - 1)[s:] == 2)
    if s <= cap:
        under = [{i} for i in range(s)] + [set() for _ in range(s - 1)]
        for v in range(2 * s - 2):
            under[parent[v]] |= under[v]
        got = {frozenset(u) for u in under[s:]}
        assert got == scipy_leaf_sets(P, np.arange(s))


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 30),
    d=st.integers(1, 5),
    m=st.integers(2, 12),
    parent_term=st.sampled_from(["norms", "paper", None]),
    init=st.sampled_from(["random", "kmeans++"]),
    seed=st.integers(0, 1000),
)
def test_fit_gives_a_valid_tree_and_is_deterministic(n, d, m, parent_term, init, seed) -> None:
    X = np.random.default_rng(seed).normal(size=(n, d))
    kw = dict(n_internal=m, n_epochs=2, epoch_size=60, batch_size=20, parent_steps=3)
    kw |= dict(parent_every=1, parent_term=parent_term, init=init, random_state=seed)
    est = GHHC(**kw).fit(X)
    check_structure(est.hierarchy_)
    assert np.all(np.linalg.norm(est.nodes_, axis=1) <= est.max_norm + 1e-12)
    again = GHHC(**kw).fit(X)
    np.testing.assert_array_equal(est.nodes_, again.nodes_)
    np.testing.assert_array_equal(est.hierarchy_.edges, again.hierarchy_.edges)
    d_ = est.delta_
    assert sorted(d_.node_id.tolist()) == list(range(est.hierarchy_.n_nodes))


def test_partial_fit_covers_every_point_and_its_deltas_replay_to_the_tree() -> None:
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(4, 8)) * 4
    est = GHHC(n_internal=12, epoch_size=200, random_state=1)
    nodes: set[int] = set()
    edges: set[tuple[int, int]] = set()
    for batch in range(3):
        y = rng.integers(0, 4, 30)
        est.partial_fit(centres[y] + rng.normal(size=(30, 8)))
        delta = est.delta_
        assert not set(delta.retired.tolist()) & set(delta.node_id.tolist())
        nodes -= set(delta.retired.tolist())
        edges -= {tuple(e) for e in delta.edges_retired.tolist()}
        nodes |= set(delta.node_id.tolist())
        edges |= {tuple(e) for e in delta.edges_added.tolist()}
        h = est.hierarchy_
        check_structure(h)
        assert h.n_points == 30 * (batch + 1)
        ids = np.r_[est.leaf_ids_, sorted(nodes - set(est.leaf_ids_.tolist()))]
        assert len(nodes) == h.n_nodes and np.unique(est.leaf_ids_).size == h.n_points
        assert edges == {tuple(e) for e in ids[h.edges].tolist()}
    with pytest.raises(ConfigError, match="X has 3 columns; this GHHC was fitted on 8"):
        est.partial_fit(np.ones((4, 3)))


# -- sampling, parameters, quality ---------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 40), k=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_triples_lead_with_their_closest_pair_and_hold_a_knn_pair(n, k, seed) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    T = sample_triplets(X, 50, k, 0.0, np.random.default_rng(seed))
    assert np.all((T[:, 0] != T[:, 1]) & (T[:, 1] != T[:, 2]) & (T[:, 0] != T[:, 2]))
    D = np.linalg.norm(X[:, None] - X[None], axis=2)
    np.fill_diagonal(D, np.inf)
    kk = min(k, n - 1)
    kth = np.sort(D, axis=1)[:, kk - 1]  # brute-force k-NN radius of every point
    for i, j, t in T:
        assert D[i, j] <= min(D[j, t], D[i, t])
        assert any(D[a, b] <= kth[a] for a, b in [(i, j), (j, i), (i, t), (t, i), (j, t), (t, j)])


def test_parameters_are_validated_with_a_clear_message() -> None:
    X = np.eye(4)
    with pytest.raises(ConfigError, match=r"'n_internal' parameter of GHHC must be an int"):
        GHHC(n_internal=1).fit(X)
    with pytest.raises(ConfigError, match="'loss' parameter of GHHC must be one of"):
        GHHC(loss="hinge").fit(X)
    with pytest.raises(ConfigError, match="'leaf_tree' parameter of GHHC must be one of"):
        GHHC(leaf_tree="chain").fit(X)
    with pytest.raises(ConfigError, match=r"'max_norm' parameter of GHHC .* must be below"):
        GHHC(max_norm=0.95).fit(X)
    with pytest.raises(ConfigError, match="non-finite"):
        GHHC().fit(np.array([[0.0, np.nan]]))


def test_separated_clusters_are_recovered() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 25)
    X = rng.normal(size=(4, 16))[y] * 6 + rng.normal(size=(100, 16))
    h = GHHC(n_internal=32, random_state=0).fit(X).hierarchy_
    assert dendrogram_purity(h, y) > 0.9


def test_er_cluster_runs_ghhc_and_writes_a_tree(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from er.cluster import Hierarchy

    X = np.random.default_rng(0).normal(size=(30, 5)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    args = ["cluster", "--algorithm", "ghhc", "--input", str(tmp_path / "X.npy")]
    args += ["--param", "n_internal=8", "--param", "epoch_size=100"]
    args += ["--param", "leaf_tree=hac", "--output"]
    done = subprocess.run(
        [sys.executable, "-m", "er.cli", *args, str(tmp_path / "S.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    h = Hierarchy.from_json(json.loads((tmp_path / "S.json").read_text()))
    assert h.algorithm == "ghhc" and h.params["n_internal"] == 8
    assert h.params["leaf_tree"] == "hac"
    check_structure(h)
    bad = subprocess.run(
        [sys.executable, "-m", "er.cli", *args[:5], "--param", "gamma=-1", "--output", "o.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "'gamma' parameter of GHHC" in bad.stderr


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0])
def test_fit_decodes_by_eq4_without_the_margin(gamma) -> None:
    """The fitted tree is Eq. 4 with the plain d_cp (Eq. 3), whatever the training margin."""
    X = np.random.default_rng(3).normal(size=(30, 4))
    est = GHHC(n_internal=10, n_epochs=2, epoch_size=60, gamma=gamma, random_state=1).fit(X)
    sets = leaves_under(est.hierarchy_)
    got = {frozenset(sets[v]) for v in range(30, est.hierarchy_.n_nodes)}
    assert got == brute_force_leaf_sets(est._points, est.nodes_, 0.0)
