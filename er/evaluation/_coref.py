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
from er.evaluation._structure import joined_pair_counts

__all__ = ["best_cut", "coreference_report", "cut_at_score"]


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


def best_cut(
    hierarchy: Any, gold: ArrayLike, labelled: ArrayLike, *, above: float | None = None
) -> dict[str, Any]:
    """The cut of ``hierarchy`` at which its labelled points score the best pairwise F1.

    What development data says the cut should be (issue #29: "0.5 by default unless
    development data says otherwise"). The labelled points are taken to be whole
    entities (a sample of entities, each with every one of its mentions labelled):
    a pair of two labelled points counts as usual, and a labelled point cut together
    with an unlabelled one is a false merge (it belongs to no labelled entity).
    Pairs of two unlabelled points count in no figure. Counting only the pairs of
    two labelled points, as a first version did, never sees a labelled entity
    swallowing unlabelled mentions, and chose cuts far too low from a small sample.

    Exact: every partition the hierarchy gives is scored, in one pass over its edges
    in descending order of the score at which each joins (union-find), O(n log n).

    Parameters
    ----------
    hierarchy : Hierarchy
        The structure, leaves in mention order (a DAG: each node's strongest parent).
    gold : array-like, shape (n_points,)
        Gold entity label of each leaf (any value where ``labelled`` is False).
    labelled : array-like of bool, shape (n_points,)
        Which leaves carry a gold label.
    above : float, optional
        Only cuts above this (0 for a match probability: a cut must be in (0, 1]).

    Returns
    -------
    dict
        ``threshold`` (the cut: the middle of the widest score interval whose cuts all
        score the best F1, so a merge scored near an edge does not flip it),
        ``precision``, ``recall``, ``f1`` (at that cut, as defined above),
        ``n_labelled``.

    Raises
    ------
    ValueError
        If the labels hold no two points of one entity, or no cut joins two of them
        (the F1 is 0 at every cut): the labels cannot choose a cut then.
    """
    mask = np.asarray(labelled, bool)
    codes = np.full(mask.size, -1, np.int64)
    codes[mask] = _codes_of(np.asarray(gold, dtype=object)[mask].astype(str))
    sizes = np.bincount(codes[mask])
    gold_pairs = float((sizes * (sizes - 1) // 2).sum())
    if gold_pairs == 0:
        raise ValueError("the gold labels hold no two mentions of one entity")
    at, tp, pred = _sweep_union(hierarchy, codes, above)
    p = np.where(pred > 0, tp / np.maximum(pred, 1), 1.0)
    r = tp / gold_pairs
    f1 = np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-300), 0.0)
    if f1.size == 0 or f1.max() <= 0:
        raise ValueError("no cut joins two labelled mentions of one entity")
    lo, hi = _widest_best_run(f1, at, above)
    low = at[hi + 1] if hi + 1 < at.size else above
    threshold = (float(at[lo]) + float(at[hi] if low is None else low)) / 2
    # the cut's partition: the joins at or above it, (at[i + 1], at[i]]
    i = int(np.searchsorted(-at, -threshold, side="right")) - 1
    return {
        "threshold": threshold,
        "precision": float(p[i]),
        "recall": float(r[i]),
        "f1": float(f1[i]),
        "n_labelled": int(mask.sum()),
    }


def _sweep_union(
    hierarchy: Any, codes: NDArray[np.int64], above: float | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Every partition of the hierarchy's cuts, highest cut first, with its pair counts.

    An edge (child, parent) holds at a cut t when both nodes formed at a score >= t
    (a leaf always has): then and only then does a point below the child climb
    through it (:func:`cut_at_score`). Joining the edges in descending order of that
    score gives the partition of every cut.

    Returns
    -------
    at : ndarray of float, shape (m,)
        The distinct scores at which edges join, descending (and above ``above``):
        the partition of cut ``at[i]`` holds for every cut in (at[i + 1], at[i]].
    tp, pred : ndarray of float, shape (m,)
        Pairs of two labelled points of one gold entity in one part; pairs in one
        part with at least one labelled point.
    """
    parent = hierarchy.parents() if hierarchy.is_tree else _strongest_parents(hierarchy)
    score = np.nan_to_num(hierarchy.score, nan=-np.inf).astype(np.float64)
    score[: hierarchy.n_points] = np.inf
    child = np.flatnonzero(parent >= 0)
    join = np.minimum(score[child], score[parent[child]])
    keep = np.isfinite(join) if above is None else join > above
    child, join = child[keep], join[keep]
    order = np.argsort(-join, kind="stable")
    child, join = child[order], join[order]
    tp, pred = joined_pair_counts(hierarchy.n_nodes, codes, child, parent[child])
    last = np.ones(join.size, bool)  # the last edge joining at each score
    last[:-1] = join[1:] != join[:-1]
    return join[last], tp[last].astype(np.float64), pred[last].astype(np.float64)


def _widest_best_run(
    f1: NDArray[np.float64], at: NDArray[np.float64], above: float | None
) -> tuple[int, int]:
    """First and last index of the run of consecutive best values of ``f1`` (one per
    cut ``at``, descending) whose cuts span the widest score interval; the highest
    such run on a tie."""
    best = f1 >= f1.max() - 1e-12
    edges = np.flatnonzero(np.diff(np.r_[0, best.astype(np.int8), 0]))
    starts, ends = edges[0::2], edges[1::2] - 1

    def width(i: int) -> float:
        below = at[ends[i] + 1] if ends[i] + 1 < at.size else above
        return float(at[starts[i]] - (below if below is not None else at[ends[i]]))

    k = max(range(starts.size), key=lambda i: (width(i), -starts[i]))
    return int(starts[k]), int(ends[k])


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
