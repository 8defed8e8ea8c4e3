"""gHHC: hierarchical clustering by SGD on internal-node embeddings in the Poincaré ball.

A fixed number m of internal nodes live in the Poincaré ball; the points, centred and
unit-normed, sit near its rim. Mini-batches of triples (i, j close, k farther) move the
nodes by Riemannian SGD on the triplet LCA objective (Eq. 15), alternating with the
child-parent margin objective (Eq. 17); the tree is decoded at the end (Eq. 4).
Geometry and gradients: :mod:`er.cluster._poincare`; initialisation and decoding:
:mod:`er.cluster._ghhc_tree`.

Where the paper and the authors' TensorFlow code differ, this follows the code for
what produced the paper's numbers (softplus link, margin gamma inside the objective's
d_cp, nodes clipped to norm 0.8 and points to 0.9, 5,000-triple episodes, 100
parent-term steps after every 10 triple batches) and the paper where the code departs
from its own description (fresh triples each epoch; the code's loop never advances
past the first episode).

References
----------
Monath, Zaheer, Silva, McCallum, Ahmed, "Gradient-based Hierarchical Clustering using
Continuous Representations of Trees in Hyperbolic Space", KDD 2019.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from er.cluster._ghhc_tree import decode, init_nodes, node_parents
from er.cluster._graph import top_k
from er.cluster._params import NONE, Interval, Options, get_params, validate_params
from er.cluster._poincare import TripletBatch, parent_loss, project, rsgd_step, triplet_loss
from er.delta import ClusteringDelta
from er.exceptions import ConfigError

__all__ = ["GHHC", "sample_triplets"]


def _anchor_neighbours(
    Xn: NDArray[np.float64], anchors: NDArray[np.int64], k: int, block_size: int = 128
) -> NDArray[np.int64]:
    """Exact k nearest neighbours (cosine) of the anchor rows only: O(block_size * n) memory.

    Returns
    -------
    ndarray of int64, shape (len(anchors), k)
    """
    out = np.empty((anchors.size, k), np.int64)
    for start in range(0, anchors.size, block_size):
        rows = anchors[start : start + block_size]
        S = Xn[rows] @ Xn.T
        S[np.arange(rows.size), rows] = -np.inf
        out[start : start + block_size] = top_k(S, k)
    return out


def _distinct_third(
    first: NDArray[np.int64], second: NDArray[np.int64], n: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """A uniformly random index different from ``first`` and ``second`` (row-wise)."""
    third = rng.integers(n, size=first.size)
    clash = (third == first) | (third == second)
    while clash.any():
        third[clash] = rng.integers(n, size=int(clash.sum()))
        clash = (third == first) | (third == second)
    return third


def sample_triplets(
    X: NDArray[np.float64], size: int, k: int, random_fraction: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Triples (i, j, k) ordered so that (i, j) is the closest of the three pairs (§4.2).

    Most triples take j among the k nearest neighbours of a random anchor i and the
    third point at random; a ``random_fraction`` of them are three random points.

    Parameters
    ----------
    X : ndarray of shape (n, d), n >= 3
    size : int
    k : int
        Neighbours per anchor (capped at n - 1).

    Returns
    -------
    ndarray of int64, shape (size, 3)
    """
    n = X.shape[0]
    i = rng.integers(n, size=size)
    is_random = rng.random(size) < random_fraction
    j = np.empty(size, np.int64)
    j[is_random] = _distinct_third(i[is_random], i[is_random], n, rng)
    nn_rows = np.flatnonzero(~is_random)
    kk = min(k, n - 1)
    nbrs = _anchor_neighbours(X / np.linalg.norm(X, axis=1, keepdims=True), i[nn_rows], kk)
    j[nn_rows] = nbrs[np.arange(nn_rows.size), rng.integers(kk, size=nn_rows.size)]
    third = _distinct_third(i, j, n, rng)
    return _closest_pair_first(X, np.stack([i, j, third], axis=1))


def _closest_pair_first(X: NDArray[np.float64], T: NDArray[np.int64]) -> NDArray[np.int64]:
    """Reorder each triple so that its closest pair (Euclidean; ties: ij, jk, ik) leads."""
    a, b, c = (X[T[:, t]] for t in range(3))
    d_ab = ((a - b) ** 2).sum(axis=1)
    d_bc = ((b - c) ** 2).sum(axis=1)
    d_ac = ((a - c) ** 2).sum(axis=1)
    best = np.argmin(np.stack([d_ab, d_bc, d_ac], axis=1), axis=1)
    layouts = np.array([[0, 1, 2], [1, 2, 0], [0, 2, 1]])
    return np.take_along_axis(T, layouts[best], axis=1)


