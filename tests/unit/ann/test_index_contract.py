"""The k-NN index contract, run against every backend; brute-force numpy is the oracle.

Small parameters force the paths that matter: annoy flushes its buffer every 64
points and merges segments; ``auto`` switches from exact to hnswlib at 300 points.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.ann import (
    batch_neighbors,
    index_knn_graph,
    load_index,
    make_index,
    neighbors_before_add,
)
from er.ann._index import exact_search
from er.cluster import knn_graph, normalize_rows
from er.exceptions import ConfigError

SMALL = {
    "exact": {},
    "hnsw": {"M": 16, "ef_construction": 100, "ef": 64},
    "annoy": {"n_trees": 20, "search_k": 2000, "buffer_size": 64},
    "auto": {"threshold": 300, "ef": 64},
}
BACKENDS = list(SMALL)
K = 10


def clustered(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(n // 20, 1), d))
    X = centers[rng.integers(0, len(centers), n)] + 0.5 * rng.normal(size=(n, d))
    return normalize_rows(X)


def brute(
    Q: np.ndarray, X: np.ndarray, k: int, exclude: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Oracle: full sort of float64 cosines rounded to float32, ties to the lower id.

    ``exclude``: one row of X per query left out (its own point); rows short of k
    candidates are padded with (-1, -inf).
    """
    S = (Q.astype(np.float64) @ X.astype(np.float64).T).astype(np.float32)
    if exclude is not None:
        S[np.arange(Q.shape[0]), exclude] = -np.inf
    order = np.lexsort((np.broadcast_to(np.arange(X.shape[0]), S.shape), -S), axis=-1)[:, :k]
    sim = np.take_along_axis(S, order, axis=1)
    idx = np.where(np.isneginf(sim), -1, order)
    pad = ((0, 0), (0, k - idx.shape[1]))
    return np.pad(idx, pad, constant_values=-1), np.pad(sim, pad, constant_values=-np.inf)


def build(backend: str, X: np.ndarray, batch: int = 100, seed: int = 0):
    index = make_index(backend, dim=X.shape[1], seed=seed, **SMALL[backend])
    for start in range(0, X.shape[0], batch):
        index.add(X[start : start + batch])
    return index


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = [len(set(a) & set(b)) / len(b) for a, b in zip(found, truth, strict=True)]
    return float(np.mean(hits))


@pytest.mark.parametrize("backend", BACKENDS)
def test_recall_and_true_similarities_against_brute_force(backend: str) -> None:
    X = clustered(1500)
    index = build(backend, X)
    Q = clustered(200, seed=1)
    idx, sim = index.query(Q, K)
    truth, _ = brute(Q, X, K)
    assert recall(idx, truth) >= (1.0 if backend == "exact" else 0.9)
    # every returned similarity is the true cosine of that pair, in decreasing order
    true_sim = np.einsum("bd,bkd->bk", Q.astype(np.float64), X[idx].astype(np.float64))
    np.testing.assert_allclose(sim, true_sim, atol=1e-6)
    assert np.all(np.diff(sim, axis=1) <= 0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    k=st.integers(1, 70),
    dup=st.integers(0, 20),
    seed=st.integers(0, 2**16),
)
def test_exact_equals_brute_force_with_ties_and_padding(n: int, k: int, dup: int, seed: int):
    rng = np.random.default_rng(seed)
    X = normalize_rows(rng.normal(size=(n, 3)))
    X = np.vstack([X, X[rng.integers(0, n, dup)]])  # exact duplicates: tied similarities
    index = make_index("exact", dim=3)
    index.add(X)
    idx, sim = index.query(X, k)
    kk = min(k, X.shape[0])
    truth, tsim = brute(X, X, kk)
    np.testing.assert_array_equal(idx[:, :kk], truth)
    np.testing.assert_array_equal(sim[:, :kk], tsim)
    assert np.all(idx[:, kk:] == -1) and np.all(sim[:, kk:] == -np.inf)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(20, 400),
    k=st.integers(1, 12),
    d=st.sampled_from([4, 32, 300]),
    dup=st.integers(0, 60),
    jitter=st.sampled_from([0.0, 1e-7, 1e-5]),
    seed=st.integers(0, 2**16),
)
def test_exact_search_with_float32_candidates_equals_float64_brute_force(
    n: int, k: int, d: int, dup: int, jitter: float, seed: int
) -> None:
    """Many points per query (the float32 candidate path), with exact and near ties
    at the k-th neighbour (duplicates nudged by less than float32's product error:
    the rows the float64 fallback must answer)."""
    rng = np.random.default_rng(seed)
    X = clustered(n, d, seed)
    near = X[rng.integers(0, 3, dup)] + jitter * rng.normal(size=(dup, d))  # copies of 3
    X = np.vstack([X, normalize_rows(near)])
    Q = np.vstack([X[:3], X[rng.integers(0, X.shape[0], 30)]])
    truth, tsim = brute(Q, X, k)
    idx, sim = exact_search(Q, X, k, block=7)
    np.testing.assert_array_equal(idx, truth)
    np.testing.assert_array_equal(sim, tsim)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ids_are_dense_and_every_point_stays_findable(backend: str) -> None:
    X = clustered(700)
    index = make_index(backend, dim=16, **SMALL[backend])
    for start in range(0, 700, 70):  # crosses annoy flushes and merges, auto's switch
        ids = index.add(X[start : start + 70])
        np.testing.assert_array_equal(ids, np.arange(start, start + 70))
        assert len(index) == start + 70
        idx, sim = index.query(X[: start + 70], 1)
        # each point's nearest indexed point is itself (distinct random vectors)
        np.testing.assert_array_equal(idx[:, 0], np.arange(start + 70))
        np.testing.assert_allclose(sim[:, 0], 1.0, atol=1e-6)


