"""The pair model: typed field comparisons and trained Fellegi-Sunter weights.

Candidate pairs come from the ANN index; this package turns each into a match
probability from the records' normalised fields (DESIGN §4, step 2):
:class:`FieldTable` holds the normalised values as codes, :func:`compare_field` gives
each pair's comparison level per field, :func:`train_pair_model` estimates the
weights (EM without labels, or from gold), and :class:`PairModel` scores and explains.
Depends on numpy, rapidfuzz, jellyfish and nicknames; no store, no clustering core.
"""

from er.match._compare import LADDERS, Ladder, compare_field
from er.match._model import FieldWeights, PairModel
from er.match._recount import recounted_u
from er.match._table import FieldTable
from er.match._train import random_pairs, train_pair_model

__all__ = [
    "LADDERS",
    "FieldTable",
    "FieldWeights",
    "Ladder",
    "PairModel",
    "compare_field",
    "random_pairs",
    "recounted_u",
    "train_pair_model",
]
