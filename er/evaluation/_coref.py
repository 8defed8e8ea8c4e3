"""A coreference evaluation of one structure: entities at a cut, and what went wrong.

What ``er eval`` stores in ``eval_runs.metrics`` and what its report draws: the flat
metrics of the configured cut, the structure metrics of ``er score``, a sweep of
pairwise P/R/F1 over score thresholds, cluster sizes against gold, and the largest
errors (false merges and splits) with their mention indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from er.evaluation._flat import bcubed, ceaf_e, conll_f1, muc, pairwise_prf
from er.evaluation._report import score_hierarchy

__all__ = ["coreference_report", "cut_at_score"]


def cut_at_score(hierarchy: Any, threshold: float) -> NDArray[np.int64]:
    """(n_points,) entity of each point: its highest ancestor reached through clusters
    that all formed at a score >= ``threshold`` (the ``entity_at_score`` query).

    A point with no such ancestor is its own entity (labelled by its own id). In a
    DAG (LLAMA) each node follows its strongest parent (highest score; ties to the
    lower id), so the entities still partition the points.
    """
    parent = hierarchy.parents() if hierarchy.is_tree else _strongest_parents(hierarchy)
    score = np.nan_to_num(hierarchy.score, nan=-np.inf)
    label = np.arange(hierarchy.n_points, dtype=np.int64)
    active = np.ones(hierarchy.n_points, bool)
    while active.any():
        idx = np.flatnonzero(active)
        up = parent[label[idx]]
        ok = up >= 0
        ok[ok] &= score[up[ok]] >= threshold
        label[idx[ok]] = up[ok]
        active[idx[~ok]] = False
    return label


def _strongest_parents(hierarchy: Any) -> NDArray[np.int64]:
    """(n_nodes,) each node's parent of highest score (-1 for roots), for DAGs."""
    parent = np.full(hierarchy.n_nodes, -1, np.int64)
    edges = np.asarray(hierarchy.edges, np.int64).reshape(-1, 2)
    if edges.size:
        score = np.nan_to_num(hierarchy.score[edges[:, 1]], nan=-np.inf)
        order = np.lexsort((edges[:, 1], -score, edges[:, 0]))
        child = edges[order, 0]
        first = np.r_[True, child[1:] != child[:-1]]
        parent[child[first]] = edges[order, 1][first]
    return parent


def _codes_of(labels: ArrayLike) -> NDArray[np.int64]:
    """Labels of any type as integer codes (same partition)."""
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1).astype(np.int64)


def _sweep_thresholds(hierarchy: Any, n: int) -> NDArray[np.float64]:
    scores = hierarchy.score[hierarchy.n_points :]
    scores = np.unique(scores[np.isfinite(scores)])
    if scores.size <= n:
        return scores
    return np.unique(np.quantile(scores, np.linspace(0, 1, n), method="nearest"))


def _sizes(labels: NDArray[np.int64]) -> dict[str, int]:
    """Histogram of cluster sizes: {"size": number of clusters of that size}."""
    sizes, counts = np.unique(np.unique(labels, return_counts=True)[1], return_counts=True)
    return {str(int(s)): int(c) for s, c in zip(sizes, counts, strict=True)}


def _worst(group: NDArray[np.int64], other: NDArray[np.int64], top: int) -> list[dict[str, Any]]:
    """Groups of ``group`` that ``other`` splits into the most parts, largest first.

    O(n log n): distinct (group, other) pairs are counted per group by sorting, and
    only the ``top`` groups kept have their members gathered.
    """
    pairs = np.unique(np.stack([group, other]), axis=1)
    groups, parts = np.unique(pairs[0], return_counts=True)
    split = parts > 1
    groups, parts = groups[split], parts[split]
    if groups.size == 0:
        return []
    first = np.full(group.max() + 1, group.size, np.int64)
    np.minimum.at(first, group, np.arange(group.size))
    size = np.bincount(group)
    order = np.lexsort((first[groups], -size[groups], -parts))[:top]
    return [
        {
            "group": int(groups[k]),
            "mentions": np.flatnonzero(group == groups[k]).tolist(),
            "parts": int(parts[k]),
        }
        for k in order
    ]


def coreference_report(
    hierarchy: Any,
    gold: ArrayLike,
    *,
    threshold: float,
    pred: ArrayLike | None = None,
    n_sweep: int = 40,
    n_errors: int = 5,
) -> dict[str, Any]:
    """Every figure of one evaluation run.

    Parameters
    ----------
    hierarchy : Hierarchy
        The structure as of the evaluated batch, leaves in mention order.
    gold : array-like, shape (n_points,)
        Gold entity label of each leaf.
    threshold : float
        The collection's configured entity cut (a linkage score).
    pred : array-like, shape (n_points,), optional
        The entity of each leaf as the product gives it (the stored stable entities);
        every figure "at the cut" scores this partition. Default: the hierarchy cut at
        ``threshold`` (:func:`cut_at_score`).
    n_sweep : int
        Number of thresholds in the P/R/F1 sweep.
    n_errors : int
        How many of the worst false merges and splits to keep.

    Returns
    -------
    dict
        ``er score``'s names (``score_hierarchy``) plus ``threshold``, ``n_entities``,
        ``n_gold_entities``, ``pairwise_prf_at_cut``, ``bcubed_at_cut``,
        ``muc_at_cut``, ``ceaf_e_at_cut``, ``conll_f1_at_cut``, ``sweep`` (list of
        {threshold, precision, recall, f1, n_entities}), ``sizes`` ({predicted, gold}
        histograms), ``false_merges`` (predicted entities holding several gold
        entities; ``group`` is the entity's node id) and ``splits`` (gold entities over
        several predicted ones; ``group`` is the gold label), each a list of
        {group, mentions, parts}.
    """
    gold = np.asarray(gold)
    out = score_hierarchy(hierarchy, gold)
    pred = cut_at_score(hierarchy, threshold) if pred is None else _codes_of(pred)
    out["threshold"] = float(threshold)
    out["n_entities"] = int(np.unique(pred).size)
    out["n_gold_entities"] = int(np.unique(gold).size)
    for name, fn in (("pairwise_prf", pairwise_prf), ("bcubed", bcubed), ("muc", muc)):
        out[f"{name}_at_cut"] = list(fn(gold, pred))
    out["ceaf_e_at_cut"] = list(ceaf_e(gold, pred))
    out["conll_f1_at_cut"] = conll_f1(gold, pred)
    out["sweep"] = []
    for t in _sweep_thresholds(hierarchy, n_sweep):
        labels = cut_at_score(hierarchy, float(t))
        p, r, f = pairwise_prf(gold, labels)
        out["sweep"].append(
            {
                "threshold": float(t),
                "precision": p,
                "recall": r,
                "f1": f,
                "n_entities": int(np.unique(labels).size),
            }
        )
    _, gold_codes = np.unique(gold, return_inverse=True)
    out["sizes"] = {"predicted": _sizes(pred), "gold": _sizes(gold_codes.astype(np.int64))}
    out["false_merges"] = _worst(pred, gold_codes.astype(np.int64), n_errors)
    out["splits"] = _worst(gold_codes.astype(np.int64), pred, n_errors)
    gold_values = np.unique(gold)
    for split in out["splits"]:
        split["group"] = gold_values[split["group"]].item()  # the gold label itself
    return out
