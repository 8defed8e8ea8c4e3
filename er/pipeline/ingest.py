"""Ingest (DESIGN §4 step 1): validate a batch, store mentions and rejects, open a batch."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from er.featurize import FeaturizerConfig, RecordValidator, left_out_fields
from er.pipeline.config import _settle_config, check_collection_name
from er.pipeline.features import encode_features, features_digest, make_features
from er.stores.sql import (
    batch_mentions,
    find_collection,
    get_or_create_collection,
    lock_collection,
    open_batch,
    record_rejects,
    store_features,
    stored_payloads,
    upsert_mentions,
)

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=16)
def _validator(featurizer: str, id_field: str) -> RecordValidator:
    """The validator of a collection's featurizer (JSON text) and id field, compiled once
    per process (compiling the schema took about a tenth of an ingest task)."""
    return RecordValidator(FeaturizerConfig.from_json(json.loads(featurizer)), id_field)


def ingest_records(
    session: Session,
    *,
    collection: str,
    records: Sequence[Any],
    rejects: Sequence[Mapping[str, Any]] = (),
    id_field: str = "id",
    gold_field: str | None = None,
    config: Mapping[str, Any] | None = None,
    where: Sequence[str] | None = None,
    features: bool = False,
) -> dict[str, Any]:
    """Validate one batch of records, store mentions and rejects, open a pending batch.

    Runs in the caller's transaction. A record already stored with the same payload
    is a duplicate (one mention); with another payload, or twice in one batch with
    different payloads, it is rejected. Nothing accepted is lost: accepted mentions,
    rejects and the batch row commit together.

    Parameters
    ----------
    records : sequence, length n
        Parsed records (JSON objects; anything else is rejected).
    rejects : sequence of mapping
        Records the reader could not parse (``external_id``, ``payload``, ``reason``).
    where : sequence of str, optional, length n
        Where each record came from (``people.jsonl line 7``), to name a rejected record
        that has no id; by default its position in the batch.
    features : bool, default False
        Also make the batch's features and store them for the writer
        (:mod:`er.pipeline.features`): an ingest process beside the writer takes that
        work off it; in the writer's own process it would only add the storing.

    Returns
    -------
    dict
        ``collection``, ``batch_seq``, ``accepted`` (new mentions), ``duplicates``,
        ``rejected``, the first ``reasons``, and ``field_types`` (field -> type) when
        this batch created the collection (None otherwise).
    """
    if find_collection(session, collection) is None:
        check_collection_name(collection)  # names of collections made before stand
    coll = get_or_create_collection(session, collection)
    lock_collection(session, coll.id)
    session.refresh(coll)
    created = not coll.config.get("featurizer")
    cfg = _settle_config(coll, records, id_field, gold_field, config)
    validator = _validator(json.dumps(cfg["featurizer"], sort_keys=True), cfg["id_field"])
    batch = open_batch(session, coll.id)
    accepted, rejected, duplicates = _screen(validator, records, list(rejects), where)
    stored = stored_payloads(session, coll.id, list(accepted))
    for ext, payload in stored.items():
        if payload != accepted[ext]:
            rejected.append(
                _reject(ext, accepted[ext], "already ingested with a different payload")
            )
        else:
            duplicates += 1
        del accepted[ext]
    gold = cfg.get("gold_field")
    rows = [
        {
            "external_id": ext,
            "payload": rec,
            "gold_entity": None if gold is None or rec.get(gold) in (None, "") else rec[gold],
        }
        for ext, rec in accepted.items()
    ]
    batch.n_accepted = upsert_mentions(session, coll.id, batch.seq, rows)
    batch.n_rejected = record_rejects(session, coll.id, rejected)
    if batch.n_accepted == 0:
        batch.status = "done"  # nothing to cluster
    elif features:
        session.flush()
        if created:  # the config as the writer will read it back (field order included)
            session.refresh(coll, ["config"])
            cfg = dict(coll.config)
        # the rows as the writer reads them back: a JSON column does not hand every value
        # back as given (PostgreSQL's jsonb returns the float 4.111111111111111e19 as the
        # int 41111111111111110000, whose text differs from the float's)
        _store_features(session, batch.id, cfg, batch_mentions(session, coll.id, batch.seq))
    return {
        "collection": collection,
        "batch_seq": batch.seq,
        "accepted": batch.n_accepted,
        "duplicates": duplicates,
        "rejected": batch.n_rejected,
        "reasons": [r["reason"] for r in rejected[:20]],
        # a new collection's inferred types, for the user to see and override
        "field_types": cfg.get("field_types") if created else None,
        "left_out": _left_out(records, cfg) if created else [],
    }


def _left_out(records: Sequence[Any], config: Mapping[str, Any]) -> list[str]:
    """The first batch's fields the new collection does not compare (row numbers, lists)."""
    return left_out_fields(
        [r for r in records if isinstance(r, Mapping)],
        FeaturizerConfig.from_json(config["featurizer"]),
        id_field=config["id_field"],
        gold_field=config.get("gold_field"),
    )


def _store_features(
    session: Session, batch_id: int, config: dict[str, Any], rows: list[tuple[str, Any]]
) -> None:
    """Store the features of a batch's accepted records. Features that cannot be made
    are left to the writer, which makes them itself and fails the batch with the reason
    if it cannot either: the records are stored whatever happens here."""
    try:  # computation alone: whatever it raises (OverflowError, MemoryError...) is the writer's
        data = encode_features(make_features(config, rows))
    except Exception as exc:
        logger.warning("batch %d: features left to the writer: %r", batch_id, exc)
        return
    store_features(session, batch_id, features_digest(config), data)


def _screen(
    validator: RecordValidator,
    records: Sequence[Any],
    rejected: list[Mapping[str, Any]],
    where: Sequence[str] | None,
) -> tuple[dict[str, Any], list[Mapping[str, Any]], int]:
    """Split a batch into accepted records (by external id, first wins) and rejects."""
    accepted: dict[str, Any] = {}
    duplicates = 0
    for position, rec in enumerate(records):
        ext = validator.external_id(rec)
        why = validator.reason(rec)
        if ext is None:  # no id: the reason names where the record was
            label = where[position] if where is not None else f"record #{position}"
            rejected.append(
                {"external_id": None, "payload": _storable(rec), "reason": f"{label}: {why}"}
            )
            continue
        if why is None and ext in accepted:
            if accepted[ext] == rec:
                duplicates += 1
                continue
            why = "the same id appears twice in this batch with different payloads"
        if why is not None:
            rejected.append(_reject(ext, rec, why))
            continue
        accepted[ext] = rec
    return accepted, rejected, duplicates


def _reject(ext: str, record: Any, why: str) -> dict[str, Any]:
    return {
        "external_id": ext,
        "payload": _storable(record),
        "reason": f"record {ext!r}: {why}",
    }


def _storable(record: Any) -> Any:
    """The record as JSON a database keeps; escaped text when it is not valid JSON text."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        if "\\u0000" not in text:
            return record
    except (TypeError, ValueError, UnicodeEncodeError):
        pass
    return {"unreadable": json.dumps(record, ensure_ascii=True, default=repr)[:4096]}


# A dropped or refused database connection: retried, never a failed batch.