def test_annoy_segments_cover_ids_and_merge_geometrically() -> None:
    X = clustered(1000)
    index = make_index("annoy", dim=16, **SMALL["annoy"])
    for start in range(0, 1000, 50):
        index.add(X[start : start + 50])
        segs = index._ann.segments
        bounds = [(s.start, s.stop) for s in segs]
        # contiguous ranges from 0, then the exact buffer up to n
        assert [a for a, _ in bounds] == [0, *(b for _, b in bounds)][: len(bounds)]
        assert index._ann.buffer_start == (bounds[-1][1] if bounds else 0)
        assert len(index) - index._ann.buffer_start < 64
        sizes = [b - a for a, b in bounds]
        assert all(x > y for x, y in itertools.pairwise(sizes))  # strictly decreasing
    assert len(segs) <= int(np.log2(1000 / 64)) + 2
    truth, _ = brute(X[:200], X, K)
    assert recall(index.query(X[:200], K)[0], truth) >= 0.9


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_round_trip_gives_the_same_answers(backend: str, tmp_path) -> None:
    X = clustered(900)
    index = build(backend, X[:600])
    Q = clustered(100, seed=2)
    before = index.query(Q, K)
    index.save(tmp_path / "idx")
    loaded = load_index(tmp_path / "idx")
    assert len(loaded) == 600 and loaded.backend == backend
    for got, want in zip(loaded.query(Q, K), before, strict=True):
        np.testing.assert_array_equal(got, want)
    # keep adding after the restart (annoy: more flushes and merges), save again
    for start in range(600, 900, 100):
        index.add(X[start : start + 100])
        loaded.add(X[start : start + 100])
    loaded.save(tmp_path / "idx")
    again = load_index(tmp_path / "idx")
    truth, _ = brute(Q, X, K)
    for ix in (loaded, again):
        got = ix.query(Q, K)
        if backend in ("exact", "annoy"):  # seeds derive from id ranges: restart-proof
            np.testing.assert_array_equal(got[0], index.query(Q, K)[0])
        assert recall(got[0], truth) >= (1.0 if backend == "exact" else 0.9)
    assert sorted(p.name for p in (tmp_path / "idx").iterdir() if p.is_dir()) == ["gen-000001"]


def test_a_save_that_dies_before_the_swap_leaves_the_last_checkpoint(tmp_path) -> None:
    X = clustered(200)
    index = build("exact", X[:100])
    index.save(tmp_path)
    (tmp_path / "gen-000001").mkdir()  # debris of a save interrupted before CURRENT moved
    (tmp_path / "gen-000001" / "vectors.npy").write_bytes(b"garbage")
    assert len(load_index(tmp_path)) == 100
    index.add(X[100:])
    index.save(tmp_path)
    assert len(load_index(tmp_path)) == 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_inputs_same_answers(backend: str) -> None:
    X = clustered(800)
    Q = clustered(100, seed=3)
    a = build(backend, X, seed=7).query(Q, K)
    b = build(backend, X, seed=7).query(Q, K)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_auto_puts_the_points_added_before_the_switch_into_the_ann() -> None:
    X = clustered(400)
    index = make_index("auto", dim=16, **SMALL["auto"])
    index.add(X[:299])
    assert index._ann is None
    index.add(X[299:])
    assert index._ann is not None
    assert index._ann._index.get_current_count() == 400
    idx, _ = index._ann._index.knn_query(X[:299], k=1)
    np.testing.assert_array_equal(idx[:, 0], np.arange(299))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_is_a_config_error(backend: str) -> None:
    index = make_index(backend, dim=4, **SMALL[backend])
    good = normalize_rows(np.ones((2, 4)))
    nan = good.copy()
    nan[1, 2] = np.nan
    with pytest.raises(ConfigError, match=r"\(b, 4\)"):
        index.add(np.ones((2, 3), np.float32))
    with pytest.raises(ConfigError, match="row 1 has a non-finite"):
        index.add(nan)
    with pytest.raises(ConfigError, match="row 0 has norm 2"):
        index.add(2 * good)
    index.add(good)
    with pytest.raises(ConfigError, match="row 1 has a non-finite"):
        index.query(nan, 3)
    with pytest.raises(ConfigError, match="k: expected an integer >= 1"):
        index.query(good, 0)
    assert len(index) == 2  # refused batches left no trace


