"""Features made at ingest against what the writer reads back (er.pipeline.features).

Oracles: the writer's own features of the rows it reads from PostgreSQL, and the same
batches resolved with no stored features.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session


def _name() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


def test_features_are_made_of_the_rows_as_the_writer_reads_them(settings: Any) -> None:
    """PostgreSQL's jsonb hands the float 4.111111111111111e19 back as an int of other
    digits; the stored features are those of the row read back, not of the record as
    sent, so a code written both ways resolves the same with or without them."""
    from er.pipeline import run_cluster, run_entities, run_ingest
    from er.pipeline.features import decode_features, make_features
    from er.pipeline.stores import _stores
    from er.stores.sql import Batch, BatchFeatures, batch_mentions, find_collection

    config = {"featurizer": {"fields": [{"name": "code", "encoder": "exact"}]}}
    batches = [
        [{"id": "a", "code": 4.111111111111111e19}],
        [{"id": "b", "code": "41111111111111110000"}],
    ]
    together = {}
    for features in (False, True):
        name = _name()
        for records in batches:
            run_ingest(settings, collection=name, records=records, config=config, features=features)
        if features:
            engine, _ = _stores(settings)
            with Session(engine) as s:
                coll = find_collection(s, name)
                first = s.scalar(
                    select(Batch.id).where(Batch.collection_id == coll.id, Batch.seq == 1)
                )
                data = s.scalar(select(BatchFeatures.data).where(BatchFeatures.batch_id == first))
                rows = batch_mentions(s, coll.id, 1)
                assert (
                    decode_features(data).X.tobytes()
                    == make_features(coll.config, rows).X.tobytes()
                )
        run_cluster(settings, name)
        entity = dict(run_entities(settings, name))
        together[features] = entity["a"] == entity["b"]
    assert together[True] == together[False]


def test_features_that_cannot_be_made_leave_the_batch_stored(settings: Any) -> None:
    """A number the schema accepts ("1e999") overflows the numeric encoder: the ingest
    still stores its records and batch (the writer meets the same error and fails the
    batch with its reason); nothing accepted is lost."""
    from er.pipeline import run_ingest
    from er.pipeline.features import make_features
    from er.pipeline.stores import _stores
    from er.stores.sql import Batch, BatchFeatures, Mention, find_collection

    config = {
        "featurizer": {"fields": ["name", {"name": "age", "encoder": "numeric"}]},
        "scoring": "cosine",
    }
    records = [{"id": "a", "name": "ann", "age": "1e999"}, {"id": "b", "name": "bob", "age": 3}]
    with pytest.raises(OverflowError):
        make_features(config, [(r["id"], r) for r in records])
    name = _name()
    out = run_ingest(settings, collection=name, records=records, config=config, features=True)
    assert out["accepted"] == 2
    engine, _ = _stores(settings)
    with Session(engine) as s:
        coll = find_collection(s, name)
        assert len(s.scalars(select(Mention.id).where(Mention.collection_id == coll.id)).all()) == 2
        batch = s.scalars(select(Batch).where(Batch.collection_id == coll.id)).one()
        assert batch.status == "pending"
        assert (
            s.scalar(select(BatchFeatures.batch_id).where(BatchFeatures.batch_id == batch.id))
            is None
        )


def test_unreadable_stored_features_are_made_again_not_a_failure(settings: Any) -> None:
    from er.pipeline import run_cluster, run_ingest
    from er.pipeline.stores import _stores
    from er.stores.sql import Batch, BatchFeatures, find_collection

    name = _name()
    records = [{"id": "a", "name": "ann"}, {"id": "b", "name": "anne"}]
    run_ingest(settings, collection=name, records=records, features=True)
    engine, _ = _stores(settings)
    with Session(engine) as s, s.begin():
        coll_id = find_collection(s, name).id
        ids = select(Batch.id).where(Batch.collection_id == coll_id)
        s.execute(
            update(BatchFeatures)
            .where(BatchFeatures.batch_id.in_(ids))
            .values(data=b"not features")
        )
    (report,) = run_cluster(settings, name)
    assert "error" not in report
    with Session(engine) as s:
        assert s.scalar(select(Batch.status).where(Batch.collection_id == coll_id)) == "done"
