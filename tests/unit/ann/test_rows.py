"""The blocking keys' int8 vectors (er.ann.Int8Rows) against float64 cosine.

Oracle: the exact similarities of the float64 rows, and the rounding bound: each
stored component is off by at most half its row's scale (max|x| / 127), so a unit
query's similarity is off by at most that times ||q||_1. Whatever the rows, every
returned similarity lies within the bound of the exact one, and no candidate left
out beats a kept one by more than twice the bound.
"""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.ann import Int8Rows


def _unit(rng: np.random.Generator, n: int, d: int, density: float) -> np.ndarray:
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[:, 0] += (X == 0).all(axis=1)  # no zero rows
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.sampled_from([1, 3, 16, 257]),
    sizes=st.lists(st.integers(1, 700), min_size=1, max_size=4),  # past the first room
    c=st.integers(1, 30),
    k=st.integers(1, 12),
    density=st.sampled_from([0.05, 0.3, 1.0]),
)
def test_ranked_candidates_are_within_the_rounding_bound_of_exact_cosine(
    seed: int, d: int, sizes: list[int], c: int, k: int, density: float
) -> None:
    rng = np.random.default_rng(seed)
    rows, parts = Int8Rows(d), []
    for size in sizes:
        X = _unit(rng, size, d, density)
        np.testing.assert_array_equal(rows.add(X), np.arange(len(rows) - size, len(rows)))
        parts.append(X)
    X = np.concatenate(parts).astype(np.float64)
    n = len(rows)
    rows = pickle.loads(pickle.dumps(rows))  # as a checkpoint restores it
    Q = _unit(rng, 20, d, density)
    cand = np.stack([rng.choice(np.arange(-1, n), size=min(c, n + 1), replace=False) for _ in Q])
    idx, sim = rows.rank(Q, cand, k)
    scale = np.abs(X).max(axis=1) / 127
    # (20, n): how far each stored row's similarity to each query may be off
    bound = np.abs(Q.astype(np.float64)).sum(axis=1, keepdims=True) * (scale / 2)
    exact = Q.astype(np.float64) @ X.T
    for r in range(len(Q)):
        valid = sorted(set(cand[r][cand[r] >= 0].tolist()))
        kept = [i for i in idx[r].tolist() if i >= 0]
        assert len(kept) == min(k, len(valid)) and set(kept) <= set(valid)
        assert len(set(kept)) == len(kept)
        assert (idx[r][len(kept) :] == -1).all() and np.isneginf(sim[r][len(kept) :]).all()
        err = np.abs(sim[r][: len(kept)] - exact[r, kept])
        assert (err <= bound[r, kept] + 1e-5).all()
        assert list(sim[r][: len(kept)]) == sorted(sim[r][: len(kept)], reverse=True)
        left = [i for i in valid if i not in kept]
        if kept and left:
            slack = bound[r, left].max() + bound[r, kept].max() + 1e-5
            assert exact[r, left].max() <= exact[r, kept].min() + slack


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 64), n=st.integers(1, 50))
def test_stored_rows_come_back_within_half_a_step(seed: int, d: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    X = _unit(rng, n, d, 0.5)
    rows = Int8Rows(d)
    rows.add(X)
    back = rows.floats(n)
    step = np.abs(X).max(axis=1, keepdims=True) / 127
    assert back.dtype == np.float32 and back.shape == X.shape
    assert (np.abs(back - X) <= step / 2 + 1e-7).all()
    assert rows._X.dtype == np.int8  # a quarter of float32's memory