def test_bad_configuration_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="backend"):
        make_index("faiss", dim=4)
    with pytest.raises(ConfigError, match="'n_trees' does not apply to backend 'hnsw'"):
        make_index("hnsw", dim=4, n_trees=10)
    with pytest.raises(ConfigError, match="ef: expected an integer >= 1"):
        make_index("hnsw", dim=4, ef=0)
    with pytest.raises(ConfigError, match="dim"):
        make_index("exact", dim=0)
    with pytest.raises(ConfigError, match="no saved k-NN index"):
        load_index(tmp_path)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_neighbors_are_the_other_points(backend: str) -> None:
    X = clustered(600)
    index = make_index(backend, dim=16, **SMALL[backend])
    batch_neighbors(index, X[:500], K)
    idx, _ = batch_neighbors(index, X[500:], K)
    assert not np.any(idx == np.arange(500, 600)[:, None])  # never itself
    truth, _ = brute(X[500:], X, K + 1)
    truth = np.array([[j for j in row if j != 500 + r][:K] for r, row in enumerate(truth)])
    assert recall(idx, truth) >= (1.0 if backend == "exact" else 0.9)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5),
    k=st.integers(1, 15),
    dup=st.integers(0, 30),
    seed=st.integers(0, 2**16),
)
def test_neighbors_before_add_equal_the_other_points_exactly(
    sizes: list[int], k: int, dup: int, seed: int
) -> None:
    """Found before the batch enters an exact index: the k best other points, ties to
    the lower id, as batch_neighbors gives after adding it (duplicates tie across the
    old points and the batch; batches smaller than k pad)."""
    rng = np.random.default_rng(seed)
    X = normalize_rows(rng.normal(size=(sum(sizes), 3)))
    copies = rng.integers(0, X.shape[0], min(dup, X.shape[0]))
    X[rng.permutation(X.shape[0])[: copies.size]] = X[copies]
    early, late = make_index("exact", dim=3), make_index("exact", dim=3)
    start = 0
    for b in sizes:
        rows = X[start : start + b]
        idx, sim = neighbors_before_add(early, rows, k)
        assert len(early) == start  # the index is left as it was
        early.add(rows)
        ids = np.arange(start, start + b)
        tidx, tsim = brute(rows, X[: start + b], k, exclude=ids)
        np.testing.assert_array_equal(idx, tidx)
        np.testing.assert_array_equal(sim, tsim)
        bidx, bsim = batch_neighbors(late, rows, k)
        np.testing.assert_array_equal(idx, bidx)
        np.testing.assert_array_equal(sim, bsim)
        start += b


@pytest.mark.parametrize("backend", BACKENDS)
def test_neighbors_before_add_on_every_backend(backend: str) -> None:
    """The index's own answer for the old points, brute force for the batch's rows,
    merged best first, on every backend (and, for exact search, the true top k)."""
    X = clustered(6_000)
    # 20 batch rows around a direction no old point is near: their k nearest are all
    # batch rows, so the batch's own lists must be complete
    rng = np.random.default_rng(1)
    X[5_000:5_020] = normalize_rows(rng.normal(size=16) + 0.05 * rng.normal(size=(20, 16)))
    old, batch = X[:5_000], X[5_000:]
    index = make_index(backend, dim=16, **SMALL[backend])
    for start in range(0, 5_000, 1_000):
        index.add(old[start : start + 1_000])
    idx, sim = neighbors_before_add(index, batch, K)
    assert len(index) == 5_000
    old_idx, old_sim = index.query(batch, K)
    own_idx, own_sim = brute(batch, batch, K, exclude=np.arange(1_000))
    for r in range(1_000):  # a plain Python merge: (-sim, id), padding dropped
        pairs = [(-s, i) for s, i in zip(old_sim[r], old_idx[r], strict=True) if i >= 0]
        pairs += [(-s, 5_000 + i) for s, i in zip(own_sim[r], own_idx[r], strict=True) if i >= 0]
        best = sorted(pairs)[:K]
        assert idx[r].tolist() == [i for _, i in best]
        np.testing.assert_array_equal(sim[r], np.float32([-s for s, _ in best]))
    truth, _ = brute(batch, X, K, exclude=np.arange(5_000, 6_000))
    assert recall(idx, truth) >= (1.0 if backend == "exact" else 0.9)


