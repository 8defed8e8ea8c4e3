"""The writer's pair scores (DESIGN §4 step 2): the model a step scores with, any two
mentions' scores for a core that completes its components, and every list scored
again when the model changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.cluster import PairScores
from er.exceptions import ConfigError
from er.match import FieldTable, PairModel
from er.pipeline.config import stored_model
from er.pipeline.state import _State

__all__ = [
    "UNTIE_SHARE",
    "candidate_scores",
    "current_model",
    "model_scores",
    "pair_scores",
    "rescored",
]

# A pair model gives one probability per comparison pattern, so equal scores are common
# (sparse records share few patterns), and a core gives a tie to the lower point index:
# the arrival order in one writer, not in a part of a sharded collection, which appends
# a component that moves in (docs/sharding.md). A collection whose config says
# ``"tie_break": "pair"`` (new typed pair-model collections) nudges each candidate
# pair's probability down by under UNTIE_SHARE of itself, by a hash of its two
# mentions' arrival ranks, so that equal scores order alike wherever the pair is
# clustered: on 100,000 sparse people two and four parts then give one writer's
# entities (bench/RESULTS.md, "Sharding a collection"). Down, so that no score passes 1.
UNTIE_SHARE = 1e-3


def rescored(
    state: _State, idx: NDArray[np.int64], first: int, config: Mapping[str, Any]
) -> NDArray[np.float32]:
    """(b, k) the step's candidates scored by the model it ended with, every earlier
    list re-scored by it too (MBSCC.rescore): a new model redoes the whole hierarchy,
    so that no merge rests on the scores of a model that is gone (issue #53: a
    first-batch model's joins outlived it; bench/RESULTS.md, "Entity resolution quality
    on held-out sets (issue #53)"). Scored with the collection's size after the step:
    a backlog step that retrains scores its lists as its last batch would."""
    table, model = state.table, state.model
    assert table is not None and model is not None  # _scored ran
    scores = model_scores(model, table, len(table), config)
    state.core.rescore(scores)
    return candidate_scores(scores, idx, first)


def model_scores(
    model: PairModel, table: FieldTable, population: int, config: Mapping[str, Any]
) -> PairScores:
    """Any two mentions' match probability by ``model`` in a collection of
    ``population`` records, nudged apart by :func:`untied` where the collection's
    config says ``"tie_break": "pair"``."""

    def scores(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
        return model.probability(table, left, right, population)

    return untied(scores) if config.get("tie_break") == "pair" else scores


def untied(scores: PairScores) -> PairScores:
    """``scores`` with each pair's score times ``1 - UNTIE_SHARE * h``, ``h`` in [0, 1) a
    hash of its two points (arrival ranks), the same from either side (module note)."""

    def nudged(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
        lo, hi = np.minimum(left, right), np.maximum(left, right)
        h = ((lo * 2_654_435_761 + hi * 40_503) % 1_000_003) / 1_000_003
        out: NDArray[np.float64] = np.asarray(scores(left, right), np.float64)
        out *= 1.0 - UNTIE_SHARE * h
        return out

    return nudged


def candidate_scores(scores: PairScores, idx: NDArray[np.int64], first: int) -> NDArray[np.float32]:
    """(b, k) the score of each row ``first + r``'s candidate ``idx[r, c]``, 0 where
    ``idx`` is -1."""
    b, k = idx.shape
    left = np.repeat(np.arange(first, first + b), k)
    right = idx.ravel()
    ok = right >= 0
    prob = np.zeros(left.size, np.float32)
    prob[ok] = scores(left[ok], right[ok])
    return prob.reshape(b, k)


def pair_scores(state: _State) -> PairScores:
    """Any two mentions' match probability under the model that scored the batch, for
    a core that links a floor component over all its pairs (free text:
    ``er.pipeline.config.FREE_TEXT_COMPLETE``), or, for a core that takes evidence
    against alone (``complete_against``), of the pairs that contradict a match
    (:meth:`PairModel.against`, NaN for the others). The model's own trained prior, not the
    collection's size: a component's linkage does not depend on which batch last
    touched it, so a backlog stepped in groups builds what its batches would one by
    one."""
    table, model = state.table, state.model
    if table is None or model is None:
        raise ConfigError("a core linking every pair needs a pair-model collection")

    score = model.against if getattr(state.core, "complete_against", False) else model.probability

    def scores(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
        return score(table, left, right)

    return scores


def current_model(config: Mapping[str, Any], state: _State) -> PairModel | None:
    """The model to score with: the state's, unless the collection stores a newer
    version (``er train``); the state's may be newer still (trained by this writer on
    the first batch, not yet stored). The stored JSON is parsed only when it is newer."""
    doc = config.get("pair_model")
    if state.model is not None and (doc is None or doc["version"] <= state.model.version):
        return state.model
    return stored_model(config)
