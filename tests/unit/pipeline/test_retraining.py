"""When the writer retrains a collection's first model, and on how many candidates."""

from __future__ import annotations

import pytest

from er.match import FieldWeights, PairModel
from er.pipeline.config import FREE_TEXT_K, new_collection_config
from er.pipeline.train import GROWTH_RETRAIN, TRAIN_K, grown_past_first_model, training_k


def _model(method: str, views: bool) -> PairModel:
    m, u = (1.0, 0.1, 0.9), (1.0, 0.95, 0.05)
    kind, source = ("text_grams", "aff") if views else ("text", None)
    field = FieldWeights(name="aff", kind=kind, m=m, u=u, source=source)
    return PairModel(fields=(field,), prior=0.01, method=method, n_train=1_000)


@pytest.mark.parametrize(
    ("method", "views", "retrained"),
    [
        ("em", False, True),  # people, firms: the first batch held too few duplicates
        ("em", True, False),  # free text EM fitted: kept (EM on more takes near non-matches)
        ("prior", True, True),  # free text whose first fit failed: retrained
        ("gold", False, False),  # counted from labels: the user's
    ],
)
def test_the_writer_retrains_a_first_model_unless_free_text_em_fitted_or_gold(
    method: str, views: bool, retrained: bool
) -> None:
    model = _model(method, views)
    assert not grown_past_first_model(model, GROWTH_RETRAIN - 1)
    assert grown_past_first_model(model, GROWTH_RETRAIN) is retrained


def test_a_retraining_takes_as_many_candidates_as_the_writer_proposes() -> None:
    """A free-text collection's first model was fitted on its FREE_TEXT_K neighbours; a
    retraining on TRAIN_K (10) of them fitted another model (bench/HISTORY.md)."""
    records = [{"rec_id": f"r{i}", "aff": f"dept {i % 7} univ of city {i % 3}"} for i in range(40)]
    given = {"field_types": {"aff": "text"}}
    text = new_collection_config(records, id_field="rec_id", gold_field=None, given=given)
    assert text["field_types"] == {"aff": "text"}
    assert training_k(text) == FREE_TEXT_K
    people = [{"rec_id": f"r{i}", "given_name": "ann", "surname": f"lee{i}"} for i in range(40)]
    assert training_k(new_collection_config(people, id_field="rec_id", gold_field=None)) == TRAIN_K
