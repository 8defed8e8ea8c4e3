"""Featurizer and record validation: against exact n-gram cosines and jsonschema itself."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from er.exceptions import ConfigError
from er.featurize import (
    FeaturizerConfig,
    FieldSpec,
    RecordValidator,
    featurize,
    infer_config,
    left_out_fields,
    normalize_text,
    record_schema,
)
from er.featurize._config import ROW_NUMBERS_MIN

NAMES = ["mitchell", "richmond", "mithcell", "richmaond", "blair athol", "wallaby place"]


def _grams(text: str, sizes: tuple[int, ...] = (2, 3)) -> Counter[str]:
    padded = f"^{normalize_text(text)}$"
    return Counter(padded[i : i + n] for n in sizes for i in range(max(1, len(padded) - n + 1)))


def _exact_cosine(a: dict[str, str], b: dict[str, str], cfg: FeaturizerConfig) -> float:
    """Cosine of the weighted sum of per-field unit n-gram vectors, without hashing."""

    def vec(rec: dict[str, str]) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for spec in cfg.fields:
            if not rec.get(spec.name):
                continue
            g = _grams(rec[spec.name], spec.n)
            norm = math.sqrt(sum(v * v for v in g.values()))
            for tok, v in g.items():
                out[(spec.name, tok)] = math.sqrt(spec.weight) * v / norm
        return out

    va, vb = vec(a), vec(b)
    dot = sum(v * vb.get(k, 0.0) for k, v in va.items())
    return dot / math.sqrt(sum(v * v for v in va.values()) * sum(v * v for v in vb.values()))


@given(
    st.lists(
        st.fixed_dictionaries(
            {"first": st.sampled_from(NAMES), "last": st.sampled_from([*NAMES, ""])}
        ),
        min_size=2,
        max_size=6,
    ),
    st.floats(0.2, 5.0),
)
@settings(max_examples=60, deadline=None)
def test_hashed_cosine_tracks_the_exact_ngram_cosine(records, weight) -> None:
    cfg = FeaturizerConfig(fields=(FieldSpec("first"), FieldSpec("last", weight=weight)), dim=4096)
    X = featurize(records, cfg).astype(np.float64)
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-6)
    for i in range(len(records)):
        for j in range(len(records)):
            exact = _exact_cosine(records[i], records[j], cfg)
            # signed hashing is unbiased; at 4,096 columns collisions move it little
            assert X[i] @ X[j] == pytest.approx(exact, abs=0.08)


def test_identical_records_coincide_and_fields_do_not_leak() -> None:
    cfg = FeaturizerConfig(fields=(FieldSpec("a"), FieldSpec("b")), dim=1024)
    X = featurize([{"a": "smith", "b": ""}, {"a": "", "b": "smith"}, {"a": "SMITH "}], cfg)
    assert X[0] @ X[2] == pytest.approx(1.0, abs=1e-6)  # case and spaces normalised
    assert abs(X[0] @ X[1]) < 0.3  # the same text in another field is another feature


def test_same_vectors_in_another_process_and_order() -> None:
    """No global state, no per-process hash seed: a replayed batch gives the same vectors."""
    records = [{"a": n, "b": n[::-1]} for n in NAMES]
    cfg = FeaturizerConfig(fields=(FieldSpec("a"), FieldSpec("b", encoder="exact")), dim=256)
    here = featurize(records, cfg)
    code = (
        "import json,sys,numpy as np\n"
        "from er.featurize import FeaturizerConfig, featurize\n"
        "cfg = FeaturizerConfig.from_json(json.loads(sys.argv[1]))\n"
        "print(json.dumps(featurize(json.loads(sys.argv[2]), cfg).tolist()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cfg.to_json()), json.dumps(records)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
    )
    assert np.array_equal(np.array(json.loads(out.stdout), np.float32), here)
    assert np.array_equal(featurize(records[::-1], cfg)[::-1], here)


def test_numeric_encoder_shares_tokens_between_close_values() -> None:
    cfg = FeaturizerConfig(fields=(FieldSpec("age", encoder="numeric", scale=5.0),), dim=512)
    X = featurize([{"age": 40}, {"age": 42}, {"age": 90}], cfg)
    assert X[0] @ X[1] > 0.4 and abs(X[0] @ X[2]) < 0.2


def test_vector_field_passes_through_normalised() -> None:
    cfg = FeaturizerConfig(dim=3, vector_field="vector")
    X = featurize([{"vector": [3e20, 0, 4e20]}], cfg)
    assert np.allclose(X, [[0.6, 0.0, 0.8]])


def test_config_round_trips_and_bad_configs_say_what_is_wrong() -> None:
    cfg = FeaturizerConfig(
        fields=(FieldSpec("name", weight=2.0, n=(3,)), FieldSpec("zip", encoder="exact")), dim=64
    )
    assert FeaturizerConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    for doc, words in [
        ({"fields": [{"name": "a", "encoder": "soundex"}]}, "encoder must be one of"),
        ({"fields": [{"name": "a", "weight": -1}]}, "weight must be a number > 0"),
        ({"fields": ["a", "a"]}, "listed twice"),
        ({"fields": []}, "at least one field"),
        ({"fields": ["a"], "dim": 1}, "dim must be"),
        ({"fields": ["a"], "colour": 1}, "unknown key"),
    ]:
        with pytest.raises(ConfigError, match=words):
            FeaturizerConfig.from_json(doc)


def test_inferred_config_leaves_out_id_and_gold_and_sees_vectors() -> None:
    recs = [
        {"id": 1, "gold": "e", "name": "x", "city": None, "tags": ["a"]},
        {"id": 2, "city": "y"},
    ]
    cfg = infer_config(recs, id_field="id", gold_field="gold")
    assert [f.name for f in cfg.fields] == ["name", "city"]
    assert infer_config([{"id": 1, "vector": [1, 2]}], id_field="id").vector_field == "vector"
    with pytest.raises(ConfigError, match="no text fields"):
        infer_config([{"id": 1}], id_field="id")


CFG = FeaturizerConfig(fields=(FieldSpec("name"), FieldSpec("zip", encoder="exact")), dim=8)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"name": "a"}, "field 'id': required field is missing"),
        ({"id": "1", "name": ["a"]}, "field 'name': expected string or number"),
        ({"id": "1", "name": "x" * 70_000}, "record larger than 64 KiB"),
        ({"id": "1", "name": "bad \ud800"}, "field 'name': not valid UTF-8"),
        ({"id": "1", "name": "nul \x00"}, "field 'name': contains a NUL character"),
        ({"id": "1", "name": float("nan")}, "field 'name': non-finite number"),
        ({"id": "1", "zip": ""}, "no featurized field has a value"),
        ({"id": "", "name": "a"}, "field 'id'"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_each_bad_record_gets_one_reason_naming_the_field(record, reason) -> None:
    assert reason in (RecordValidator(CFG, "id").reason(record) or "")


def test_vector_records_need_dim_finite_numbers() -> None:
    v = RecordValidator(FeaturizerConfig(dim=3, vector_field="vector"), "id")
    assert v.reason({"id": 1, "vector": [1, 2, 3]}) is None
    assert "has 2 numbers, expected 3" in v.reason({"id": 1, "vector": [1, 2]})
    assert "non-finite" in v.reason({"id": 1, "vector": [1, float("inf"), 3]})
    assert "all zeros" in v.reason({"id": 1, "vector": [0, 0, 0]})


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.text(min_size=1001, max_size=1002),
)
records = st.dictionaries(
    st.sampled_from(["id", "name", "zip", "other"]),
    st.one_of(
        scalars, st.lists(scalars, max_size=2), st.dictionaries(st.text(max_size=2), scalars)
    ),
)


@given(records)
@settings(max_examples=300, deadline=None)
def test_fast_validator_agrees_with_jsonschema(record) -> None:
    """The compiled fast path accepts exactly what jsonschema (the reference) accepts,
    and a record outside the schema is always refused."""
    reference = Draft7Validator(record_schema(CFG, "id")).is_valid(record)
    validator = RecordValidator(CFG, "id")
    assert validator.matches_schema(record) == reference
    if not reference:
        assert validator.reason(record) is not None


# -- row numbers: a data frame's index written with the records -----------------------------
ROW_HEADERS = ["", "Unnamed: 0", "index", "Row No", "rowNumber", "line_no", "record_number"]


def _with_column(name: str, values: list[str]) -> list[dict[str, str]]:
    return [{"id": f"r{i}", "name": f"person {i % 7}", name: v} for i, v in enumerate(values)]


@settings(max_examples=60, deadline=None)
@given(
    header=st.sampled_from(ROW_HEADERS),
    n=st.integers(ROW_NUMBERS_MIN, 400),
    start=st.integers(0, 10**6),
    spread=st.integers(1, 50),
    seed=st.integers(0, 2**16),
)
def test_an_index_column_is_left_out_whatever_its_order(
    header: str, n: int, start: int, spread: int, seed: int
) -> None:
    """A row index's header over distinct whole numbers, however far apart (a shuffled
    file's index): left out of the comparison, and reported as such."""
    rng = random.Random(seed)
    values = [str(v) for v in rng.sample(range(start, start + n * spread), n)]
    recs = _with_column(header, values)
    cfg = infer_config(recs, id_field="id")
    assert [f.name for f in cfg.fields] == ["name"]
    assert left_out_fields(recs, cfg, id_field="id", gold_field=None) == [header]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(ROW_NUMBERS_MIN, 400), start=st.integers(0, 10**9), seed=st.integers(0, 99))
