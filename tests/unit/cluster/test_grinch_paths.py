"""GRINCH's kept root paths and the shortcuts its moves take.

``_Tree.root_path`` answers from paths kept across edits, confirmed against
``parent``; the oracle climbs ``up`` one node at a time. A graft takes the nodes whose
sums change from the paths its search already holds, and a restructure keeps the
path's sums in local rows; the oracle is the same run with every path computed afresh
(``_Tree.meet``) and Alg. 7 run one swap at a time on the tree's own sums, which must
give the same tree to the last bit.
"""

from __future__ import annotations

from typing import Any

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


# Grinch parameters that change which paths are kept, grafted and restructured
_PARAMS = st.fixed_dictionaries(
    {
        "graft_from": st.sampled_from(["leaf", "ancestors"]),
        "size_cap": st.sampled_from([None, 4, 100]),
        "restruct_cap": st.sampled_from([None, 2]),
        "graft_candidates": st.sampled_from([None, 3]),
    }
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), dim=st.integers(2, 6), params=_PARAMS)
def test_root_paths_and_lcas_match_plain_climbs(
    seed: int, n: int, dim: int, params: dict[str, Any]
) -> None:
    X = _data(seed, n, dim)
    _Checked(**params).fit(X[: n // 2]).partial_fit(X[n // 2 :])


def _plain_restructure(g: Grinch, path: np.ndarray) -> None:
    """Alg. 7 one step at a time: f_many on the tree's sums, each swap by ``_Tree.swap``."""
    t = g._tree
    aunts = [t.sib(int(a)) for a in path]
    for steps, z in enumerate(path.tolist()):
        if (g.restruct_cap is not None and steps >= g.restruct_cap) or g._too_big(z):
            return
        scores = t.f_many(np.asarray(aunts[steps:], np.int64), z)
        j = int(np.argmax(scores))
        if j > 0 and scores[0] < scores[j]:
            s, m = aunts[steps], aunts[steps + j]
            t.swap(s, m)
            g.stats_["restructures"] += 1
            aunts[steps], aunts[steps + j] = m, s


def _fresh_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moves and restructures compute every path and sum afresh."""
    move = _Tree.move
    monkeypatch.setattr(_Tree, "move", lambda t, v, target, paths=None: move(t, v, target))
    graft = Grinch._apply_graft

    def apply_graft(self: Grinch, v: int, l: int, paths: tuple) -> int:  # noqa: E741
        z = graft(self, v, l, None)
        self._graft_pair = (z, l)  # the restructure climbs from z to its LCA with l
        return z

    def fresh_restructure(self: Grinch, path: np.ndarray) -> None:
        fresh = self._tree.meet(*self._graft_pair)[1]
        np.testing.assert_array_equal(path, fresh)
        _plain_restructure(self, fresh)

    monkeypatch.setattr(Grinch, "_apply_graft", apply_graft)
    monkeypatch.setattr(Grinch, "_restructure", fresh_restructure)


def _state(g: Grinch) -> list[np.ndarray]:
    t, n = g._tree, g._tree.n_nodes
    h = g.hierarchy_
    norms = t.norms(np.arange(n))
    return [t.parent[:n], t.count[:n], t.sums[:n], norms, h.edges, h.score, h.level_lo]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), dim=st.integers(2, 6), params=_PARAMS)
def test_paths_taken_from_the_search_equal_fresh_ones(
    seed: int, n: int, dim: int, params: dict[str, Any]
) -> None:
    X = _data(seed, n, dim)
    fast = Grinch(**params).fit(X[: n // 2]).partial_fit(X[n // 2 :])
    with pytest.MonkeyPatch.context() as mp:
        _fresh_paths(mp)
        fresh = Grinch(**params).fit(X[: n // 2]).partial_fit(X[n // 2 :])
    assert fast.stats_ == fresh.stats_
    for a, b in zip(_state(fast), _state(fresh), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("graft_from", ["leaf", "ancestors"])
def test_shortcuts_equal_fresh_paths_on_a_larger_tree(graft_from: str) -> None:
    """Hundreds of points: deep paths, kept paths gone stale, many swaps per restructure."""
    X = _data(7, 600, 3)
    params = {"graft_from": graft_from, "graft_candidates": 10}
    fast = Grinch(**params)
    with pytest.MonkeyPatch.context() as mp:
        _fresh_paths(mp)
        fresh = Grinch(**params)
        for lo in range(0, 600, 100):
            fresh.partial_fit(X[lo : lo + 100])
    for lo in range(0, 600, 100):
        fast.partial_fit(X[lo : lo + 100])
    assert fast.stats_ == fresh.stats_
    for a, b in zip(_state(fast), _state(fresh), strict=True):
        np.testing.assert_array_equal(a, b)
