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
