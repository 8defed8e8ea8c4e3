"""A batch's features made apart from the writer (er.pipeline.features, issue #56).

Oracles: the featurizer and key functions called directly on the whole step (the
writer's path before features were stored), and the stored form read back by plain
numpy and json.
"""

from __future__ import annotations

import io
import json
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.exceptions import ERError
from er.pipeline.config import _featurizer, field_types, new_collection_config
from er.pipeline.features import (
    BatchFeatures,
    aligned,
    decode_features,
    encode_features,
    features_digest,
    joined,
    make_features,
)


@pytest.fixture(scope="module")
def febrl_rows() -> list[tuple[str, dict[str, Any]]]:
    from er.demo import febrl_records

    return [(r["rec_id"], r) for r in febrl_records()[:300]]


def _config(rows: list[tuple[str, dict[str, Any]]], **given: Any) -> dict[str, Any]:
    return new_collection_config(
        [p for _, p in rows], id_field="rec_id", gold_field="entity", given=given or None
    )


def test_a_step_s_features_are_its_batches_features_joined(febrl_rows) -> None:
    """Made batch by batch (each ingest process its own) or for the whole step at once,
    the vectors are equal bit for bit, and the rows, keys and notes too."""
    config = _config(febrl_rows)
    assert config["candidates"] in ("keys", "words")
    whole = make_features(config, febrl_rows)
    parts = joined([make_features(config, febrl_rows[a : a + 70]) for a in range(0, 300, 70)])
    assert parts.externals == whole.externals
    assert parts.X.tobytes() == whole.X.tobytes()
    assert parts.rows == whole.rows and parts.notes == whole.notes
    assert parts.keys is not None and whole.keys is not None
    assert np.array_equal(parts.keys, whole.keys)


def test_features_are_what_the_featurizer_and_the_types_give(febrl_rows) -> None:
    config = _config(febrl_rows)
    made = make_features(config, febrl_rows)
    types = field_types(config)
    assert types is not None
    norm = types.normalise([p for _, p in febrl_rows])
    assert made.rows == norm.rows
    records = [dict(zip(types.names, r, strict=True)) for r in norm.rows]
    assert made.X.tobytes() == _featurizer(config)(records).tobytes()


def test_notes_of_a_step_are_summed_over_its_batches(febrl_rows) -> None:
    config = _config(febrl_rows)
    bad = [(ext, {**p, "date_of_birth": "19999999"}) for ext, p in febrl_rows[:6]]
    parts = [make_features(config, bad[:2]), make_features(config, bad[2:])]
    assert joined(parts).notes == make_features(config, bad).notes
    assert joined(parts).notes["unreadable"]["date_of_birth"] == 6


_text = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 9),
    width=st.integers(1, 4),
    keyed=st.booleans(),
    typed=st.booleans(),
    data=st.data(),
)
def test_the_stored_form_reads_back_exactly(n, width, keyed, typed, data) -> None:
    """Ids that repeat nothing, values of any text or none, keys or none: read back by
    decode_features and, independently, by numpy and json with pickles refused."""
    externals = data.draw(st.lists(_text, min_size=n, max_size=n, unique=True))
    rows = (
        data.draw(
            st.lists(st.lists(st.none() | _text, min_size=3, max_size=3), min_size=n, max_size=n)
        )
        if typed
        else None
    )
    X = np.asarray(
        data.draw(st.lists(st.floats(-1, 1, width=32), min_size=n * width, max_size=n * width)),
        np.float32,
    ).reshape(n, width)
    keys = np.arange(n * 2, dtype=np.int64).reshape(n, 2) - 1 if keyed else None
    notes = {"unreadable": {"dob": 2}} if typed else {}
    made = BatchFeatures(externals, X, rows, keys, notes)
    data_bytes = encode_features(made)
    back = decode_features(data_bytes)
    assert back.externals == externals and back.rows == rows and back.notes == notes
    assert back.X.dtype == np.float32 and back.X.tobytes() == X.tobytes()
    assert (back.keys is None) == (keys is None)
    if keys is not None:
        assert np.array_equal(back.keys, keys)
    with np.load(io.BytesIO(zlib.decompress(data_bytes)), allow_pickle=False) as npz:
        assert json.loads(npz["doc"].tobytes())["externals"] == externals


def test_a_pickle_or_a_truncated_blob_is_refused() -> None:
    made = BatchFeatures(["a", "b"], np.ones((2, 3), np.float32))
    data = encode_features(made)
    with pytest.raises(ERError, match="unreadable"):
        decode_features(data[: len(data) // 2])
    out = io.BytesIO()
    np.savez(out, count=np.ones(2), keys=np.zeros((2, 0)), doc=np.array([{"x": 1}]))
    with pytest.raises(ERError, match="unreadable"):
        decode_features(zlib.compress(out.getvalue()))


def test_features_align_to_the_writer_s_order_or_not_at_all() -> None:
    made = BatchFeatures(
        ["a", "b", "c"], np.arange(6, dtype=np.float32).reshape(3, 2), [["x"], ["y"], ["z"]]
    )
    back = aligned(made, ["c", "a", "b"])
    assert back is not None and back.externals == ["c", "a", "b"]
    assert back.X.tolist() == [[4, 5], [0, 1], [2, 3]] and back.rows == [["z"], ["x"], ["y"]]
    assert aligned(made, ["a", "b", "c"]) is made
    assert aligned(made, ["a", "b"]) is None
    assert aligned(made, ["a", "b", "d"]) is None


def test_the_digest_follows_what_the_features_read_and_nothing_else(febrl_rows) -> None:
    config = _config(febrl_rows)
    assert features_digest(config) == features_digest({**config, "cut_threshold": 0.9})
    assert features_digest(config) == features_digest({**config, "pair_model": {"v": 2}})
    other = {**config, "field_types": {**config["field_types"], "surname": "text"}}
    assert features_digest(config) != features_digest(other)
    assert features_digest(config) != features_digest({**config, "candidates": "exact"})


def test_the_digest_holds_the_fields_order(febrl_rows) -> None:
    """A JSON column may give the field types back in another order (jsonb sorts keys);
    the rows follow that order, so features made under one are not read under the other."""
    config = _config(febrl_rows)
    turned = {**config, "field_types": dict(reversed(list(config["field_types"].items())))}
    assert features_digest(config) != features_digest(turned)
