"""Random trees and brute-force oracles for tests."""

from __future__ import annotations

import itertools

import numpy as np

from er.cluster import Hierarchy


def random_tree(n: int, rng: np.random.Generator, max_arity: int = 3) -> Hierarchy:
    """A random tree over n leaves built by merging random groups of current roots."""
    current = list(range(n))
    edges, next_id = [], n
    while len(current) > 1:
        k = int(rng.integers(2, min(max_arity, len(current)) + 1))
        pick = sorted(rng.choice(len(current), size=k, replace=False).tolist(), reverse=True)
        for i in pick:
            edges.append((current.pop(i), next_id))
        current.append(next_id)
        next_id += 1
    m = next_id
    return Hierarchy(
        n,
        np.array(edges).reshape(-1, 2),
        np.r_[np.full(n, np.nan), np.zeros(m - n)],
        np.zeros(m),
        np.zeros(m),
    )


def leaves_under(h: Hierarchy) -> list[set[int]]:
    children: dict[int, list[int]] = {}
    for c, p in h.edges.tolist():
        children.setdefault(p, []).append(c)
    memo: dict[int, set[int]] = {}

    def go(v: int) -> set[int]:
        if v not in memo:
            memo[v] = {v} if v < h.n_points else set().union(*(go(c) for c in children.get(v, [])))
        return memo[v]

    return [go(v) for v in range(h.n_nodes)]


def brute_dendrogram_purity(h: Hierarchy, y: np.ndarray) -> float:
    sets = leaves_under(h)
    total, acc = 0, 0.0
    for i, j in itertools.combinations(range(h.n_points), 2):
        if y[i] != y[j]:
            continue
        total += 1
        lca = min((s for s in sets if i in s and j in s), key=len)
        acc += sum(y[x] == y[i] for x in lca) / len(lca)
    return acc / total if total else 1.0


def check_structure(h: Hierarchy) -> None:
    """Invariants of every tree: one root, acyclic, sizes from leaves, levels nest."""
    assert h.is_tree
    assert len(h.roots()) == 1
    h.topological_levels()  # raises on a cycle
    sets = leaves_under(h)
    np.testing.assert_array_equal(h.sizes(), [len(s) for s in sets])
    assert sets[h.roots()[0]] == set(range(h.n_points))
    previous = None
    for level in range(int(h.level_hi.max()) + 1):
        labels = h.cut(level)
        for v in np.unique(labels):  # each block of the level is a node's leaf set
            assert set(np.flatnonzero(labels == v).tolist()) == sets[v]
        if previous is not None:  # levels nest: a block never splits going up
            for v in np.unique(previous):
                assert np.unique(labels[previous == v]).size == 1
        previous = labels
