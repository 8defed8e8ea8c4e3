"""Exact inference over every binary hierarchy of a small set: the cluster trellis.

Greenberg, Macaluso et al., "Exact inference in hierarchical clustering" (the trellis
paper, ``../shared/papers/exact-hierarchical-trellis.txt``). A hierarchy H of a set X
has energy E(H) = prod over its internal nodes of a split energy E(A, B) > 0 (§2), and
probability E(H) / Z(X). The trellis memoises one value per subset of X, so the
partition function, the MAP hierarchy, the marginal probability of any cluster and
exact samples cost O(3^n) time instead of a sum over (2n-3)!! hierarchies (§3,
Alg. 1-2, Fact 2, App. A.5).

Subsets are bitmasks ``0 .. 2^n - 1``; a subset's proper non-empty submasks are all
smaller integers, so one pass in increasing mask order sees every child before its
parent. Each unordered split {A, S \\ A} is counted once by keeping S's lowest element
in A (Alg. 1, "pick x_i in X"). Everything is in log space.

Memory: about (n + 7) * 8 * 2^n bytes (per-subset tables plus the n x 2^n row sums
behind the similarity energies): 0.6 MB at n = 12, 12 MB at n = 16, 57 MB at n = 18.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from er.cluster._hierarchy import Hierarchy
from er.exceptions import ConfigError

__all__ = [
    "ENERGIES",
    "Trellis",
    "TrellisMAP",
    "average_linkage",
    "build_trellis",
    "entity_confidence",
]

#: Log split energy: (A masks, B masks) -> log E(A, B), all arrays of shape (m,).
LogEnergy = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]]

ENERGIES = ("average", "dasgupta")
MAX_POINTS = 20  # 3^20 splits: minutes; the product uses <= 16


def _check_similarity(S: ArrayLike) -> NDArray[np.float64]:
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 1:
        raise ConfigError(f"The similarity matrix must be square (n, n). Got {S.shape}.")
    if S.shape[0] > MAX_POINTS:
        raise ConfigError(
            f"The trellis is exact and O(3^n): it takes at most {MAX_POINTS} points. "
            f"Got {S.shape[0]}."
        )
    if not np.all(np.isfinite(S)) or not np.allclose(S, S.T):
        raise ConfigError("The similarity matrix must be finite and symmetric.")
    return S


def _subset_sums(S: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Sum of pairwise similarity inside every subset, and every subset's size.

    Returns
    -------
    within : ndarray of float64, shape (2^n,)
        ``within[T]`` = sum of ``S[i, j]`` over pairs i < j in T.
    size : ndarray of int64, shape (2^n,)
    """
    n = S.shape[0]
    rows = np.zeros((n, 1 << n))  # rows[i, T] = sum_{j in T} S[i, j]
    within = np.zeros(1 << n)
    size = np.zeros(1 << n, dtype=np.int64)
    for b in range(n):
        lo, hi = 1 << b, 1 << (b + 1)
        # T in [2^b, 2^(b+1)) is T' + {b} with T' < 2^b: add b's contribution.
        within[lo:hi] = within[:lo] + rows[b, :lo]
        rows[:, lo:hi] = rows[:, :lo] + S[:, b : b + 1]
        size[lo:hi] = size[:lo] + 1
    return within, size


