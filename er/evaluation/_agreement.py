"""A quality signal without gold labels: how often the entities and the pair model disagree.

Two figures, each over a sample of pairs (issue #53):

- **improbable inside**: of the pairs of records inside one entity, the share the pair
  model scores under the cut (0.5 by default). Entities that chain records of many
  people through sparse, weakly linked records show it at once: most of their pairs
  are improbable even though each merge on the way looked fine.
- **probable across**: of the candidate pairs (the index's neighbours) that lie in two
  entities, the share the model scores at the cut or more: splits the hierarchy made
  against its own model.

Neither needs labels; both are estimates of the model's view, not of the truth: a model
that takes households for one person reports no disagreement about them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["agreement_figures", "inside_pairs"]


def inside_pairs(
    labels: NDArray[np.int64], budget: int, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], bool]:
    """Pairs of rows with one label: every such pair when they are ``budget`` or fewer,
    else ``budget`` pairs drawn uniformly from them (with replacement).

    Parameters
    ----------
    labels : ndarray of int64, shape (n,)
        Entity of each row.
    budget : int
        Most pairs to return.
    rng : numpy Generator

    Returns
    -------
    left, right : ndarray of int64, shape (p,)
        Rows, left != right, same label.
    sampled : bool
        Whether the pairs are a sample (False: all of them).
    """
    labels = np.asarray(labels, np.int64)
    order = np.argsort(labels, kind="stable")
    uniq, starts, sizes = np.unique(labels[order], return_index=True, return_counts=True)
    pairs = sizes * (sizes - 1) // 2
    total = int(pairs.sum())
    if total <= budget:
        lefts, rights = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for s, k in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
            i, j = np.triu_indices(k, 1)
            lefts.append(order[s + i])
            rights.append(order[s + j])
        return np.concatenate(lefts), np.concatenate(rights), False
    # an entity in proportion to its pairs, then two distinct members of it
    pick = rng.choice(uniq.size, size=budget, p=pairs / total)
    first = rng.integers(0, sizes[pick])
    second = (first + rng.integers(1, sizes[pick])) % sizes[pick]
    return order[starts[pick] + first], order[starts[pick] + second], True


def agreement_figures(
    p_inside: NDArray[np.floating], p_across: NDArray[np.floating], cut: float = 0.5
) -> dict[str, Any]:
    """The two shares (module docstring) from the model's probabilities of the pairs.

    Parameters
    ----------
    p_inside : ndarray, shape (a,)
        Match probability of pairs inside one entity.
    p_across : ndarray, shape (b,)
        Match probability of candidate pairs across two entities.
    cut : float
        Under it a pair is improbable; at it or above, probable.

    Returns
    -------
    dict
        ``inside_pairs``, ``inside_improbable`` (share, None for no pair),
        ``across_pairs``, ``across_probable`` (likewise) and ``cut``.
    """
    p_inside, p_across = np.asarray(p_inside), np.asarray(p_across)
    return {
        "inside_pairs": int(p_inside.size),
        "inside_improbable": float(np.mean(p_inside < cut)) if p_inside.size else None,
        "across_pairs": int(p_across.size),
        "across_probable": float(np.mean(p_across >= cut)) if p_across.size else None,
        "cut": float(cut),
    }
