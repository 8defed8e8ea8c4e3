"""GRINCH's batched nearest-leaf search and its incrementally kept outputs.

Oracles that share nothing with the code under test: a per-point exact search (one
matrix-vector product and a full sort per inserted point, as GRINCH searched before
mini-batches were searched at once), heights from the exported edges by recursion, and
linkages from the points under each node.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import Grinch
from er.cluster._grinch_search import _search, _top_k
from er.delta import ClusteringDelta
from er.exceptions import ConfigError

from .._trees import leaves_under


class _PerPoint(Grinch):
    """GRINCH whose k best earlier points are found one inserted point at a time."""

    def _nearest_earlier(self, n0, neighbors):  # type: ignore[no-untyped-def]
        P = np.asarray(self._points)
        k = self.graft_candidates or 1
        out = np.full((P.shape[0] - n0, k), -1, np.int64)
        for i in range(n0, P.shape[0]):
            sims = P[:i] @ P[i]
            best = np.lexsort((np.arange(i), -sims))[:k]  # ties: earliest point
            out[i - n0, : best.size] = best
        return out


def _data(seed: int, n: int, dim: int, kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        return rng.normal(size=(n, dim))
    centres = rng.normal(size=(max(n // 5, 1), dim))  # overlapping clusters: many moves
    return centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.8, size=(n, dim))


def _cuts(n: int, sizes: list[int]) -> list[int]:
    """Batch boundaries 0 < ... < n from a list of batch sizes (the last takes the rest)."""
    out, at = [0], 0
    for s in sizes:
        at += s
        if at >= n:
            break
        out.append(at)
    return [*out, n]


def _run(est: Grinch, X: np.ndarray, cuts: list[int], with_neighbors: int = 0) -> list:
    """Feed X in the given batches; return (parents, stats, delta fields) per batch."""
    out = []
    for lo, hi in itertools.pairwise(cuts):
        nb = _exact_neighbors(X, lo, hi, with_neighbors) if with_neighbors and lo else None
        est.partial_fit(X[lo:hi], neighbors=nb)
        t = est._tree
        delta = {f.name: _comparable(getattr(est.delta_, f.name)) for f in FIELDS}
        out.append((t.parent[: t.n_nodes].tolist(), dict(est.stats_), delta))
    return out


FIELDS = dataclasses.fields(ClusteringDelta)


def _comparable(value: object) -> object:
    """A delta field as plain lists, NaN (a leaf's score) as None so that == holds."""
    a = np.asarray(value)
    return np.where(np.isnan(a), None, a).tolist() if a.dtype.kind == "f" else a.tolist()


def _exact_neighbors(X: np.ndarray, lo: int, hi: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's w most similar points of earlier batches, plus rows of its own batch.

    The batch's own rows (which GRINCH must ignore: it compares them exactly) are put
    first, with similarity 2, so that ignoring them is tested.
    """
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    sims = U[lo:hi] @ U[:lo].T
    best = np.argsort(-sims, axis=1, kind="stable")[:, :w]
    inside = np.array([[lo + (j + 1) % (hi - lo)] for j in range(hi - lo)])
    idx = np.hstack([inside, best]) if hi - lo > 1 else best
    sim = np.hstack([np.full((hi - lo, 1), 2.0), np.take_along_axis(sims, best, 1)])
    return idx, sim[:, -idx.shape[1] :]


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(2, 70),
    dim=st.integers(2, 6),
    kind=st.sampled_from(["gauss", "mixture"]),
    sizes=st.lists(st.integers(1, 25), min_size=1, max_size=6),
    mode=st.sampled_from(["grinch", "rotate", "greedy"]),
    graft_candidates=st.sampled_from([None, 1, 3, 10]),
    size_cap=st.sampled_from([None, 5]),
)
def test_batched_search_builds_the_per_point_tree(
    seed, n, dim, kind, sizes, mode, graft_candidates, size_cap
) -> None:
    """Same input, same batches: the same tree, stats and deltas after every batch."""
    X, cuts = _data(seed, n, dim, kind), _cuts(n, sizes)
    params = {"mode": mode, "graft_candidates": graft_candidates, "size_cap": size_cap}
    assert _run(Grinch(**params), X, cuts) == _run(_PerPoint(**params), X, cuts)


@pytest.mark.parametrize("seed", range(12))
def test_supplied_neighbors_build_the_exact_search_tree(seed: int) -> None:
    """neighbors= holding the exact top k of earlier batches (and rows of the batch
    itself, to be ignored) gives the tree of GRINCH's own exact search."""
    X, cuts = _data(seed, 80, 4, "mixture"), _cuts(80, [10, 7, 25, 13, 30])
    params = {"graft_candidates": 5, "single_elimination": True, "rotate_cap": 10}
    got = _run(Grinch(**params), X, cuts, with_neighbors=5)
    assert got == _run(Grinch(**params), X, cuts)


def test_an_index_that_finds_nothing_falls_back_to_the_exact_search() -> None:
    X, cuts = _data(3, 40, 3, "gauss"), [0, 20, 40]
    a = Grinch(graft_candidates=3).partial_fit(X[:20])
    a.partial_fit(X[20:], neighbors=(np.full((20, 3), -1), np.zeros((20, 3))))
    assert (
        _run(Grinch(graft_candidates=3), X, cuts)[-1][0]
        == a._tree.parent[: a._tree.n_nodes].tolist()
    )


def _heights_from_edges(h) -> list[int]:  # type: ignore[no-untyped-def]
    kids: dict[int, list[int]] = {}
    for c, p in h.edges.tolist():
        kids.setdefault(p, []).append(c)

    def height(v: int) -> int:
        return 0 if v not in kids else 1 + max(height(c) for c in kids[v])

    return [height(v) for v in range(h.n_nodes)]


def _linkages_from_points(h, U: np.ndarray) -> list[float]:  # type: ignore[no-untyped-def]
    """Centroid cosine of each internal node's children, from the unit rows U."""
    under = leaves_under(h)
    kids: dict[int, list[int]] = {}
    for c, p in h.edges.tolist():
        kids.setdefault(p, []).append(c)
    out = []
    for v in range(h.n_nodes):
        if v not in kids:
            out.append(np.nan)
            continue
        a, b = (U[sorted(under[c])].sum(axis=0) for c in kids[v])
        out.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return out


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(2, 60),
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=6),
    graft_from=st.sampled_from(["leaf", "ancestors"]),
    graft_candidates=st.sampled_from([None, 4]),
)
def test_kept_heights_and_linkages_equal_a_recomputation(
    seed, n, sizes, graft_from, graft_candidates
) -> None:
    """After every batch, the exported heights and scores (kept for changed paths only)
    equal heights recomputed from the edges and linkages from the points."""
    X = _data(seed, n, 3, "mixture")
    est = Grinch(graft_from=graft_from, graft_candidates=graft_candidates)
    cuts = _cuts(n, sizes)
    for lo, hi in itertools.pairwise(cuts):
        h = est.partial_fit(X[lo:hi]).hierarchy_
        assert h.level_lo.tolist() == _heights_from_edges(h)
        # GRINCH's own unit rows: normalize_rows rounds through float32
        want = _linkages_from_points(h, np.asarray(est._points))
        np.testing.assert_allclose(h.score, want, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    b=st.integers(1, 6),
    m=st.integers(0, 30),
    k=st.integers(1, 8),
    levels=st.integers(1, 6),
)
def test_top_k_is_the_lexicographic_best_k_under_ties(seed, b, m, k, levels) -> None:
    """Few distinct values (many ties) and -inf gaps: the k best by (sim desc, idx asc)."""
    rng = np.random.default_rng(seed)
    sim = rng.integers(0, levels, (b, m)).astype(float)
    sim[rng.random((b, m)) < 0.2] = -np.inf
    idx = np.stack([rng.permutation(m) for _ in range(b)]).reshape(b, m) + 100
    got_s, got_i = _top_k(sim, idx, k)
    for r in range(b):
        order = sorted(range(m), key=lambda j: (-sim[r, j], idx[r, j]))[:k]
        want = [idx[r, j] if np.isfinite(sim[r, j]) else -1 for j in order]
        assert got_i[r].tolist() == want
        assert got_s[r].tolist() == [sim[r, j] for j in order]


