"""All metrics of one hierarchy in one dict (what `er score` prints)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from er.evaluation._flat import bcubed, conll_f1, pairwise_prf
from er.evaluation._structure import best_level_f1, dendrogram_purity, f1_at_gold_k, jaccard_metrics


def score_hierarchy(hierarchy: Any, gold: ArrayLike) -> dict[str, Any]:
    """Structure metrics for any hierarchy; tree and level metrics where they apply."""
    gold = np.asarray(gold)
    if gold.shape[0] != hierarchy.n_points:
        raise ValueError(
            f"labels has {gold.shape[0]} entries but the structure has {hierarchy.n_points} points."
        )
    out: dict[str, Any] = {"n_points": hierarchy.n_points, "n_nodes": hierarchy.n_nodes}
    out.update(jaccard_metrics(hierarchy, gold))
    if not hierarchy.is_tree:
        return out
    out["dendrogram_purity"] = dendrogram_purity(hierarchy, gold)
    f1, level = best_level_f1(hierarchy, gold)
    out["best_level_pairwise_f1"] = f1
    out["best_level"] = level
    out["f1_at_gold_k"] = f1_at_gold_k(hierarchy, gold)
    cut = hierarchy.cut(level)
    out["pairwise_prf_at_best_level"] = list(pairwise_prf(gold, cut))
    out["bcubed_f1_at_best_level"] = bcubed(gold, cut)[2]
    out["conll_f1_at_best_level"] = conll_f1(gold, cut)
    return out
