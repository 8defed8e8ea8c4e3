"""MBSCC's ``neighbors=`` seam: supplied k-NN lists against MBSCC's own exact search.

The oracle lists are brute-force numpy (every other point, by similarity), computed
here, not by MBSCC or an index.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import MBSCC, normalize_rows
from er.cluster._graph import similarities
from er.exceptions import ConfigError


def complete_lists(X: np.ndarray, n0: int, width: int | None = None):
    """Rows n0.. of X: every other point of X[:n], by decreasing cosine, ties to lower id.

    Cosines follow er's one rounding rule (float64 product of the rows as MBSCC
    normalises them, rounded to float32), so equal inputs give equal bits.
    """
    n = X.shape[0]
    X = normalize_rows(X)
    S = similarities(X[n0:], X)
    S[np.arange(n - n0), np.arange(n0, n)] = -np.inf
    ids = np.broadcast_to(np.arange(n), S.shape)
    order = np.lexsort((ids, -S), axis=-1)[:, : (n - 1 if width is None else width)]
    idx = np.take_along_axis(ids, order, axis=1).copy()
    sim = np.take_along_axis(S, order, axis=1)
    idx[~np.isfinite(sim)] = -1
    return idx, sim


def by_id(knn) -> tuple[np.ndarray, np.ndarray]:
    """A k-NN list in id order (lists are sets; their stored order is free)."""
    order = np.argsort(knn.idx, axis=1, kind="stable")
    return np.take_along_axis(knn.idx, order, 1), np.take_along_axis(knn.sim, order, 1)


def same_hierarchy(a, b) -> None:
    np.testing.assert_array_equal(a.edges, b.edges)
    np.testing.assert_array_equal(a.score, b.score)
    np.testing.assert_array_equal(a.level_lo, b.level_lo)
    np.testing.assert_array_equal(a.level_hi, b.level_hi)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 50),
    batch=st.integers(3, 30),
    k=st.integers(1, 8),
    dup=st.integers(0, 10),
    marking=st.sampled_from(["paper", "exact"]),
    seed=st.integers(0, 2**16),
)
def test_complete_exact_lists_through_the_seam_equal_mbscc_own_search(
    n: int, batch: int, k: int, dup: int, marking: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(n // 6, 1), 4))
    X = normalize_rows(centers[rng.integers(0, len(centers), n)] + 0.3 * rng.normal(size=(n, 4)))
    X = np.vstack([X, X[rng.integers(0, n, dup)]])  # duplicates: tied similarities
    own = MBSCC(k=k, n_levels=10, marking=marking)
    fed = MBSCC(k=k, n_levels=10, marking=marking)
    for start in range(0, X.shape[0], batch):
        stop = min(start + batch, X.shape[0])
        own.partial_fit(X[start:stop])
        fed.partial_fit(X[start:stop], neighbors=complete_lists(X[:stop], start))
        for got, want in zip(by_id(fed._knn), by_id(own._knn), strict=True):
            np.testing.assert_array_equal(got, want)
        same_hierarchy(fed.hierarchy_, own.hierarchy_)
        np.testing.assert_array_equal(fed.node_ids_, own.node_ids_)
        for field in ("node_id", "size", "score", "retired", "edges_added", "edges_retired"):
            np.testing.assert_array_equal(getattr(fed.delta_, field), getattr(own.delta_, field))


def test_top_k_lists_keep_true_similarities_and_the_new_rows_lists_are_exact() -> None:
    rng = np.random.default_rng(1)
    X = normalize_rows(rng.normal(size=(600, 8)))
    own, fed = MBSCC(k=5), MBSCC(k=5)
    for start in range(0, 600, 100):
        own.partial_fit(X[start : start + 100])
        top5 = complete_lists(X[: start + 100], start, 5)
        fed.partial_fit(X[start : start + 100], neighbors=top5)
        new = slice(start, start + 100)
        np.testing.assert_array_equal(by_id(fed._knn)[0][new], by_id(own._knn)[0][new])
    # old lists only miss pairs the new rows' top 5 did not list: each list holds true
    # cosines, and is never better than the exact one
    idx, sim = fed._knn.idx, fed._knn.sim
    true = np.einsum("nd,nkd->nk", X.astype(np.float64), X[idx].astype(np.float64))
    np.testing.assert_allclose(sim, true, atol=1e-6)
    assert np.all(np.sort(sim, axis=1) <= np.sort(own._knn.sim, axis=1) + 1e-7)


def test_bad_neighbors_are_config_errors() -> None:
    X = normalize_rows(np.random.default_rng(0).normal(size=(10, 3)))
    m = MBSCC(k=2).partial_fit(X[:5])
    good_idx = np.array([[0, 1]] * 5)
    with pytest.raises(ConfigError, match=r"shape \(5, w\)"):
        m.partial_fit(X[5:], neighbors=(good_idx[:4], np.zeros((4, 2))))
    with pytest.raises(ConfigError, match=r"in 0\.\.9"):
        m.partial_fit(X[5:], neighbors=(good_idx + 9, np.zeros((5, 2))))
    with pytest.raises(ConfigError, match="own neighbour"):
        m.partial_fit(X[5:], neighbors=(np.array([[5, 0]] * 5), np.zeros((5, 2))))
    with pytest.raises(ConfigError, match="same neighbour twice"):
        m.partial_fit(X[5:], neighbors=(np.array([[1, 1]] * 5), np.zeros((5, 2))))
    with pytest.raises(ConfigError, match="finite"):
        m.partial_fit(X[5:], neighbors=(good_idx, np.full((5, 2), np.nan)))
    assert m._knn.points.shape[0] == 5 and m._point_ids.size == 5  # refused batches left no trace
    m.partial_fit(X[5:], neighbors=(good_idx, np.zeros((5, 2), np.float32)))
    assert m.hierarchy_.n_points == 10


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dim=st.sampled_from([3, 16, 64]),
    dups=st.integers(0, 300),
    sizes=st.lists(st.integers(1, 2500), min_size=2, max_size=4),
)
def test_screened_search_on_wide_blocks_keeps_exact_lists(
    seed: int, dim: int, dups: int, sizes: list[int]
) -> None:
    # past 4 k blocks of 64 columns the search screens with float32 products and
    # recomputes only the candidates: the lists must still be the brute-force ones,
    # for new points and for the old points whose lists they enter
    rng = np.random.default_rng(seed)
    n = 2600 + sum(sizes)
    X = rng.normal(size=(n, dim)).astype(np.float32)
    X[rng.integers(0, n, dups)] = X[rng.integers(0, n, dups)]  # ties
    m = MBSCC(k=10, n_levels=3)
    m.partial_fit(X[:2600])
    at = 2600
    for size in sizes:
        m.partial_fit(X[at : at + size])
        at += size
    idx, sim = complete_lists(X, 0, 10)
    got_idx, got_sim = by_id(m._knn)
    order = np.argsort(idx, axis=1, kind="stable")
    assert np.array_equal(got_idx, np.take_along_axis(idx, order, 1))
    assert np.array_equal(got_sim, np.take_along_axis(sim, order, 1))


def test_a_pickle_from_before_the_spare_rows_goes_on_like_one_kept_in_memory() -> None:
    """Points used to be stored exactly (no room to grow, no count): such a pickle
    loads, and the next batches give the same hierarchy and delta as the kept one."""
    import pickle

    X = np.random.default_rng(3).standard_normal((90, 6))
    kept = MBSCC(k=4).partial_fit(X[:30])
    old = pickle.loads(pickle.dumps(kept))
    old._knn.X = old._knn.points.copy()  # exactly the points, as older versions kept them
    del old._knn.__dict__["_n"]
    for name in ("idx", "sim"):  # and the lists as plain attributes
        old._knn.__dict__[name] = old._knn.__dict__.pop(f"_{name}")
    old = pickle.loads(pickle.dumps(old))
    assert old._knn.points.shape == (30, 6)
    for s in (30, 60):
        kept.partial_fit(X[s : s + 30])
        old.partial_fit(X[s : s + 30])
        np.testing.assert_array_equal(old.node_ids_, kept.node_ids_)
        np.testing.assert_array_equal(old.hierarchy_.edges, kept.hierarchy_.edges)
        np.testing.assert_array_equal(old.delta_.edges_added, kept.delta_.edges_added)
    np.testing.assert_array_equal(old._knn.points, normalize_rows(X).astype(np.float32))


def test_a_point_that_every_new_point_reaches_takes_the_best_k() -> None:
    """A batch of 300 near-copies of one old point: every new point reaches it, so
    its list has 300 candidates for k slots (a hub, common with near-duplicate
    records). Every list, through the seam and through MBSCC's own search, equals
    brute-force k-NN over all the points; the two hierarchies are equal."""
    rng = np.random.default_rng(7)
    old = rng.normal(size=(40, 8)).astype(np.float32)
    hub = old[0] + 0.02 * rng.normal(size=(300, 8)).astype(np.float32)
    X = np.vstack([old, hub])
    own, seam = MBSCC(k=5), MBSCC(k=5)
    own.partial_fit(X[:40])
    seam.partial_fit(X[:40])
    own.partial_fit(X[40:])
    seam.partial_fit(X[40:], neighbors=complete_lists(X, 40))
    idx, sim = complete_lists(X, 0, width=5)
    order = np.argsort(idx, axis=1, kind="stable")
    want = np.take_along_axis(idx, order, 1), np.take_along_axis(sim, order, 1)
    for got in (by_id(own._knn), by_id(seam._knn)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    same_hierarchy(own.hierarchy_, seam.hierarchy_)


@pytest.mark.parametrize(("linkage", "kept"), [("average", 0), ("mean", 0), ("centroid", 60)])
def test_given_neighbours_leave_the_points_with_the_caller_unless_centroid_reads_them(
    linkage: str, kept: int
) -> None:
    X = normalize_rows(np.random.default_rng(3).normal(size=(60, 4)))
    own, fed = MBSCC(k=4, n_levels=8, linkage=linkage), MBSCC(k=4, n_levels=8, linkage=linkage)
    for start in (0, 30):
        own.partial_fit(X[start : start + 30])
        fed.partial_fit(X[start : start + 30], neighbors=complete_lists(X[: start + 30], start))
        same_hierarchy(fed.hierarchy_, own.hierarchy_)
    assert fed._knn.points.shape == (kept, 4) and fed._knn._n == 60
    if not kept:
        with pytest.raises(ConfigError, match="pass neighbors= with every batch") as err:
            fed.partial_fit(X[:5])
        assert "\n" not in str(err.value)
        # nothing changed: the next batch goes on as if the refused one never came
        own.partial_fit(X[:5])
        fed.partial_fit(X[:5], neighbors=complete_lists(np.vstack([X, X[:5]]), 60))
        same_hierarchy(fed.hierarchy_, own.hierarchy_)
        np.testing.assert_array_equal(fed.node_ids_, own.node_ids_)


def test_a_pickled_mbscc_goes_on_like_the_one_never_pickled() -> None:
    """The kept rounds travel as int32 and come back int64: the next batches agree."""
    import pickle

    X = normalize_rows(np.random.default_rng(5).normal(size=(90, 6)))
    kept = MBSCC(k=4, n_levels=12)
    kept.partial_fit(X[:30])
    again = pickle.loads(pickle.dumps(kept))
    assert all(r.key.dtype == np.int64 and r.out.dtype == np.int64 for r in again._rounds)
    for start in (30, 60):
        kept.partial_fit(X[start : start + 30])
        again.partial_fit(X[start : start + 30])
        same_hierarchy(again.hierarchy_, kept.hierarchy_)
        np.testing.assert_array_equal(again.node_ids_, kept.node_ids_)
        np.testing.assert_array_equal(again.delta_.node_id, kept.delta_.node_id)