def test_blocked_search_equals_one_block() -> None:
    rng = np.random.default_rng(0)
    P, Q = rng.normal(size=(57, 5)), rng.normal(size=(9, 5))
    P[30] = P[3]  # a tie across blocks: the lower index wins
    assert np.array_equal(_search(P, Q, 6, block=7)[1], _search(P, Q, 6, block=1000)[1])
    assert np.array_equal(_search(P, Q, 6)[1], np.argsort(-(Q @ P.T), axis=1, kind="stable")[:, :6])


def test_neighbors_are_validated() -> None:
    est = Grinch().partial_fit(np.eye(3))
    with pytest.raises(ConfigError, match="neighbors"):
        est.partial_fit(np.eye(3), neighbors=(np.zeros((2, 1), int), np.zeros((2, 1))))
    with pytest.raises(ConfigError, match="neighbors"):
        est.partial_fit(np.eye(3), neighbors=(np.full((3, 1), 9), np.zeros((3, 1))))


def test_fit_again_starts_afresh_even_with_another_width() -> None:
    rng = np.random.default_rng(0)
    est = Grinch().fit(rng.normal(size=(30, 4)))
    X = rng.normal(size=(20, 6))
    assert est.fit(X).hierarchy_.edges.tolist() == Grinch().fit(X).hierarchy_.edges.tolist()
