"""Poincaré-ball geometry and the gHHC objectives, with hand-derived gradients.

Every function works on whole batches: points ``X`` of shape (a, d) against internal
nodes ``Z`` of shape (m, d), both strictly inside the unit ball. A gradient with
respect to node ``z_n`` of a quantity ``f(x_a, z_n)`` is returned as two
coefficients ``(cz, cx)`` of shape (a, m), meaning ``df/dz_n = cz * z_n + cx * x_a``:
the gradient of a sum over many pairs is then one matrix product.

References
----------
Monath, Zaheer, Silva, McCallum, Ahmed, KDD 2019 (gHHC), Eq. 1-3, 12-17, 19-20;
Nickel & Kiela, NeurIPS 2017, Eq. 4 (the distance gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "TripletBatch",
    "cp_dissimilarity",
    "parent_loss",
    "poincare_distance",
    "poincare_norm",
    "project",
    "rsgd_step",
    "triplet_loss",
]

_TINY = 1e-12  # keeps sqrt(g^2 - 1) and ||z|| away from 0 where the gradient is undefined


def _sq(A: NDArray[np.float64]) -> NDArray[np.float64]:
    sq: NDArray[np.float64] = np.einsum("ij,ij->i", A, A)
    return sq


def poincare_distance(
    X: NDArray[np.float64], Z: NDArray[np.float64], *, grad: bool = False
) -> tuple[NDArray[np.float64], ...]:
    """Pairwise Poincaré distance (Eq. 1) and, optionally, its gradient in ``Z``.

    Parameters
    ----------
    X : ndarray of shape (a, d)
    Z : ndarray of shape (m, d)
        Rows of norm < 1.
    grad : bool
        Also return the coefficients of d dist(x_a, z_n) / d z_n.

    Returns
    -------
    dist : ndarray of shape (a, m)
    cz, cx : ndarray of shape (a, m), only if ``grad``
        ``d dist / d z_n = cz * z_n + cx * x_a``; with alpha = 1 - |z|^2,
        beta = 1 - |x|^2, g the arccosh argument (Nickel & Kiela Eq. 4):
        ``4 / (beta sqrt(g^2 - 1)) * ((|x|^2 - 2<x,z> + 1) / alpha^2 z - x / alpha)``.
    """
    x2, z2 = _sq(X), _sq(Z)
    xz = X @ Z.T
    alpha = 1.0 - z2[None, :]
    beta = 1.0 - x2[:, None]
    sq = np.maximum(x2[:, None] + z2[None, :] - 2.0 * xz, 0.0)
    g = 1.0 + 2.0 * sq / (alpha * beta)
    dist = np.arccosh(g)
    if not grad:
        return (dist,)
    root = np.sqrt(np.maximum(g * g - 1.0, _TINY))
    common = 4.0 / (beta * root * alpha)
    cz = common * (x2[:, None] - 2.0 * xz + 1.0) / alpha
    cx = -common
    return dist, cz, cx


def poincare_norm(Z: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Hyperbolic norm ``2 artanh |z|`` (Eq. 2) and its gradient coefficient.

    Returns
    -------
    norm : ndarray of shape (m,)
    cn : ndarray of shape (m,)
        ``d norm / d z = cn * z``, ``cn = 2 / ((1 - |z|^2) |z|)``.
    """
    r = np.sqrt(_sq(Z))
    return 2.0 * np.arctanh(r), 2.0 / ((1.0 - r * r) * np.maximum(r, _TINY))


def cp_dissimilarity(
    X: NDArray[np.float64], Z: NDArray[np.float64], gamma: float, *, grad: bool = False
) -> tuple[NDArray[np.float64], ...]:
    """Child-to-parent dissimilarity with margin (Eq. 16) of children X to parents Z.

    ``d_cp(x, z) = dist(x, z) * (1 + max(|z|_D - |x|_D + gamma, 0))``: the distance,
    inflated when the would-be parent is not closer to the origin by ``gamma``.

    Returns
    -------
    dcp : ndarray of shape (a, m)
    cz, cx : ndarray of shape (a, m), only if ``grad``
        ``d dcp / d z_n = cz * z_n + cx * x_a`` (X held fixed).
    """
    out = poincare_distance(X, Z, grad=grad)
    nx, _ = poincare_norm(X)
    nz, cn = poincare_norm(Z)
    excess = nz[None, :] - nx[:, None] + gamma
    h = 1.0 + np.maximum(excess, 0.0)
    dcp = out[0] * h
    if not grad:
        return (dcp,)
    dist, cz, cx = out
    active = excess > 0.0
    return dcp, h * cz + dist * active * cn[None, :], h * cx