class GHHC:
    """Gradient-based hyperbolic hierarchical clustering (gHHC).

    Parameters
    ----------
    n_internal : int, default 64
        Internal nodes m (the paper: 64 on its small sets, 5k-40k on large ones).
    n_epochs : int, default 10
        Epochs of ``fit``; each samples ``epoch_size`` fresh triples.
    epoch_size : int, default 5000
        Triples per epoch (the code's episode).
    batch_size : int, default 100
        Triples per SGD step (the loss is their sum, as in the code).
    learning_rate : float, default 0.01
    gamma : float, default 0.5
        Norm margin of the child-parent dissimilarity (Eq. 16) in the objectives; the
        decoding (Eq. 4) uses Eq. 3, without it.
    max_norm : float, default 0.8
        Nodes are projected back onto this radius after every step (Eq. 19 with the
        authors' radius); must stay below ``point_norm``.
    point_norm : float, default 0.9
        Norm of every (centred, unit-normed) point.
    n_neighbors : int, default 5
        k of the k-NN triple sampling.
    random_fraction : float, default 0.1
        Share of fully random triples.
    init : {"random", "kmeans++"}, default "random"
        How the HAC seed leaves are picked (§4.2).
    init_scale : float, default 0.8
    loss : {"softplus", "sigmoid"}, default "softplus"
        Link of the triplet terms: the code's (softplus) or the paper's Eq. 15.
    parent_term : {"norms", "paper"} or None, default "norms"
        Child-parent objective alternated with the triples: the code's norm margin,
        the paper's full Eq. 17, or none.
    parent_every, parent_steps : int, default 10, 100
        After every ``parent_every`` triple batches, ``parent_steps`` steps on it.
    noise : bool, default True
        Gumbel noise on the LCA distances (§4.2).
    leaf_tree : {"star", "hac"}, default "star"
        How the points that chose one internal node hang below it: the paper's flat
        star (§4.2) or er's average-linkage sub-tree over them (blocks of at most
        1,000 points, split by 2-means above that); see bench/RESULTS.md, gHHC.
    random_state : int, default 0
        Seed of everything random: same seed, same tree.
    on_epoch : callable or None
        ``on_epoch(epoch, n_epochs, loss)`` after each epoch (progress reporting);
        not a hyper-parameter.

    Attributes
    ----------
    nodes_ : ndarray of shape (n_internal, d)
        The node embeddings.
    hierarchy_ : Hierarchy
        The decoded tree over every point seen.
    delta_ : ClusteringDelta
        Changes made by the last call, in stable delta ids.
    leaf_ids_ : ndarray of int64, shape (n_points,)
        The delta id of each point (equal to its index after ``fit``).
    mean_ : ndarray of shape (d,)
        Centre taken from the first batch.
    loss_ : list of float
        Mean triplet loss per epoch.

    Notes
    -----
    Time per SGD step O(batch_size * n_internal * d); per epoch add the triples'
    exact neighbours, O(epoch_size * n * d), and the node tree, O(n_internal^2 d).
    Decoding is O(n * n_internal * d). Memory: the points, O(n d), plus blocks of
    128 x n and 1024 x n_internal; never n x n.

    Quality depends mostly on nodes per cluster (bench/RESULTS.md, gHHC section):
    with the paper's 64 nodes on a 200-point digits sample DP is 0.48 (paper: 0.675),
    with 400 nodes 0.67. On a 64-d mixture of 10-point clusters the embeddings send
    most points to a few nodes near the origin, and the paper's star below each node
    gives DP 0.006 at 20k points; ``leaf_tree="hac"`` gives 0.126 (HAC: 0.87).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.r_[np.eye(3) * 5, np.eye(3) * 5 + 0.1]
    >>> h = GHHC(n_internal=8, epoch_size=50, random_state=0).fit(X).hierarchy_
    >>> h.n_points, len(h.roots())
    (6, 1)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_internal": [Interval(int, 2, None)],
        "n_epochs": [Interval(int, 1, None)],
        "epoch_size": [Interval(int, 1, None)],
        "batch_size": [Interval(int, 1, None)],
        "learning_rate": [Interval(float, 0.0, None)],
        "gamma": [Interval(float, 0.0, None)],
        "max_norm": [Interval(float, 0.0, 0.999)],
        "point_norm": [Interval(float, 0.0, 0.9999)],
        "n_neighbors": [Interval(int, 1, None)],
        "random_fraction": [Interval(float, 0.0, 1.0)],
        "init": [Options(("random", "kmeans++"))],
        "init_scale": [Interval(float, 0.0, 1.0)],
        "loss": [Options(("softplus", "sigmoid"))],
        "parent_term": [Options(("norms", "paper")), NONE],
        "parent_every": [Interval(int, 1, None)],
        "parent_steps": [Interval(int, 0, None)],
        "noise": [Options((True, False))],
        "leaf_tree": [Options(("star", "hac"))],
        "random_state": [Interval(int, 0, None)],
    }
    algorithm = "ghhc"

    def __init__(
        self,
        *,
        n_internal: int = 64,
        n_epochs: int = 10,
        epoch_size: int = 5000,
        batch_size: int = 100,
        learning_rate: float = 0.01,
        gamma: float = 0.5,
        max_norm: float = 0.8,
        point_norm: float = 0.9,
        n_neighbors: int = 5,
        random_fraction: float = 0.1,
        init: str = "random",
        init_scale: float = 0.8,
        loss: str = "softplus",
        parent_term: str | None = "norms",
        parent_every: int = 10,
        parent_steps: int = 100,
        noise: bool = True,
        leaf_tree: str = "star",
        random_state: int = 0,
        on_epoch: Callable[[int, int, float], None] | None = None,
    ) -> None:
        self.n_internal = n_internal
        self.n_epochs = n_epochs
        self.epoch_size = epoch_size
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.gamma = gamma
        self.max_norm = max_norm
        self.point_norm = point_norm
        self.n_neighbors = n_neighbors
        self.random_fraction = random_fraction
        self.init = init
        self.init_scale = init_scale
        self.loss = loss
        self.parent_term = parent_term
        self.parent_every = parent_every
        self.parent_steps = parent_steps
        self.noise = noise
        self.leaf_tree = leaf_tree
        self.random_state = random_state
        self.on_epoch = on_epoch

    # -- public API -------------------------------------------------------------------------
    def fit(self, X: Any) -> GHHC:
        """Initialise from X, run ``n_epochs`` epochs of triples from X, decode the tree.

        Parameters
        ----------
        X : ndarray of shape (n, d)
        """
        return self._fit(X, partial=False)

    def partial_fit(self, X: Any) -> GHHC:
        """One epoch of triples drawn from the batch X; the tree covers every point seen.

        The first call initialises the nodes (and the centre) from its batch.
        """
        return self._fit(X, partial=True)

    def _fit(self, X: Any, partial: bool) -> GHHC:
        validate_params(self)
        if self.max_norm >= self.point_norm:
            raise ConfigError(
                f"The 'max_norm' parameter of GHHC ({self.max_norm}) must be below "
                f"'point_norm' ({self.point_norm}): points must lie beyond every node."
            )
        X = self._check_X(X)
        first_call = not partial or not hasattr(self, "nodes_")
        if first_call:
            self._rng = np.random.default_rng(self.random_state)
            self.mean_: NDArray[np.float64] = X.mean(axis=0)
            self._points = np.zeros((0, X.shape[1]))
            self.loss_: list[float] = []
            self.leaf_ids_ = np.zeros(0, np.int64)  # delta id of each point
            self._stored = (np.zeros(0, np.int64), np.zeros((0, 2), np.int64), 0)
        elif X.shape[1] != self.mean_.shape[0]:
            raise ConfigError(
                f"X has {X.shape[1]} columns; this GHHC was fitted on {self.mean_.shape[0]}."
            )
        P = self._to_ball(X)
        if first_call:
            Z = init_nodes(P, self.n_internal, self.init, self.init_scale, self._rng)
            self.nodes_ = project(Z, self.max_norm)
        for epoch in range(1 if partial else self.n_epochs):
            self.loss_.append(self._epoch(P))
            if self.on_epoch is not None:
                self.on_epoch(epoch + 1, 1 if partial else self.n_epochs, self.loss_[-1])
        self._points = np.vstack([self._points, P]) if partial else P
        # Eq. 4 decodes with the plain d_cp of Eq. 3: the margin gamma (Eq. 16) belongs
        # to the objectives (§3.3), not to the extraction of the tree
        self.hierarchy_ = decode(self._points, self.nodes_, 0.0, get_params(self), self.leaf_tree)
        self.delta_ = self._delta()
        return self

    # -- steps ------------------------------------------------------------------------------
    def _check_X(self, X: Any) -> NDArray[np.float64]:
        A = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
        if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
            raise ConfigError(f"GHHC needs X of shape (n, d) with n, d >= 1. Got {A.shape}.")
        if not np.all(np.isfinite(A)):
            raise ConfigError("GHHC: X has a non-finite value.")
        return A

    def _to_ball(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Centre, unit-norm and scale to ``point_norm`` (§3.1; the code's 0.9 clip).

        A row equal to the centre stays at the origin.
        """
        C = X - self.mean_
        norms: NDArray[np.float64] = np.linalg.norm(C, axis=1, keepdims=True)
        return self.point_norm * C / np.where(norms > 0, norms, 1.0)

    def _epoch(self, P: NDArray[np.float64]) -> float:
        """``epoch_size`` triples from P in mini-batches; returns the mean loss per triple."""
        if P.shape[0] < 3:
            return 0.0
        T = sample_triplets(P, self.epoch_size, self.n_neighbors, self.random_fraction, self._rng)
        pairs = self._node_pairs()
        total = 0.0
        for b, start in enumerate(range(0, T.shape[0], self.batch_size)):
            rows = T[start : start + self.batch_size]
            value, grad = triplet_loss(self.nodes_, self._batch(P, rows), self.gamma, self.loss)
            total += value
            self.nodes_ = rsgd_step(self.nodes_, grad, self.learning_rate, self.max_norm)
            if self.parent_term is not None and (b + 1) % self.parent_every == 0:
                for _ in range(self.parent_steps):
                    _, g = parent_loss(self.nodes_, pairs, self.gamma, self.parent_term)
                    self.nodes_ = rsgd_step(self.nodes_, g, self.learning_rate, self.max_norm)
        n_triples: int = T.shape[0]
        return total / n_triples

    def _node_pairs(self) -> NDArray[np.int64]:
        """(child, parent) rows of the node tree decoded now (refreshed once per epoch)."""
        up = node_parents(self.nodes_, self.gamma)
        child = np.flatnonzero(up >= 0)
        return np.stack([child, up[child]], axis=1)

    def _batch(self, P: NDArray[np.float64], rows: NDArray[np.int64]) -> TripletBatch:
        shape = (rows.shape[0], self.n_internal)
        if self.noise:
            g1, g2 = self._rng.gumbel(size=shape), self._rng.gumbel(size=shape)
        else:
            g1 = g2 = np.zeros(shape)
        return TripletBatch(P[rows[:, 0]], P[rows[:, 1]], P[rows[:, 2]], g1, g2)

    def _delta(self) -> ClusteringDelta:
        """Retire the previous tree's clusters and edges, add the new one's.

        The first call writes the tree as :meth:`Hierarchy.to_delta` does. Later calls
        re-decode the whole tree, so its clusters take fresh ids after every id used
        before, and so do the batch's new points (``leaf_ids_``): a store never sees one
        id name two different nodes.
        """
        h = self.hierarchy_
        n_new = h.n_points - self.leaf_ids_.size
        live, old_edges, next_id = self._stored
        self.leaf_ids_ = np.r_[self.leaf_ids_, next_id + np.arange(n_new)]
        next_id += n_new
        clusters = next_id + np.arange(h.n_nodes - h.n_points)
        ids = np.r_[self.leaf_ids_, clusters]
        full = h.to_delta()
        delta = ClusteringDelta(
            node_id=ids,
            is_leaf=full.is_leaf,
            size=full.size,
            score=full.score,
            level_lo=full.level_lo,
            level_hi=full.level_hi,
            retired=live,
            edges_added=ids[h.edges],
            edges_retired=old_edges,
            algorithm=self.algorithm,
        )
        self._stored = (clusters, ids[h.edges], next_id + clusters.size)
        return delta
