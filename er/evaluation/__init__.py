"""Evaluation metrics (numpy/scipy only)."""

from er.evaluation._coref import best_cut, coreference_report, cut_at_score
from er.evaluation._flat import bcubed, ceaf_e, conll_f1, contingency_matrix, muc, pairwise_prf
from er.evaluation._report import score_hierarchy
from er.evaluation._structure import (
    best_level_f1,
    dendrogram_purity,
    dp_means_cost,
    f1_at_gold_k,
    jaccard_metrics,
)

__all__ = [
    "bcubed",
    "best_cut",
    "best_level_f1",
    "ceaf_e",
    "conll_f1",
    "contingency_matrix",
    "coreference_report",
    "cut_at_score",
    "dendrogram_purity",
    "dp_means_cost",
    "f1_at_gold_k",
    "jaccard_metrics",
    "muc",
    "pairwise_prf",
    "score_hierarchy",
]
