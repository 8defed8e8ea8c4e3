"""A pair-model collection's candidate vectors weigh its fields by type; its candidates
come from blocking keys when it has several typed fields."""

from __future__ import annotations

import pytest

from er.exceptions import ConfigError
from er.featurize import FeaturizerConfig
from er.pipeline.config import CANDIDATE_WEIGHTS, new_collection_config

RECORDS = [
    {
        "rec_id": str(i),
        "name": f"ACME {i % 7} N.V.",
        "latitude": f"{50 + i / 100:.2f}",
        "classes": "A61N**A61B" if i % 2 else "G01N**C11D",
        "suburb": ["linton", "ryde", "cowes"][i % 3],
    }
    for i in range(60)
]


def test_descriptions_and_numbers_weigh_less_in_the_candidate_vectors() -> None:
    config = new_collection_config(RECORDS, id_field="rec_id", gold_field=None)
    types = config["field_types"]
    weights = {f.name: f.weight for f in FeaturizerConfig.from_json(config["featurizer"]).fields}
    assert types["latitude"] == "number" and types["classes"] == "text"
    assert weights == {name: CANDIDATE_WEIGHTS.get(kind, 1.0) for name, kind in types.items()}
    assert weights["name"] == 1.0 and weights["suburb"] == 1.0
    assert weights["latitude"] == weights["classes"] == 0.1


def test_a_given_featurizer_and_a_cosine_collection_keep_their_weights() -> None:
    inferred = new_collection_config(RECORDS, id_field="rec_id", gold_field=None)
    given = FeaturizerConfig.from_json(inferred["featurizer"]).to_json()
    for spec in given["fields"]:
        spec["weight"] = 2.0
    kept = new_collection_config(
        RECORDS, id_field="rec_id", gold_field=None, given={"featurizer": given}
    )
    assert kept["featurizer"] == given
    cosine = new_collection_config(
        RECORDS, id_field="rec_id", gold_field=None, given={"scoring": "cosine"}
    )
    fields = FeaturizerConfig.from_json(cosine["featurizer"]).fields
    assert {f.weight for f in fields} == {1.0}


