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
        ("em", True, True),  # free text EM fitted: its u counted again (grown_model)
        ("prior", True, True),  # free text whose first fit failed: retrained
        ("gold", False, False),  # counted from labels: the user's
    ],
)
def test_the_writer_replaces_a_first_model_unless_counted_from_gold(
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


def test_a_retraining_proposes_a_persons_records_across_homes() -> None:
    """Each record's nearest by its personal fields alone (identity_vectors): a person's
    two records in two cities are each other's nearest, where by the whole record a
    neighbour of another name in the same city and firm comes first (brute force
    over cosines of the featurized records)."""
    import numpy as np

    from er.featurize import FieldTypes
    from er.match import FieldTable
    from er.pipeline.config import _featurizer
    from er.pipeline.train import exact_candidates, identity_vectors

    def rec(i: int, first: str, last: str, city: str, firm: str) -> dict[str, str]:
        return {
            "rec_id": f"r{i}",
            "first_name": first,
            "last_name": last,
            "date": f"19{len(first) + len(last) + 40}-03-04",
            "city": city,
            "street": f"{city} road 1",
            "firm": firm,
        }

    names = [("hiroshi", "tanaka"), ("mei", "lin"), ("omar", "haddad"), ("ruth", "berg")]
    records = [
        rec(0, "anna", "kowalska", "boston", "acme corp"),
        rec(1, "anna", "kowalska", "seattle", "globex inc"),
    ]
    records += [
        rec(2 + j, f, s, city, firm)
        for j, (f, s) in enumerate(names)
        for city, firm in [("boston", "acme corp")]
    ]
    records += [rec(6 + j, f, s, "seattle", "globex inc") for j, (f, s) in enumerate(names)]
    given = {
        "field_types": {
            "first_name": "person_name",
            "last_name": "person_name",
            "date": "date",
            "city": "place",
            "street": "address",
            "firm": "org_name",
        }
    }
    config = new_collection_config(records, id_field="rec_id", gold_field=None, given=given)
    types = FieldTypes(config["field_types"])
    table = FieldTable(types.names)
    norm = types.normalise([{k: v for k, v in r.items() if k != "rec_id"} for r in records])
    table.add(norm.rows)
    whole = _featurizer(config)([table.values(r) for r in range(len(table))])
    identity = identity_vectors(table, config)
    assert identity is not None
    for X, together in ((whole, False), (identity, True)):
        V = X / np.linalg.norm(X, axis=1, keepdims=True)
        C = V @ V.T
        np.fill_diagonal(C, -np.inf)
        assert (int(np.argmax(C[0])) == 1) is together  # brute force
        left, right = exact_candidates(X, 1)
        assert ((0, 1) in set(zip(left.tolist(), right.tolist(), strict=True))) is together