def test_exact_index_graph_equals_knn_graph() -> None:
    X = clustered(800)
    G = index_knn_graph(X, K, backend="exact")
    E = knn_graph(X, K)
    assert (G != E).nnz == 0


@pytest.mark.slow
def test_default_backend_recall_on_the_hard_mixture() -> None:
    """Issue #13: recall@10 >= 0.95 against exact search on hard data (bench: 100k)."""
    from er.cluster._synthetic import hard_mixture

    X = normalize_rows(hard_mixture(20_500, noise=1.0, seed=3)[0])
    index = make_index("auto", dim=64)
    for start in range(0, 20_000, 1000):
        index.add(X[start : start + 1000])
    truth, _ = brute(X[20_000:], X[:20_000], K)
    assert recall(index.query(X[20_000:], K)[0], truth) >= 0.95


@pytest.mark.parametrize("jitter", [0.0, 1e-7])
def test_exact_search_on_wide_rows_screens_and_still_equals_brute_force(jitter: float) -> None:
    """3,300 points: the float32 screen keeps a few blocks per row and re-scores them;
    exact and float32-sized near ties at the k-th neighbour must come out as brute force."""
    rng = np.random.default_rng(7)
    X = clustered(3000, 32, 7)
    near = X[rng.integers(0, 3, 300)] + jitter * rng.normal(size=(300, 32))
    X = np.vstack([X, normalize_rows(near)])
    Q = np.vstack([X[:3], X[rng.integers(0, X.shape[0], 60)]])
    truth, tsim = brute(Q, X, 10)
    idx, sim = exact_search(Q, X, 10, block=16)
    np.testing.assert_array_equal(idx, truth)
    np.testing.assert_array_equal(sim, tsim)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(50, 600), k=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_hnsw_queries_on_every_core_answer_as_one_thread_does(n: int, k: int, seed: int) -> None:
    """Queries run on all cores (inserts on one): each row's answer must be the one a
    single-threaded query gives on the same graph (hnswlib itself is the oracle)."""
    rng = np.random.default_rng(seed)
    X = normalize_rows(rng.normal(size=(n, 8))).astype(np.float32)
    index = make_index("hnsw", dim=8, seed=seed, M=8, ef_construction=20, ef=16)
    index.add(X)
    Q = normalize_rows(rng.normal(size=(64, 8))).astype(np.float32)
    graph = index._ann._index
    graph.set_ef(max(16, k))
    alone, _ = graph.knn_query(Q, k=min(k, n), num_threads=1)
    np.testing.assert_array_equal(index._ann.candidates(Q, k, X), alone.astype(np.int64))


def test_a_sparse_hnsw_graph_pads_the_rows_it_cannot_fill_instead_of_failing() -> None:
    """With M 2 and ef_construction 2, some rows reach fewer than k points even when
    ef covers the whole index; hnswlib then refuses the whole query. Every row's
    answer is still returned: what it found, exactly re-scored, -1 / -inf padded."""
    rng = np.random.default_rng(0)
    X = normalize_rows(rng.normal(size=(3000, 16))).astype(np.float32)
    index = make_index("hnsw", dim=16, M=2, ef_construction=2, ef=2)
    index.add(X)
    graph = index._ann._index
    graph.set_ef(3000)
    with pytest.raises(RuntimeError):  # the case: hnswlib alone fails at full ef
        graph.knn_query(X[:200], k=15, num_threads=1)
    idx, sim = index.query(X[:200], 15)
    found = idx >= 0
    assert idx.shape == (200, 15) and 0 < (~found).sum() < idx.size // 10
    assert (found[:, :-1] >= found[:, 1:]).all()  # padding only at the end of a row
    assert np.isneginf(sim[~found]).all()
    want = np.einsum("bd,bkd->bk", X[:200].astype(np.float64), X[np.maximum(idx, 0)])
    np.testing.assert_allclose(sim[found], want[found], atol=1e-6)
    for row in idx:  # distinct ids per row
        assert len(set(row[row >= 0].tolist())) == int((row >= 0).sum())