def test_candidates_are_keys_for_several_typed_fields_else_exact() -> None:
    several = new_collection_config(RECORDS, id_field="rec_id", gold_field=None)
    assert several["candidates"] == "keys"
    two = [{"rec_id": r["rec_id"], "name": r["name"], "suburb": r["suburb"]} for r in RECORDS]
    assert new_collection_config(two, id_field="rec_id", gold_field=None)["candidates"] == "exact"
    cosine = new_collection_config(
        RECORDS, id_field="rec_id", gold_field=None, given={"scoring": "cosine"}
    )
    assert cosine["candidates"] == "exact"
    chosen = new_collection_config(
        RECORDS, id_field="rec_id", gold_field=None, given={"candidates": "exact"}
    )
    assert chosen["candidates"] == "exact"
    text = [{"rec_id": f"r{i}", "text": f"dept of physics univ {i} leipzig"} for i in range(50)]
    assert new_collection_config(text, id_field="rec_id", gold_field=None)["candidates"] == "words"
    places = [{**t, "city": f"c{i % 5}", "country": "de"} for i, t in enumerate(text)]
    wide = new_collection_config(places, id_field="rec_id", gold_field=None)
    assert wide["candidates"] == "keys"  # three typed fields: the records' own keys
    beside = [{**t, "name": f"anna smith{i}", "dob": "1970-01-02"} for i, t in enumerate(text)]
    for records in (two, beside):  # no text, or text beside a name and a date
        with pytest.raises(ConfigError, match='"words" is for free text alone'):
            new_collection_config(
                records, id_field="rec_id", gold_field=None, given={"candidates": "words"}
            )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"candidates": "hnsw"}, "candidates: must be one of 'keys', 'exact', 'words'. Got 'hnsw'"),
        ({"candidates": "keys", "scoring": "cosine"}, "needs typed fields"),
        ({"candidates": "words", "scoring": "cosine"}, "needs typed fields"),
    ],
)
def test_a_bad_candidates_choice_is_one_clear_line(given: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as err:
        new_collection_config(RECORDS, id_field="rec_id", gold_field=None, given=given)
    assert "\n" not in str(err.value)


def test_a_free_text_collection_gets_average_linkage_its_neighbours_and_cut() -> None:
    """Free text alone (er.match._views): average linkage over FREE_TEXT_K neighbours
    and every pair of a floor component up to FREE_TEXT_COMPLETE mentions, each level
    HAC's clusters at its threshold, cut DEFAULT_FREE_TEXT_CUT, a larger component
    completed around the clusters at the collection's cut, batches past
    FREE_TEXT_GRAFT_PAST grafted; a firm's name beside it keeps the pair defaults."""
    from er.pipeline.config import (
        DEFAULT_FREE_TEXT_CUT,
        DEFAULT_PAIR_CUT,
        FREE_TEXT_COMPLETE,
        FREE_TEXT_GRAFT_PAST,
        FREE_TEXT_K,
    )

    text = [{"rec_id": r["rec_id"], "classes": r["classes"] + " extra words"} for r in RECORDS]
    config = new_collection_config(text, id_field="rec_id", gold_field=None)
    assert config["field_types"] == {"classes": "text"}
    assert config["params"] == {
        "linkage": "average",
        "tau_min": 0.05,
        "marking": "components",
        "k": FREE_TEXT_K,
        "complete_max": FREE_TEXT_COMPLETE,
        "complete_at": DEFAULT_FREE_TEXT_CUT,
        "exact_levels": True,
        "graft_past": FREE_TEXT_GRAFT_PAST,
    }
    assert config["cut_threshold"] == DEFAULT_FREE_TEXT_CUT
    given = new_collection_config(
        text, id_field="rec_id", gold_field=None, given={"cut_threshold": 0.25}
    )
    assert given["cut_threshold"] == 0.25 and given["params"]["complete_at"] == 0.25
    firms = new_collection_config(RECORDS, id_field="rec_id", gold_field=None)
    assert firms["params"]["linkage"] == "mean" and firms["cut_threshold"] == DEFAULT_PAIR_CUT
    # typed fields: the mean runs over the proposed pairs and those held against a
    # match inside the cut's components, not over every pair (no complete_at)
    assert firms["params"]["complete_against"] is True
    assert firms["params"]["complete_within"] == DEFAULT_PAIR_CUT
    assert "complete_at" not in firms["params"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"colour": 1}, "unknown key 'colour'; known ['featurizer', 'algorithm'"),
        ({"algorithm": "kmeans"}, "algorithm: must be one of 'mbscc', 'grinch', 'llama'"),
        ({"scoring": "dice"}, "scoring: must be one of 'pair_model', 'cosine'. Got 'dice'"),
        ({"cut_threshold": True}, "cut_threshold: must be a number. Got True"),
        ({"cut_threshold": "0.4"}, "cut_threshold: must be a number. Got '0.4'"),
        ({"cut_threshold": 2}, "cut_threshold: input should be less than or equal to 1"),
        ({"params": [1]}, "params: must be an object. Got [1]"),
        ({"field_types": {"name": 5}}, "field_types.name: must be a string. Got 5"),
        ({"field_types": {"name": "colour"}}, "field_types: field 'name': 'colour' is not a type"),
        ("abc", "collection config must be a JSON object. Got 'abc'"),
    ],
)
def test_the_config_schema_refuses_with_one_line(given: object, says: str) -> None:
    """Issue #55: the given config is checked by one declared schema
    (er.pipeline.schema.GivenConfig), each error one line naming the key."""
    with pytest.raises(ConfigError) as err:
        new_collection_config(RECORDS, id_field="rec_id", gold_field=None, given=given)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_json_integer_is_a_cut() -> None:
    config = new_collection_config(
        RECORDS, id_field="rec_id", gold_field=None, given={"cut_threshold": 1}
    )
    assert config["cut_threshold"] == 1.0
