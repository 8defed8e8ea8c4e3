"""GRINCH's kept root paths and the paths its moves take from them.

``_Tree.root_path`` answers from paths kept across edits, confirmed against
``parent``; the oracle climbs ``up`` one node at a time. A graft and a restructure
swap take the nodes whose sums change from the paths the graft search already holds;
the oracle is the same run with every such path computed afresh (``_Tree.meet``), which
must give the same tree to the last bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import Grinch
from er.cluster._bintree import _NONE, _Tree


def _climb(t: _Tree, v: int) -> list[int]:
    """v and its ancestors, nearest first, one step of ``up`` at a time."""
    out = []
    while v != _NONE:
        out.append(v)
        v = t.up[v]
    return out


def _lca(t: _Tree, a: int, b: int) -> int:
    above_a = set(_climb(t, a))
    return next(v for v in _climb(t, b) if v in above_a)


class _Checked(Grinch):
    """Grinch that checks root paths and LCAs against plain climbs after each point."""

    def _insert(self, i: int, near: np.ndarray) -> None:
        super()._insert(i, near)
        t = self._tree
        live = np.flatnonzero(t.alive[: t.n_nodes])
        rng = np.random.default_rng(i)
        for a, b in rng.choice(live, size=(3, 2)).tolist():
            assert t.root_path(a).tolist() == _climb(t, a)
            lca, from_a, from_b = t.meet(a, b)
            assert lca == _lca(t, a, b)
            assert from_a.tolist() == _climb(t, a)[: len(from_a)]
            assert from_b.tolist() == _climb(t, b)[: len(from_b)]
            assert t.up[int(from_a[-1])] == lca if from_a.size else a == lca


def _data(seed: int, n: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(n // 5, 1), dim))  # overlapping clusters: many moves
    return centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.8, size=(n, dim))


_SETTINGS = {
    "graft_from": st.sampled_from(["leaf", "ancestors"]),
    "size_cap": st.sampled_from([None, 4, 100]),
    "graft_candidates": st.sampled_from([None, 3]),
}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), dim=st.integers(2, 6), **_SETTINGS)
def test_root_paths_and_lcas_match_plain_climbs(
    seed: int, n: int, dim: int, graft_from: str, size_cap: int | None, graft_candidates: int | None
) -> None:
    g = _Checked(graft_from=graft_from, size_cap=size_cap, graft_candidates=graft_candidates)
    X = _data(seed, n, dim)
    g.fit(X[: n // 2]).partial_fit(X[n // 2 :])


def _fresh_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moves, swaps and restructures compute every path afresh."""
    move, swap = _Tree.move, _Tree.swap
    monkeypatch.setattr(_Tree, "move", lambda t, v, target, paths=None: move(t, v, target))
    monkeypatch.setattr(_Tree, "swap", lambda t, a, b, between=None: swap(t, a, b))
    graft, restructure = Grinch._apply_graft, Grinch._restructure

    def apply_graft(self: Grinch, v: int, l: int, paths: tuple) -> int:  # noqa: E741
        z = graft(self, v, l, None)
        self._graft_pair = (z, l)  # the restructure climbs from z to its LCA with l
        return z

    def fresh_restructure(self: Grinch, path: np.ndarray) -> None:
        fresh = self._tree.meet(*self._graft_pair)[1]
        np.testing.assert_array_equal(path, fresh)
        restructure(self, fresh)

    monkeypatch.setattr(Grinch, "_apply_graft", apply_graft)
    monkeypatch.setattr(Grinch, "_restructure", fresh_restructure)


def _state(g: Grinch) -> list[np.ndarray]:
    t, n = g._tree, g._tree.n_nodes
    h = g.hierarchy_
    norms = t.norms(np.arange(n))
    return [t.parent[:n], t.count[:n], t.sums[:n], norms, h.edges, h.score, h.level_lo]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), dim=st.integers(2, 6), **_SETTINGS)
def test_paths_taken_from_the_search_equal_fresh_ones(
    seed: int, n: int, dim: int, graft_from: str, size_cap: int | None, graft_candidates: int | None
) -> None:
    X = _data(seed, n, dim)
    params = {"graft_from": graft_from, "size_cap": size_cap, "graft_candidates": graft_candidates}
    fast = Grinch(**params).fit(X[: n // 2]).partial_fit(X[n // 2 :])
    with pytest.MonkeyPatch.context() as mp:
        _fresh_paths(mp)
        fresh = Grinch(**params).fit(X[: n // 2]).partial_fit(X[n // 2 :])
    assert fast.stats_ == fresh.stats_
    for a, b in zip(_state(fast), _state(fresh), strict=True):
        np.testing.assert_array_equal(a, b)