def similarity_energy(S: Any, energy: str = "average", beta: float = 1.0) -> LogEnergy:
    """A log split energy computed from a pairwise similarity matrix.

    Parameters
    ----------
    S : array-like of float, shape (n, n)
        Symmetric pairwise similarities (e.g. cosine).
    energy : {"average", "dasgupta"}
        ``average``: the Gibbs form of average linkage, E(A, B) = exp(beta * mean
        similarity across A x B) (the paper's footnote 2: exponentiate a real linkage).
        ``dasgupta``: E(A, B) = exp(-beta * |A u B| * sum of similarity across A x B),
        whose hierarchy energy is exp(-beta * Dasgupta's cost); the paper's PAM50
        experiment (App. A.6) uses this family of pairwise-weight objectives.
    beta : float
        Inverse temperature.
    """
    if energy not in ENERGIES:
        raise ConfigError(f"energy must be one of {ENERGIES}. Got {energy!r}.")
    within, size = _subset_sums(_check_similarity(S))

    def log_energy(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        cross: NDArray[np.float64] = within[a | b] - within[a] - within[b]
        if energy == "average":
            return beta * cross / (size[a] * size[b])
        dasgupta: NDArray[np.float64] = -beta * size[a | b] * cross
        return dasgupta

    return log_energy


def average_linkage(S: Any) -> LogEnergy:
    """Mean similarity across A x B for splits (A, B), vectorised over masks.

    The linkage the product's entity cut compares with its threshold (the score of a
    merge); :meth:`Trellis.together_at_cut` takes it as ``linkage``.
    """
    within, size = _subset_sums(_check_similarity(S))

    def linkage(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        cross: NDArray[np.float64] = within[a | b] - within[a] - within[b]
        return cross / (size[a] * size[b])

    return linkage


def _splits(s: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every unordered split {A, B} of mask ``s`` (|s| >= 2), A holding s's lowest bit."""
    low = s & -s
    rest = s ^ low
    subs = np.zeros(1, dtype=np.int64)
    bits = rest
    while bits:
        bit = bits & -bits
        subs = np.concatenate([subs, subs + bit])
        bits ^= bit
    a = low | subs[:-1]  # the last submask is all of rest: B would be empty
    return a, s ^ a


@dataclass(frozen=True)
class Trellis:
    """Partition functions and MAP values of every subset of ``n`` items.

    Attributes
    ----------
    n : int
    log_z : ndarray of float64, shape (2^n,)
        ``log Z(T)`` for every subset mask T (0 for singletons; -inf for the empty set).
    log_map : ndarray of float64, shape (2^n,)
        Log energy of the best hierarchy of each subset (Fact 2).
    map_left : ndarray of int64, shape (2^n,)
        The child holding the lowest element in that best hierarchy's root split.
    log_energy : callable
        The split energy it was built with.
    """

    n: int
    log_z: NDArray[np.float64]
    log_map: NDArray[np.float64]
    map_left: NDArray[np.int64]
    log_energy: LogEnergy

    @property
    def full(self) -> int:
        return (1 << self.n) - 1

    @property
    def log_partition(self) -> float:
        """log Z(X), the log of the sum of every hierarchy's energy."""
        return float(self.log_z[self.full])

    def map_clusters(self) -> list[int]:
        """Clusters (masks) of the MAP hierarchy, root first, singletons included."""
        out, stack = [], [self.full]
        while stack:
            s = stack.pop()
            out.append(s)
            if s & (s - 1):
                a = int(self.map_left[s])
                stack += [s ^ a, a]
        return out

    def log_outside(self) -> NDArray[np.float64]:
        """log of the summed energy of everything outside each subset's sub-hierarchy.

        ``out[T] * Z(T)`` is the total energy of the hierarchies holding cluster T; one
        top-down pass over the same splits as the partition function.
        """
        out = np.full(1 << self.n, -np.inf)
        out[self.full] = 0.0
        for s in range(self.full, 0, -1):
            if not np.isfinite(out[s]) or not s & (s - 1):
                continue
            a, b = _splits(s)
            t = out[s] + self.log_energy(a, b)
            np.logaddexp.at(out, a, t + self.log_z[b])
            np.logaddexp.at(out, b, t + self.log_z[a])
        return out

    def cluster_marginal(self, members: Any, log_out: NDArray[np.float64] | None = None) -> float:
        """P(the items ``members`` form a cluster of the hierarchy) under E(H) / Z."""
        mask = _mask(members, self.n)
        out = self.log_outside() if log_out is None else log_out
        return float(np.exp(self.log_z[mask] + out[mask] - self.log_partition))

    def lca_within(
        self, i: int, j: int, within: Any, log_out: NDArray[np.float64] | None = None
    ) -> float:
        """P(the lowest common ancestor of items i and j lies inside ``within``).

        Each hierarchy has exactly one LCA of i and j, so this sums, over clusters C
        with i, j in C and C a subset of ``within``, the probability that C is in H
        and splits i from j.
        """
        top = _mask(within, self.n)
        bit_i, bit_j = 1 << int(i), 1 << int(j)
        if i == j or not (top & bit_i and top & bit_j):
            raise ConfigError("lca_within takes two different items inside `within`.")
        out = self.log_outside() if log_out is None else log_out
        total = -np.inf
        for c in _supersets_within(bit_i | bit_j, top):
            a, b = _splits(c)
            apart = ((a & bit_i) > 0) != ((a & bit_j) > 0)
            if np.any(apart) and np.isfinite(out[c]):
                terms = self.log_energy(a[apart], b[apart]) + self.log_z[a[apart]]
                total = np.logaddexp(
                    total, out[c] + np.logaddexp.reduce(terms + self.log_z[b[apart]])
                )
        return float(np.exp(total - self.log_partition))

    def together_below_root(self, i: int, j: int) -> float:
        """P(items i and j share a cluster other than the root), i.e. 1 - P(the root's
        split separates them): they merge before the whole set does."""
        if i == j:
            raise ConfigError("together_below_root takes two different items.")
        a, b = _splits(self.full)
        bit_i, bit_j = 1 << int(i), 1 << int(j)
        apart = ((a & bit_i) > 0) != ((a & bit_j) > 0)
        terms = self.log_energy(a[apart], b[apart]) + self.log_z[a[apart]] + self.log_z[b[apart]]
        return float(1.0 - np.exp(np.logaddexp.reduce(terms) - self.log_partition))

    def together_at_cut(
        self,
        linkage: LogEnergy,
        cut: float,
        log_out: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """P(items i and j are in one entity when the hierarchy is cut at ``cut``).

        The product's entity of an item is its highest ancestor reached through merges
        whose linkage is >= the cut (``er.evaluation.cut_at_score``), so i and j share
        one exactly when every merge from i up to their lowest common ancestor, and
        from j up to it, has linkage >= cut. With G_i(T), the energy of the
        sub-hierarchies of T in which every merge above i passes the cut,

            G_i({i}) = 1,
            G_i(T) = sum over splits (A, B) of T, linkage(A, B) >= cut, of
                     E(A, B) [G_i(A) Z(B) if i in A else Z(A) G_i(B)],

        the event's probability sums, over clusters C and passing splits (A, B) of C
        with i in A and j in B, out(C) E(A, B) G_i(A) G_j(B) / Z. Time O(n 3^n),
        memory O(n 2^n).

        Returns
        -------
        ndarray of float64, shape (n, n)
            Symmetric; 1 on the diagonal.
        """
        n, log_z = self.n, self.log_z
        out = self.log_outside() if log_out is None else log_out
        good = np.full((n, 1 << n), -np.inf)  # log G_i(T)
        good[np.arange(n), 1 << np.arange(n)] = 0.0
        items = np.arange(n)[:, None]
        pair = np.zeros((n, n))
        for s in range(3, 1 << n):
            if not s & (s - 1):
                continue
            a, b = _splits(s)
            keep = linkage(a, b) >= cut
            if not keep.any():
                continue
            a, b = a[keep], b[keep]
            e = self.log_energy(a, b)
            in_a = ((a[None, :] >> items) & 1).astype(bool)  # (n, m): item i in A
            terms = e + np.where(in_a, good[:, a] + log_z[b], log_z[a] + good[:, b])
            good[:, s] = np.logaddexp.reduce(terms, axis=1)
            if np.isfinite(out[s]):
                pair += self._cross(out[s] + e - self.log_partition, good[:, a], good[:, b])
        pair = pair + pair.T
        np.fill_diagonal(pair, 1.0)
        return np.minimum(pair, 1.0)

    @staticmethod
    def _cross(
        w: NDArray[np.float64], ga: NDArray[np.float64], gb: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """sum_k exp(w_k + ga[i, k] + gb[j, k]) for every (i, j), without overflow.

        ``ga``/``gb`` are -inf for items outside A/B, so only i in A, j in B count.
        """
        sa = ga.max(axis=0)
        sb = gb.max(axis=0)
        ok = np.isfinite(sa) & np.isfinite(sb)
        if not ok.any():
            return np.zeros((ga.shape[0], ga.shape[0]))
        ea = np.exp(ga[:, ok] - sa[ok])
        eb = np.exp(gb[:, ok] - sb[ok])
        cross: NDArray[np.float64] = (ea * np.exp(w[ok] + sa[ok] + sb[ok])) @ eb.T
        return cross

    def sample(self, rng: np.random.Generator) -> list[int]:
        """One hierarchy drawn with probability E(H) / Z (Alg. 2); its cluster masks."""
        out, stack = [], [self.full]
        while stack:
            s = stack.pop()
            out.append(s)
            if s & (s - 1):
                a, b = _splits(s)
                w = self.log_energy(a, b) + self.log_z[a] + self.log_z[b] - self.log_z[s]
                p = np.exp(w - np.logaddexp.reduce(w))
                k = rng.choice(a.shape[0], p=p / p.sum())
                stack += [int(b[k]), int(a[k])]
        return out

    def energy_of(self, clusters: list[int]) -> float:
        """log E(H) of a hierarchy given as its cluster masks (any order)."""
        present = set(clusters)
        total = 0.0
        for s in clusters:
            if s & (s - 1):
                a = _left_child(s, present)
                total += float(self.log_energy(np.array([a]), np.array([s ^ a]))[0])
        return total


def _left_child(s: int, present: set[int]) -> int:
    """The child of cluster ``s`` holding its lowest element, among ``present``."""
    low = s & -s
    best = low
    for c in present:
        if c != s and c & low and c & s == c and c.bit_count() > best.bit_count():
            best = c
    return best


def _mask(members: Any, n: int) -> int:
    idx = np.unique(np.asarray(members, dtype=np.int64).ravel())
    if idx.size == 0 or idx[0] < 0 or idx[-1] >= n:
        raise ConfigError(f"members must be item indices in [0, {n}). Got {idx.tolist()}.")
    return int(np.bitwise_or.reduce(np.left_shift(1, idx)))


def _supersets_within(base: int, top: int) -> list[int]:
    """Masks C with base <= C <= top (as sets)."""
    free = top ^ base
    subs = [0]
    while free:
        bit = free & -free
        subs += [x | bit for x in subs]
        free ^= bit
    return [base | x for x in subs]


def build_trellis(
    S: Any = None,
    *,
    energy: str | LogEnergy = "average",
    beta: float = 1.0,
    n: int | None = None,
) -> Trellis:
    """Fill the trellis bottom-up: log Z and the MAP value of every subset.

    Parameters
    ----------
    S : array-like of float, shape (n, n), optional
        Pairwise similarities; needed when ``energy`` is a name.
    energy : {"average", "dasgupta"} or callable
        A named similarity energy (:func:`similarity_energy`) or a vectorised log
        split energy ``f(A masks, B masks) -> log E`` for ``n`` items.
    beta : float, default 1.0
        Inverse temperature of a named energy.
    n : int, optional
        Number of items, when ``energy`` is a callable.

    Returns
    -------
    Trellis

    Notes
    -----
    Time O(3^n): subset T of size k has 2^(k-1) - 1 splits, and sum_k C(n, k) 2^(k-1)
    is about 3^n / 2 (App. A.5). Memory O(2^n).
    """
    if callable(energy):
        if n is None:
            raise ConfigError("build_trellis needs n= with a callable energy.")
        log_energy = energy
    else:
        log_energy = similarity_energy(S, energy, beta)
        n = np.asarray(S).shape[0]
    if not 1 <= n <= MAX_POINTS:
        raise ConfigError(f"The trellis takes 1 to {MAX_POINTS} items. Got {n}.")
    size = 1 << n
    log_z = np.full(size, -np.inf)
    log_map = np.full(size, -np.inf)
    map_left = np.zeros(size, dtype=np.int64)
    singles = 1 << np.arange(n)
    log_z[singles] = log_map[singles] = 0.0
    map_left[singles] = singles
    for s in range(3, size):
        if not s & (s - 1):
            continue
        a, b = _splits(s)
        e = log_energy(a, b)
        log_z[s] = np.logaddexp.reduce(e + log_z[a] + log_z[b])  # Alg. 1
        m = e + log_map[a] + log_map[b]  # Fact 2; ties to the smallest A mask
        k = int(np.argmax(m))
        log_map[s], map_left[s] = m[k], a[k]
    return Trellis(n, log_z, log_map, map_left, log_energy)


class TrellisMAP:
    """The MAP binary hierarchy of a small point set, found exactly by the trellis.

    Parameters
    ----------
    energy : {"average", "dasgupta"}, default "average"
        Split energy over cosine similarities (:func:`similarity_energy`).
    beta : float, default 1.0
    max_points : int, default 16
        Larger inputs are refused: the trellis takes O(3^n) time.

    Attributes
    ----------
    hierarchy_ : Hierarchy
        Points ``0..n-1``, clusters ``n..2n-2`` bottom-up; ``score`` is the average
        cosine similarity across the two children; levels are heights.
    delta_ : ClusteringDelta
    log_partition_ : float
    log_map_energy_ : float
    """

    def __init__(self, *, energy: str = "average", beta: float = 1.0, max_points: int = 16):
        self.energy = energy
        self.beta = beta
        self.max_points = max_points

    def fit(self, X: Any) -> TrellisMAP:
        """Find the MAP hierarchy of the rows of ``X`` (float, shape (n, d))."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or not 1 <= X.shape[0] <= self.max_points:
            raise ConfigError(
                f"trellis-map is exact and O(3^n): it takes 1 to {self.max_points} points "
                f"(max_points). Got {X.shape[0] if X.ndim == 2 else X.shape} points."
            )
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        U = X / np.where(norms > 0, norms, 1.0)
        S = U @ U.T
        trellis = build_trellis(S, energy=self.energy, beta=self.beta)
        self.hierarchy_ = _to_hierarchy(trellis.map_clusters(), S, self._params())
        self.delta_ = self.hierarchy_.to_delta()
        self.log_partition_ = trellis.log_partition
        self.log_map_energy_ = float(trellis.log_map[trellis.full])
        return self

    def _params(self) -> dict[str, Any]:
        return {"energy": self.energy, "beta": self.beta, "max_points": self.max_points}


def _to_hierarchy(clusters: list[int], S: NDArray[np.float64], params: dict[str, Any]) -> Hierarchy:
    """Number a tree given as cluster masks: points first, clusters bottom-up."""
    n = S.shape[0]
    internal = sorted((c for c in clusters if c & (c - 1)), key=lambda c: (c.bit_count(), c))
    node = {1 << i: i for i in range(n)} | {c: n + k for k, c in enumerate(internal)}
    present = set(clusters)
    edges, score = [], np.full(n + len(internal), np.nan)
    height = np.zeros(n + len(internal), dtype=np.int32)
    for c in internal:
        a = _left_child(c, present)
        for child in (a, c ^ a):
            edges.append((node[child], node[c]))
        ia, ib = _members(a), _members(c ^ a)
        score[node[c]] = S[np.ix_(ia, ib)].mean()
        height[node[c]] = 1 + max(height[node[a]], height[node[c ^ a]])
    return Hierarchy(n, np.array(edges), score, height, height, "trellis-map", params)


def _members(mask: int) -> NDArray[np.int64]:
    return np.flatnonzero([(mask >> i) & 1 for i in range(mask.bit_length())])


def entity_confidence(
    X: Any,
    members: Any,
    *,
    cut: float,
    limit: int = 12,
    context: int = 4,
    beta: float = 10.0,
    similarity: Callable[[NDArray[np.int64]], NDArray[np.float64]] | None = None,
) -> dict[str, Any] | None:
    """Exact confidence of one entity: the trellis over it and its nearest outsiders.

    The trellis covers the entity's mentions plus up to ``context`` nearest outside
    mentions (by their best cosine to a member), at most ``limit`` items, with the
    average-linkage Gibbs energy exp(beta * mean cosine) (trellis paper, footnote 2).
    ``cut`` is the collection's entity cut (average linkage of a merge >= cut).

    Parameters
    ----------
    X : ndarray of float, shape (n, d)
        Unit rows of every mention of the collection.
    members : array-like of int, shape (m,)
        Rows of the entity's mentions.
    similarity : callable, optional
        ``similarity(rows)`` -> (r, r) pairwise similarities of those rows, used for the
        energy and the cut in place of the cosine (a pair model's match probabilities);
        the outsiders are still the nearest by cosine.

    Returns
    -------
    dict or None
        ``members`` and ``context`` (row lists), ``p_entity`` (the marginal probability
        that exactly the members form a cluster) and ``pairs``: ``(a, b, p)`` for every
        two items, p = P(the cut puts a and b in one entity), the same event the
        product's entities are made of (:meth:`Trellis.together_at_cut`). None when
        the entity has more than ``limit`` mentions: no made-up number.
    """
    X = np.asarray(X, dtype=np.float64)
    members = np.asarray(members, dtype=np.int64)
    if members.size > limit:
        return None
    outside = np.setdiff1d(np.arange(X.shape[0]), members)
    room = max(0, min(context, limit - members.size, outside.size))
    near = np.zeros(0, np.int64)
    if room:
        best = (X[outside] @ X[members].T).max(axis=1)
        near = outside[np.argsort(-best, kind="stable")[:room]]
    items = np.concatenate([members, near])
    if items.size < 2:
        return {"members": members.tolist(), "context": [], "p_entity": 1.0, "pairs": []}
    S = X[items] @ X[items].T if similarity is None else similarity(items)
    trellis = build_trellis(S, energy="average", beta=beta)
    log_out = trellis.log_outside()
    p_entity = trellis.cluster_marginal(np.arange(members.size), log_out)
    together = trellis.together_at_cut(average_linkage(S), cut, log_out)
    pairs = [
        (int(items[a]), int(items[b]), float(together[a, b]))
        for a in range(items.size)
        for b in range(a + 1, items.size)
    ]
    return {
        "members": members.tolist(),
        "context": near.tolist(),
        "p_entity": p_entity,
        "pairs": pairs,
    }
