"""Every GRINCH graft and restructure swap raises the linkage of the node it changes.

Dissertation §3.3: a graft of L next to V happens only if
f(V, L) > max[f(V, sib(V)), f(L, sib(L))] (Eq. 3.5), so the new parent's linkage beats
both linkages the graft breaks; a restructure swap (Alg. 7, line 5) gives Z the aunt M
only if f(Z, M) > f(Z, sib(Z)). The oracle recomputes each linkage from the points
under the nodes (the cosine of the two centroids of unit vectors), not from the sums
the tree maintains, so a stale sum or a wrong node would show.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.cluster import Grinch

from .._trees import leaves_under


def _points(g: Grinch, v: int) -> list[int]:
    """Point indices under tree node v, by walking the children."""
    t, out, stack = g._tree, [], [v]
    while stack:
        u = stack.pop()
        if t.kids[u, 0] < 0:
            out.append(int(t.point_of[u]))
        else:
            stack.extend(int(c) for c in t.kids[u])
    return out


def _linkage(g: Grinch, a: int, b: int) -> float:
    """Centroid cosine of two nodes, from their points (rows already unit length)."""
    X = np.asarray(g._points)
    ca, cb = X[_points(g, a)].sum(axis=0), X[_points(g, b)].sum(axis=0)
    den = np.linalg.norm(ca) * np.linalg.norm(cb)
    return float(ca @ cb / den) if den > 0 else 0.0


def _sib(g: Grinch, v: int) -> int:
    return g._tree.sib(v)


class _Recording(Grinch):
    """Grinch that checks each graft and swap against the oracle as it happens."""

    def _apply_graft(self, v: int, l: int, paths: tuple) -> int:  # noqa: E741
        before = max(_linkage(self, v, _sib(self, v)), _linkage(self, l, _sib(self, l)))
        z = super()._apply_graft(v, l, paths)
        assert _sib(self, v) == l  # l now sits next to v
        after = _linkage(self, v, l)
        self.moves.append(("graft", before, after))
        return z

    def _apply_swap(self, s: int, m: int) -> None:
        z = _sib(self, s)
        before = _linkage(self, z, s)
        super()._apply_swap(s, m)
        assert _sib(self, z) == m  # z's new sibling is the aunt
        self.moves.append(("swap", before, _linkage(self, z, m)))


def _data(seed: int, n: int, dim: int, kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        return rng.normal(size=(n, dim))
    if kind == "mixture":  # overlapping clusters: grafts and swaps happen often
        centres = rng.normal(size=(max(n // 5, 1), dim))
        return centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.8, size=(n, dim))
    return (rng.random((n, dim)) < 0.3).astype(float)  # sparse-ish binary, many ties


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 45),
    dim=st.integers(2, 8),
    kind=st.sampled_from(["gauss", "mixture", "binary"]),
    graft_from=st.sampled_from(["leaf", "ancestors"]),
    single_elimination=st.booleans(),
    graft_candidates=st.sampled_from([None, 3]),
)
def test_every_graft_and_swap_raises_the_linkage(
    seed: int,
    n: int,
    dim: int,
    kind: str,
    graft_from: str,
    single_elimination: bool,
    graft_candidates: int | None,
) -> None:
    g = _Recording(
        graft_from=graft_from,
        single_elimination=single_elimination,
        graft_candidates=graft_candidates,
    )
    g.moves = []
    X = _data(seed, n, dim, kind)
    g.fit(X[: n // 2]).partial_fit(X[n // 2 :])
    for kind_, before, after in g.moves:
        assert after > before - 1e-9, (kind_, before, after)
    # the recorded moves are the ones the estimator counts
    assert sum(m[0] == "graft" for m in g.moves) == g.stats_["grafts"]
    assert sum(m[0] == "swap" for m in g.moves) == g.stats_["restructures"]
    assert set().union(*leaves_under(g.hierarchy_)) == set(range(n))


def test_moves_happen_on_the_strategy_data() -> None:
    """The property above is not vacuous: its data makes both kinds of move."""
    g = _Recording(graft_from="ancestors")
    g.moves = []
    g.fit(_data(1, 45, 4, "mixture"))
    kinds = {m[0] for m in g.moves}
    assert kinds == {"graft", "swap"}