def test_a_running_count_is_left_out_under_any_header(n: int, start: int, seed: int) -> None:
    """Distinct whole numbers filling their range are a count of rows (a form's number)."""
    values = [str(v) for v in random.Random(seed).sample(range(start, start + n), n)]
    recs = _with_column("form_number", values)
    assert [f.name for f in infer_config(recs, id_field="id").fields] == ["name"]


@pytest.mark.parametrize(
    "header, values",
    [
        # an identifier of people: distinct, spread out (nine digits)
        ("ssn", [str(100_000_000 + 7_919 * i % 899_999_999) for i in range(300)]),
        # a running count an entity's records share: repeats
        ("customer_no", [str(i // 3) for i in range(300)]),
        # an index header over repeated or lettered values
        ("index", [str(i % 100) for i in range(300)]),
        ("Unnamed: 1", [f"A{i}" for i in range(300)]),
        # too few values to tell
        ("Unnamed: 0", [str(i) for i in range(ROW_NUMBERS_MIN - 1)]),
    ],
)
def test_what_is_not_a_row_number_is_compared(header: str, values: list[str]) -> None:
    recs = _with_column(header, values)
    cfg = infer_config(recs, id_field="id")
    assert header in [f.name for f in cfg.fields]
    assert left_out_fields(recs, cfg, id_field="id", gold_field=None) == []


def test_a_field_without_a_name_is_left_out_and_reported() -> None:
    """A CSV's blank header (a data frame's index) cannot be named in a config."""
    recs = _with_column("", [f"A{i % 3}" for i in range(10)])
    cfg = infer_config(recs, id_field="id")
    assert [f.name for f in cfg.fields] == ["name"]
    assert left_out_fields(recs, cfg, id_field="id", gold_field=None) == [""]