def _child_grad(
    C: NDArray[np.float64], P: NDArray[np.float64], gamma: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[NDArray[np.float64], ...]]:
    """Row-wise d_cp(c_r, p_r) (Eq. 16) and its gradient in the child rows C.

    Returns
    -------
    dcp : ndarray of shape (r,)
    dC : ndarray of shape (r, d)
    parts : tuple
        ``(dist, excess, cn_parent)``, each of shape (r,), for the parent's gradient.
    """
    c2, p2 = _sq(C), _sq(P)
    cp = np.einsum("ij,ij->i", C, P)
    alpha, beta = 1.0 - c2, 1.0 - p2
    g = 1.0 + 2.0 * np.maximum(c2 + p2 - 2.0 * cp, 0.0) / (alpha * beta)
    dist = np.arccosh(g)
    root = np.sqrt(np.maximum(g * g - 1.0, _TINY))
    # the distance is symmetric: Nickel & Kiela Eq. 4 with the roles of x and z swapped
    d_dist = (4.0 / (beta * root * alpha))[:, None] * (
        ((p2 - 2.0 * cp + 1.0) / alpha)[:, None] * C - P
    )
    nc, cnc = poincare_norm(C)
    np_, cnp = poincare_norm(P)
    excess = np_ - nc + gamma
    h = 1.0 + np.maximum(excess, 0.0)
    d_norm = -((excess > 0.0) * cnc)[:, None] * C
    return dist * h, h[:, None] * d_dist + dist[:, None] * d_norm, (dist, excess, cnp)


def parent_loss(
    Z: NDArray[np.float64], pairs: NDArray[np.int64], gamma: float, kind: str
) -> tuple[float, NDArray[np.float64]]:
    """The child-parent margin objective (Eq. 17) over (child, parent) node pairs.

    Parameters
    ----------
    Z : ndarray of shape (m, d)
    pairs : ndarray of int64, shape (r, 2)
        Rows ``(child, parent)`` of the currently decoded tree: each child once.
    kind : {"paper", "norms"}
        ``paper``: sum of d_cp(z_c, z_p; gamma), Eq. 17 (pulls each child towards its
        parent and keeps the norm margin). ``norms``: sum of
        ``max(|z_p|_D - |z_c|_D + gamma, 0)`` only, what the authors' code optimises.

    Returns
    -------
    loss : float
    grad : ndarray of shape (m, d)
        Euclidean gradient in Z.
    """
    grad = np.zeros_like(Z)
    if pairs.size == 0:
        return 0.0, grad
    C, P = Z[pairs[:, 0]], Z[pairs[:, 1]]
    if kind == "norms":
        nc, cnc = poincare_norm(C)
        np_, cnp = poincare_norm(P)
        excess = np_ - nc + gamma
        on = (excess > 0.0)[:, None]
        grad[pairs[:, 0]] -= on * cnc[:, None] * C  # children are distinct
        np.add.at(grad, pairs[:, 1], on * cnp[:, None] * P)
        return float(np.maximum(excess, 0.0).sum()), grad
    dcp, dC, (dist, excess, cnp) = _child_grad(C, P, gamma)
    # d/dP: the distance part is _child_grad with the roles swapped; the norm part
    # enters with a plus sign because the parent's norm is the one subtracted from.
    _, dP_dist, _ = _child_grad(P, C, -np.inf)
    h = 1.0 + np.maximum(excess, 0.0)
    dP = h[:, None] * dP_dist + (dist * (excess > 0.0) * cnp)[:, None] * P
    grad[pairs[:, 0]] += dC  # children are distinct
    np.add.at(grad, pairs[:, 1], dP)
    return float(dcp.sum()), grad


@dataclass(frozen=True)
class TripletBatch:
    """One mini-batch of ordered triples: (i, j) the most similar pair, k the third.

    Parameters
    ----------
    Xi, Xj, Xk : ndarray of shape (b, d)
        The points, already inside the ball.
    noise_ij, noise_ijk : ndarray of shape (b, m)
        Gumbel noise added to the LCA distances (§4.2); zeros for none.
    """

    Xi: NDArray[np.float64]
    Xj: NDArray[np.float64]
    Xk: NDArray[np.float64]
    noise_ij: NDArray[np.float64]
    noise_ijk: NDArray[np.float64]


def _softmax(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    top = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - top)
    p: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return p


def _outer(a: NDArray[np.float64], loss: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The per-(triple, node) link: value and derivative."""
    s = 0.5 * (1.0 + np.tanh(0.5 * a))  # logistic sigmoid, overflow-free
    if loss == "sigmoid":
        return s, s * (1.0 - s)
    return np.logaddexp(0.0, a), s  # softplus = sigmoid cross-entropy with label 0


def triplet_loss(
    Z: NDArray[np.float64], batch: TripletBatch, gamma: float, loss: str = "softplus"
) -> tuple[float, NDArray[np.float64]]:
    """C_gHHC (Eq. 15) summed over a mini-batch of triples, and its gradient in Z.

    For each triple and node n, with D_t = d_cp(x_t, z_n) (Eq. 16), the LCA
    distributions are P = softmax(-(max(D_i, D_j) + G)) (Eq. 12) and
    Q = softmax(-(max(D_i, D_j, D_k) + G')) with the most likely LCA of (i, j) removed
    (Eq. 13-14); the terms are f((P - Q) D_i) + f((P - Q) D_j) + f((Q - P) D_k).

    Parameters
    ----------
    Z : ndarray of shape (m, d)
    batch : TripletBatch
    gamma : float
        Norm margin of d_cp.
    loss : {"softplus", "sigmoid"}
        f. The paper writes the sigmoid (Eq. 15); the authors' code uses the sigmoid
        cross-entropy with label 0, i.e. softplus.

    Returns
    -------
    value : float
    grad : ndarray of shape (m, d)
        Euclidean gradient; the gradient flows through P and Q as well as D.
    """
    parts = [cp_dissimilarity(X, Z, gamma, grad=True) for X in (batch.Xi, batch.Xj, batch.Xk)]
    (Di, Ai, Ci), (Dj, Aj, Cj), (Dk, Ak, Ck) = parts
    Mij = np.maximum(Di, Dj)
    Mijk = np.maximum(Mij, Dk)
    P = _softmax(-(Mij + batch.noise_ij))
    logits = -(Mijk + batch.noise_ijk)
    best = np.argmin(Mij, axis=1)  # Eq. 13 removes the noise-free most likely LCA of (i, j)
    logits[np.arange(len(best)), best] = -np.inf
    Q = _softmax(logits)
    s = P - Q
    fi, gi = _outer(s * Di, loss)
    fj, gj = _outer(s * Dj, loss)
    fk, gk = _outer(-s * Dk, loss)
    u = gi * Di + gj * Dj - gk * Dk  # d loss / d s
    dMij = -P * (u - (u * P).sum(axis=1, keepdims=True))
    dMijk = Q * (u - (u * Q).sum(axis=1, keepdims=True))
    dDi, dDj, dDk = gi * s, gj * s, -gk * s
    to_k = Dk > Mij  # route the max's gradient to the argument that attains it
    dDk += dMijk * to_k
    dMij += dMijk * ~to_k
    to_i = Di >= Dj
    dDi += dMij * to_i
    dDj += dMij * ~to_i
    grad = np.zeros_like(Z)
    for dD, A, C, X in ((dDi, Ai, Ci, batch.Xi), (dDj, Aj, Cj, batch.Xj), (dDk, Ak, Ck, batch.Xk)):
        grad += (dD * A).sum(axis=0)[:, None] * Z + (dD * C).T @ X
    return float(fi.sum() + fj.sum() + fk.sum()), grad


def rsgd_step(
    Z: NDArray[np.float64], grad: NDArray[np.float64], lr: float, max_norm: float
) -> NDArray[np.float64]:
    """One Riemannian SGD step (Eq. 18-20), then projection onto the ball of max_norm.

    The Riemannian gradient is the Euclidean one times (1 - |z|^2)^2 / 4 (Eq. 20);
    the retraction is z + g (Eq. 19), rows beyond ``max_norm`` scaled back onto it.
    """
    scale = (1.0 - _sq(Z)) ** 2 / 4.0
    Z = Z - lr * scale[:, None] * grad
    return project(Z, max_norm)


def project(Z: NDArray[np.float64], max_norm: float) -> NDArray[np.float64]:
    """Rows of Z with norm above ``max_norm`` scaled onto the sphere of that radius."""
    r = np.sqrt(_sq(Z))
    over = r > max_norm
    Z = Z.copy()
    Z[over] *= (max_norm / r[over])[:, None]
    return Z
